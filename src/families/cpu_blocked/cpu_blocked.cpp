// cpu_blocked's interface: parameters, constraints and defaults from the problem and the active ISA, and the
// Convolution that prepares a strategy once and runs it (weights packed per run or once, stages timed).
#include "src/families/cpu_blocked/cpu_blocked.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <utility>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "src/core/thread_pool.h"
#include "src/families/cpu_blocked/plan.h"
#include "src/measure/cpu_ceilings.h"

namespace convtune::cpu_blocked {

namespace {

using detail::ceil_div;
using detail::KernelTable;
using detail::half_l2;
using detail::image_copy_bytes;
using detail::l1d_bytes;
using detail::l2_bytes;
using detail::l2_scaled;

const std::vector<int64_t> kVecs = {1, 2, 3, 4, 6, 8};
const std::vector<int64_t> kCols = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 16, 20, 24, 28};
const std::vector<int64_t> kRowBlocks = {1, 2, 4, 8, 16, 32, 0};
const std::vector<int64_t> kChunks = {0, 16, 32, 64, 128, 256};

bool is_filter(const ConvProblem& pb) { return pb.direction == Direction::BackwardFilter; }

// Facts of a problem the constraints and the default read.
struct Shape {
  int64_t oc = 1;        // forward/backward-data: channels written per group
  int64_t ic = 1;        // channels read per group
  int64_t row = 1;       // longest output row of a phase (pixels a broadcast block can cover)
  int64_t rows = 1;      // most output rows of a phase
  int64_t taps = 1;      // filter taps per phase (the reduction per channel)
  bool unit_rows = true; // input rows read at unit stride (pixel vectors possible)
};

Shape shape_of(const ConvProblem& pb) {
  Shape s;
  if (pb.direction == Direction::Forward) {
    s.oc = pb.k_per_group(), s.ic = pb.c_per_group();
    s.row = pb.q(), s.rows = pb.p(), s.taps = pb.r * pb.s;
    s.unit_rows = pb.stride.w == 1;
  } else if (pb.direction == Direction::BackwardData) {
    s.oc = pb.c_per_group(), s.ic = pb.k_per_group();
    s.row = (pb.w + pb.stride.w - 1) / pb.stride.w, s.rows = (pb.h + pb.stride.h - 1) / pb.stride.h;
    s.taps = std::max<int64_t>(1, (pb.r / pb.stride.h) * (pb.s / pb.stride.w));
  } else {
    s.oc = pb.k_per_group(), s.ic = pb.c_per_group();
    s.row = pb.q(), s.rows = pb.p(), s.taps = pb.r * pb.s;
  }
  return s;
}


// WIDTH 1 (the AVX2 kernels) is a candidate where the active ISA is AVX-512 and this CPU also runs AVX2.
bool half_width_available() {
  if (active_isa() != Isa::Avx512) return false;
  const std::vector<Isa> isas = available_isas();
  return std::find(isas.begin(), isas.end(), Isa::Avx2) != isas.end();
}

// The kernels of WIDTH `width` (0: the active ISA's).
const KernelTable& kernels(int64_t width = 0) { return detail::kernel_table(width == 1 ? Isa::Avx2 : active_isa()); }

bool bcast_compiled(const KernelTable& kt, int64_t nv, int64_t nj) {
  return nv >= 1 && nv <= detail::kMaxNv && nj >= 1 && nj <= detail::kMaxNj && kt.bcast[nv - 1][nj - 1];
}
bool dot_compiled(const KernelTable& kt, int64_t ni, int64_t nj) {
  return ni >= 1 && ni <= detail::kMaxDotRows && nj >= 1 && nj <= detail::kMaxDotColumns && kt.dot[ni - 1][nj - 1];
}

// Filter taps of one stride class along a row (dots handle one class per block).
int64_t taps_per_class(const ConvProblem& pb) {
  const int64_t period = pb.stride.w / std::gcd(pb.stride.w, pb.dilation.w);
  return ceil_div(pb.s, period);
}

// Cycles of one reduction step of an nv x nj broadcast block: FMA-bound (2 vector FMAs a cycle), load-bound
// (nv vectors + nj broadcasts, 2 loads a cycle, plus loop upkeep) or latency-bound (each accumulator is updated
// once a step; an FMA takes 4 cycles, and blocks of fewer than 12 accumulators measured well below the FMA rate,
// so 6 cycles). A model for choosing defaults, not a promise.
double step_cycles(int64_t nv, int64_t nj) {
  return std::max({static_cast<double>(nv * nj) / 2.0, static_cast<double>(nv + nj) / 2.0 + 0.5, 6.0});
}

// How busy a broadcast block keeps the FMA units over a problem: `vector_extent` elements laid along the vectors
// (channel padding to whole blocks is wasted) and `columns` along the broadcasts (split into blocks of nj and
// smaller compiled widths for the rest).
double block_efficiency(const KernelTable& kt, int64_t nv, int64_t nj, int64_t vector_extent, int64_t columns) {
  const int64_t span = nv * kt.lanes;
  const double fill = static_cast<double>(vector_extent) / static_cast<double>(ceil_div(vector_extent, span) * span);
  double cycles = 0;
  int64_t left = columns;
  while (left > 0) {
    int64_t w = std::min(left, nj);
    while (w > 1 && !kt.bcast[nv - 1][w - 1]) --w;
    cycles += step_cycles(nv, w);
    left -= w;
  }
  return fill * static_cast<double>(nv * columns) / 2.0 / cycles;
}

// Whether `columns` split into blocks of nj (and smaller compiled widths for the rest) leaves no block of three
// or more vectors and fewer than 16 accumulators, unless the nv x nj block itself is that small. (Two vectors under
// 13 + 13 + 6 columns ran 3-11% faster than 12 + 12 + 8: Fashion-MNIST's first layer, 64 images, pixel vectors.)
bool splits_evenly(const KernelTable& kt, int64_t nv, int64_t nj, int64_t columns) {
  for (int64_t left = columns; left > 0;) {
    int64_t w = std::min(left, nj);
    while (w > 1 && !kt.bcast[nv - 1][w - 1]) --w;
    if (nv >= 3 && nv * w < std::min<int64_t>(16, nv * nj)) return false;
    left -= w;
  }
  return true;
}

// The most efficient compiled block by that model (ties: the larger block, fewer calls). With `even_split` (pixel
// vectors), ties go first to a split without a small last block (splits_evenly), then to the larger block, then to
// fewer loads a step. Pixel vectors over 8 output channels rated 4 x 5 + 4 x 3 as high as 4 x 4 twice, but the
// 4 x 3 block ran far below the FMA rate (ResNeXt's 8-channel groups, 56x56, 8 images, two threads, in rounds with
// oneDNN, AMD EPYC (Zen 4): 4 x 5 + 4 x 3 11.2-11.9 ms, 4 x 4 9.8-10.6, 2 x 8 11.4, 4 x 3 + 4 x 3 + 4 x 2 14.8;
// forward and backward-data alike); MobileNetV2's 24 -> 144 1x1 at 56x56 (16 images) 4 x 6 against 2 x 12, the
// same size with fewer loads: 3.1-3.9 ms against 3.7-4.6.
std::pair<int64_t, int64_t> best_bcast_block(const KernelTable& kt, int64_t vector_extent, int64_t columns,
                                             double* efficiency = nullptr,
                                             bool whole_rows = false, bool even_split = false) {
  std::pair<int64_t, int64_t> best{1, 1};
  double best_eff = -1;
  bool best_even = false;
  const int64_t vec_limit = std::min<int64_t>(ceil_div(vector_extent, kt.lanes), detail::kMaxNv);
  for (int64_t nv = 1; nv <= vec_limit; ++nv) {
    for (int64_t nj : kCols) {
      if (nj > columns || !kt.bcast[nv - 1][nj - 1]) continue;
      const double eff = block_efficiency(kt, nv, nj, vector_extent, columns);
      const bool even = even_split && splits_evenly(kt, nv, nj, columns);
      const bool tie = eff > best_eff - 1e-9 && eff < best_eff + 1e-9;
      const bool better_tie =
          even_split ? (even && !best_even) ||
                           (even == best_even && nv * nj == best.first * best.second
                                ? nv + nj < best.first + best.second
                                : even == best_even && nv * nj > best.first * best.second)
                     : nv * nj > best.first * best.second;
      if (eff > best_eff + 1e-9 || (tie && better_tie)) best_eff = eff, best = {nv, nj}, best_even = even;
    }
  }
  // Columns that are one output row (the direct path): a block that takes the whole row where the best splits it,
  // if its efficiency is within 5% of the best. The model rates a row of 7 split 4 + 3 under four vectors (a
  // filled last vector) above a whole row under three (ResNet's last stage, 2048 -> 512 1x1 on 7x7, two threads:
  // 3.98 ms split, 3.25 whole, forward; 4.01 and 3.12 backward-data): each block streams the filter slab again.
  if (whole_rows && best.second < columns) {
    for (int64_t nv = vec_limit; nv >= 1; --nv) {
      if (std::find(kCols.begin(), kCols.end(), columns) == kCols.end() || !kt.bcast[nv - 1][columns - 1]) continue;
      const double eff = block_efficiency(kt, nv, columns, vector_extent, columns);
      if (eff >= 0.95 * best_eff) {
        best_eff = eff, best = {nv, columns};
        break;
      }
    }
  }
  if (efficiency) *efficiency = best_eff;
  return best;
}

// Whole-plane dots (backward-filter ORIENT 1, LAYOUT 1): the compiled ni x nj dot block with the fewest cycles
// over `oc` output channels x `taps` filter columns by a model of one vector step: FMA-bound (2 a cycle),
// load-bound (ni + nj unaligned loads, about 0.7 cycle each) or latency-bound (4 cycles: each accumulator is
// updated once a step); ties go to the block with fewer loads in all. fmnist1 (32 x 5): 4 x 5 (1.04 ms against
// 8 x 3 + 8 x 2's 1.10); 64 x 3: 8 x 3.
std::pair<int64_t, int64_t> best_plane_block(const KernelTable& kt, int64_t oc, int64_t taps) {
  std::pair<int64_t, int64_t> best{1, 1};
  double best_cycles = 0, best_loads = 0;
  for (int64_t ni = 1; ni <= std::min<int64_t>(oc, detail::kMaxDotRows); ++ni) {
    for (int64_t nj = 1; nj <= std::min<int64_t>(taps, detail::kMaxDotColumns); ++nj) {
      if (!kt.dot[ni - 1][nj - 1]) continue;
      double cycles = 0, loads = 0;
      for (int64_t t = 0; t < taps;) {
        int64_t w = std::min(nj, taps - t);
        while (w > 1 && !kt.dot[ni - 1][w - 1]) --w;
        for (int64_t k = 0; k < oc;) {
          int64_t h = std::min(ni, oc - k);
          while (h > 1 && !kt.dot[h - 1][w - 1]) --h;
          cycles += std::max({static_cast<double>(h * w) / 2.0, 0.7 * static_cast<double>(h + w), 4.0});
          loads += static_cast<double>(h + w);
          k += h;
        }
        t += w;
      }
      if (best_cycles == 0 || cycles < best_cycles - 1e-9 || (cycles < best_cycles + 1e-9 && loads < best_loads)) {
        best = {ni, nj}, best_cycles = cycles, best_loads = loads;
      }
    }
  }
  return best;
}

}  // namespace

// Winograd F(4x4, 3x3) applies: 3x3 filters, stride 1, dilation 1 (backward-data: padding at most 2, so dy's
// own padding 2 - pad is not negative).
bool winograd_applies(const ConvProblem& pb) {
  return pb.r == 3 && pb.s == 3 && pb.stride.h == 1 && pb.stride.w == 1 && pb.dilation.h == 1 && pb.dilation.w == 1 &&
         (pb.direction != Direction::BackwardData || (pb.pad.h <= 2 && pb.pad.w <= 2));
}

// Bytes of ALGO 2's per-item copies for `rows` output rows (im2col_strategy.cpp): per input channel, S shifted
// copies of Q floats and a padded row of W + 2 pad_w floats, for each input row the item reads.
int64_t plane_copy_bytes(const ConvProblem& pb, int64_t rows) {
  return 4 * pb.c_per_group() * (pb.s * pb.q() + pb.w + 2 * pb.pad.w) * (rows + (pb.r - 1) * pb.dilation.h);
}

// Pixel vectors along whole output planes (ALGO 2) apply to forward at stride 1 wherever one output row's copies
// fit half an L2, except where the computed problem is already planes of one row (1x1 at stride 1 without
// padding: the direct form's pixel vectors are that already).
bool im2col_applies(const ConvProblem& computed) {
  if (computed.direction != Direction::Forward || computed.h == 1) return false;
  if (computed.stride.h != 1 || computed.stride.w != 1) return false;
  return plane_copy_bytes(computed, 1) <= detail::half_l2();
}

// A 1x1 filter at stride 1 without padding reads and writes each image's channel planes as they lie in memory, so
// the same convolution over planes of one row of H*W pixels is the same arithmetic on the same bytes. The family
// computes that form: blocks run along whole planes instead of rows (a 7x7 plane is 49 pixels: whole vectors
// over 48 of them, where rows of 7 fill 7 of 16 lanes), and the row machinery's per-row work runs once per plane.
// MobileNetV2's 24 -> 144 expansion at 56x56 (16 images, two threads): 4.0 ms as rows of 56, 1.5 as planes.
ConvProblem computed_problem(const ConvProblem& pb) {
  if (pb.r != 1 || pb.s != 1 || pb.stride != Pair{1, 1} || pb.pad != Pair{0, 0}) return pb;
  ConvProblem plane = pb;
  plane.w = pb.h * pb.w;
  plane.h = 1;
  plane.dilation = {1, 1};
  return plane;
}

std::string vector_fill_change(const ConvProblem& tuned, const ConvProblem& asked) {
  // Across that line a tuned block says little: an 8 -> 16 layer (backward-data vectors over its 8 input channels:
  // half an AVX-512 vector, so tuning chose vectors over pixels) serving as the nearest shape of fmnist2's 32 -> 64
  // ran its backward-data at 1.98x the built-in default's time.
  const int64_t lanes = kernels().lanes;
  const Shape a = shape_of(computed_problem(tuned)), b = shape_of(computed_problem(asked));
  const auto check = [&](int64_t from, int64_t to, const char* what) -> std::string {
    if ((from < lanes) == (to < lanes)) return {};
    return fmt::format("its {} {} per group fill {} a {}-lane vector, here {} fill {}", from, what,
                       from < lanes ? "less than" : "at least", lanes, to, to < lanes ? "less than one" : "at least one");
  };
  const bool data = tuned.direction == Direction::BackwardData;
  if (std::string why = check(a.oc, b.oc, data ? "input channels (written)" : "output channels"); !why.empty())
    return why;
  return check(a.ic, b.ic, data ? "output channels (read)" : "input channels");
}

ParameterTable<Choice> parameter_table(const ConvProblem& problem) {
  const bool filter = is_filter(problem);
  std::vector<int64_t> algos = {0};
  if (winograd_applies(problem)) algos.push_back(1);
  if (im2col_applies(computed_problem(problem))) algos.push_back(2);
  return ParameterTable<Choice>({
      {"ALGO", &Choice::algo, algos,
       "0: direct convolution; 1: Winograd F(4x4, 3x3) (3x3 filters at stride 1 and dilation 1): 36 GEMMs over "
       "channels, VECS x COLS blocks of output channels x tiles; 2 (forward at stride 1): pixel vectors along whole "
       "output planes, across rows, over copies of each work item's input rows shifted by each filter column and "
       "cut to the output width (C/groups x S of them, made by the thread computing the item), VECS x COLS blocks of "
       "pixels x output channels"},
      {"ORIENT", &Choice::orient, filter ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{0, 1},
       filter ? "0: vectors over input channels, dy broadcast; 1: dot products along output rows; 2: vectors over "
                "output channels, x broadcast along a row of taps"
              : "0: vectors over output channels, input pixels broadcast; 1: vectors over output pixels, weights broadcast"},
      {"VECS", &Choice::vecs, kVecs,
       filter ? "register block: vectors of input channels (ORIENT 0), output channels (ORIENT 1: one per dot "
                "product; 2: vectors)"
              : "register block: vectors (of output channels or of pixels)"},
      {"COLS", &Choice::cols, kCols,
       filter ? "register block: output channels (ORIENT 0) or filter taps along a row (ORIENT 1, 2)"
              : "register block: broadcast columns (pixels for ORIENT 0, output channels for ORIENT 1)"},
      {"ROW_BLOCK", &Choice::row_block, kRowBlocks,
       filter ? "output rows per reduction tile (0: whole images, as many as fit ~1 MiB)"
              : "output rows per work item (0: all rows of a phase); Winograd (ALGO 1): tile rows (4 output rows each, "
                "counted across images) per fused block, whose input transform, 36 GEMMs and output transform run "
                "while its transformed tiles stay in L2 (0: three phases over the whole batch)"},
      {"ORDER", &Choice::order, {0, 1},
       filter ? "0: threads split the output tiles; 1: threads split the reduction"
              : "0: channel blocks outside row blocks; 1: row blocks outside channel blocks"},
      {"LAYOUT", &Choice::layout, filter ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0, 1, 2},
       filter ? "ORIENT 2: 0 copies x (padded) and dy (channel-interleaved) whole before the kernels; 1 copies each "
                "reduction tile's rows right before its kernels read them (the copies stay in L2). ORIENT 1: 0 dots "
                "along output rows over x copied whole; 1 dots over whole output planes (stride_h 1): each "
                "reduction tile's x copied once per filter column, dy read in place. ORIENT 0: 0"
              : "input copy for channel vectors: 0 planar (padded NCHW), 1 channel-blocked (a vector of input "
                "channels per pixel, nChw16c on AVX-512), 2 channel-blocked by the thread about to compute on it, an "
                "image at a time, or a row block's rows where an image's copy is over 1 MB (a buffer per thread that "
                "stays in L2)"},
      {"IC_CHUNK", &Choice::ic_chunk, filter ? std::vector<int64_t>{0} : kChunks,
       filter ? "backward-filter tiles its reduction with ROW_BLOCK; always 0"
              : "input channels per pass over a row block (0: all), so the pass's filter slab and input rows stay in "
                "L2; later passes add to the outputs"},
      {"WIDTH", &Choice::width, half_width_available() ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0},
       "0: the active ISA's vectors; 1 (AVX-512 hosts): the AVX2 kernels, 8 lanes and 16 registers, for channels "
       "(a group's) or rows that fill half a 16-lane vector or less"},
  });
}

std::vector<Constraint> constraints(const ConvProblem& asked) {
  using X = ConstraintContext;
  const ConvProblem problem = computed_problem(asked);
  const Shape sh = shape_of(problem);
  const bool filter = is_filter(problem);
  const bool one_by_one_dots = detail::channel_dots(problem);
  const ParameterTable<Choice> t = parameter_table(problem);
  // The ISA's facts are read once, when the constraints are made (a search makes them right before enumerating):
  // per WIDTH, the kernels it runs.
  const bool half = half_width_available();
  const std::array<const KernelTable*, 2> tables = {&kernels(0), half ? &kernels(1) : &kernels(0)};
  const auto table = [tables](const Choice& c) -> const KernelTable& { return *tables[c.width == 1 ? 1 : 0]; };
  const std::string isa(to_string(tables[0]->isa));
  // "avx512's 32" or, with WIDTH 1 possible, "avx512's 32 (WIDTH 1: avx2's 16)".
  const auto per_width = [&](int64_t (*fact)(const KernelTable&)) {
    std::string text = fmt::format("{}'s {}", isa, fact(*tables[0]));
    if (half) text += fmt::format(" (WIDTH 1: {}'s {})", to_string(tables[1]->isa), fact(*tables[1]));
    return text;
  };
  const auto regs_of = [](const KernelTable& k) { return static_cast<int64_t>(k.registers); };
  const auto lanes_of = [](const KernelTable& k) { return static_cast<int64_t>(k.lanes); };
  // Backward-filter's direct ORIENT 1 runs dot blocks (VECS rows x COLS columns); everything else broadcast blocks.
  const auto dot_block = [filter](const Choice& c) { return filter && c.algo == 0 && c.orient == 1; };
  std::vector<Constraint> out;
  out.push_back(t.constraint("ORIENT 1 (vectors over pixels) only where input rows are read at unit stride "
                             "(forward: stride_w 1)",
                             {&Choice::orient}, [sh, filter](const Choice& c, const X&) {
                               return filter || c.orient == 0 || sh.unit_rows;
                             }));
  if (im2col_applies(problem)) {
    out.push_back(t.constraint(
        fmt::format("ALGO 2 (pixel vectors along planes) with ORIENT 1, LAYOUT, IC_CHUNK and ORDER 0, and ROW_BLOCK "
                    "0 or rows whose input copies fit {} ({} bytes for one row)",
                    cpu::cache_text(l2_bytes()), plane_copy_bytes(problem, 1)),
        {&Choice::algo, &Choice::orient, &Choice::layout, &Choice::ic_chunk, &Choice::order, &Choice::row_block},
        [problem, sh, budget = l2_bytes()](const Choice& c, const X&) {
          return c.algo != 2 ||
                 (c.orient == 1 && c.layout == 0 && c.ic_chunk == 0 && c.order == 0 &&
                  (c.row_block == 0 || plane_copy_bytes(problem, std::min(c.row_block, sh.rows)) <= budget));
        }));
  }
  out.push_back(t.constraint(
      fmt::format("register block within the vector registers, {}: VECS x COLS + VECS + 1 at most that many "
                  "(backward-filter ORIENT 1: VECS x COLS + COLS + 1)",
                  per_width(regs_of)),
      {&Choice::algo, &Choice::orient, &Choice::vecs, &Choice::cols, &Choice::width},
      [dot_block, table](const Choice& c, const X&) {
        const int64_t regs = table(c).registers;
        return dot_block(c) ? c.vecs * c.cols + c.cols + 1 <= regs : c.vecs * c.cols + c.vecs + 1 <= regs;
      }));
  out.push_back(t.constraint(
      fmt::format("VECS x COLS block compiled for {}{}: broadcast blocks VECS at most {}, dot blocks (backward-filter "
                  "ORIENT 1) VECS at most {} and COLS at most {}",
                  isa, half ? " (WIDTH 1: avx2)" : "", detail::kMaxNv, detail::kMaxDotRows, detail::kMaxDotColumns),
      {&Choice::algo, &Choice::orient, &Choice::vecs, &Choice::cols, &Choice::width},
      [dot_block, table](const Choice& c, const X&) {
        return dot_block(c) ? dot_compiled(table(c), c.vecs, c.cols) : bcast_compiled(table(c), c.vecs, c.cols);
      }));
  // The ones below only remove configurations that run exactly like a smaller one (the plan clamps them).
  out.push_back(t.constraint(
      fmt::format("VECS at most the vectors the channels or pixels fill, of {} lanes", per_width(lanes_of)),
      {&Choice::algo, &Choice::orient, &Choice::vecs, &Choice::width}, [sh, filter, table](const Choice& c, const X&) {
        const int64_t lanes = table(c).lanes;
        if (c.algo == 1) return c.vecs <= ceil_div(sh.oc, lanes);
        if (c.algo == 2) return c.vecs <= ceil_div(sh.rows * sh.row, lanes);
        if (filter) {
          return c.orient == 0   ? c.vecs <= ceil_div(sh.ic, lanes)
                 : c.orient == 1 ? c.vecs <= sh.oc
                                 : c.vecs <= ceil_div(sh.oc, lanes);
        }
        return c.vecs <= ceil_div(c.orient == 0 ? sh.oc : sh.row, lanes);
      }));
  out.push_back(t.constraint(
      "COLS at most the columns there are (pixels of a row, output channels, or filter taps along a row)",
      {&Choice::algo, &Choice::orient, &Choice::layout, &Choice::cols, &Choice::width},
      [sh, filter, problem, table, one_by_one_dots](const Choice& c, const X&) {
        // Winograd backward-filter: columns are input channels within one vector of them.
        if (c.algo == 1) return filter ? c.cols <= std::min<int64_t>(sh.ic, table(c).lanes) : true;
        if (filter) {
          // Dots: taps of one stride class, or (whole planes, LAYOUT 1) any taps along the row; 1x1 dots
          // (detail::channel_dots): input channels.
          return c.orient == 0   ? c.cols <= sh.oc
                 : c.orient == 1 ? c.cols <= (one_by_one_dots ? sh.ic
                                              : c.layout == 1 ? problem.s
                                                              : taps_per_class(problem))
                                 : c.cols <= problem.s;
        }
        return c.cols <= (c.orient == 0 ? sh.row : sh.oc);
      }));
  // Winograd runs its own layouts and GEMM blocks (vectors over output channels): the direct form's other
  // parameters stay at 0 so the space holds each Winograd variant once; ROW_BLOCK picks forward's and
  // backward-data's fused blocks.
  out.push_back(t.constraint("ALGO 1 (Winograd) with ORIENT, LAYOUT, IC_CHUNK and ORDER all 0, and ROW_BLOCK 0 for "
                             "backward-filter",
                             {&Choice::algo, &Choice::orient, &Choice::layout, &Choice::ic_chunk, &Choice::order,
                              &Choice::row_block},
                             [filter](const Choice& c, const X&) {
                               return c.algo != 1 || (c.orient == 0 && c.layout == 0 && c.ic_chunk == 0 &&
                                                      c.order == 0 && (c.row_block == 0 || !filter));
                             }));
  if (!filter && winograd_applies(problem)) {
    // A fused block's transformed tiles and one oc block's products (the thread's V and M) within twice a core's
    // L2 (4 MiB on the developer host): larger blocks only stream from memory what the fused form exists to keep
    // in cache.
    const int64_t tile_rows = problem.n * ceil_div(sh.rows, 4), tiles_w = ceil_div(sh.row, 4);
    out.push_back(t.constraint(
        fmt::format("Winograd ROW_BLOCK (tile rows per fused block) below twice the {} tile rows, the block's "
                    "transformed tiles and products within {}",
                    tile_rows, cpu::cache_text(2 * l2_bytes())),
        {&Choice::algo, &Choice::vecs, &Choice::row_block, &Choice::width},
        [tile_rows, tiles_w, sh, table, budget = 2 * l2_bytes()](const Choice& c, const X&) {
          if (c.algo != 1 || c.row_block == 0) return true;
          const int64_t lanes = table(c).lanes, icp = ceil_div(sh.ic, lanes) * lanes;
          const int64_t tiles = std::min(c.row_block, tile_rows) * tiles_w;
          return c.row_block < 2 * tile_rows && tiles * 36 * 4 * (icp + c.vecs * lanes) <= budget;
        }));
  }
  if (filter) {
    out.push_back(t.constraint("backward-filter: LAYOUT 1 (copies per reduction tile) only with ORIENT 1 (dots, "
                               "then over whole planes) or 2 (vectors over output channels)",
                               {&Choice::orient, &Choice::layout},
                               [](const Choice& c, const X&) { return c.layout == 0 || c.orient != 0; }));
    out.push_back(t.constraint("backward-filter of a 1x1 layer at stride 1 without padding: ORIENT 1 (dots over "
                               "input channels, x and dy read in place) with LAYOUT 0 only",
                               {&Choice::orient, &Choice::layout}, [one_by_one_dots](const Choice& c, const X&) {
                                 return !one_by_one_dots || c.orient != 1 || c.layout == 0;
                               }));
    const bool unit_row_stride = problem.stride.h == 1;
    out.push_back(t.constraint("backward-filter: ORIENT 1 with LAYOUT 1 (dots over whole planes) only at stride_h 1 "
                               "(consecutive output rows read consecutive input rows)",
                               {&Choice::orient, &Choice::layout}, [unit_row_stride](const Choice& c, const X&) {
                                 return c.orient != 1 || c.layout == 0 || unit_row_stride;
                               }));
  } else {
    out.push_back(t.constraint("LAYOUT 1 and 2 (channel-blocked input) only with ORIENT 0 (channel vectors)",
                               {&Choice::orient, &Choice::layout},
                               [](const Choice& c, const X&) { return c.layout == 0 || c.orient == 0; }));
  }
  out.push_back(t.constraint(fmt::format("IC_CHUNK 0 or below the {} input channels per group", sh.ic),
                             {&Choice::ic_chunk},
                             [sh](const Choice& c, const X&) { return c.ic_chunk == 0 || c.ic_chunk < sh.ic; }));
  // Powers of two up to the first that covers every row; 0 (all rows) always. Winograd's tile rows: above.
  out.push_back(t.constraint(fmt::format("ROW_BLOCK 0 or below twice the {} output rows (direct forms)", sh.rows),
                             {&Choice::algo, &Choice::row_block}, [sh](const Choice& c, const X&) {
                               return c.algo == 1 || c.row_block == 0 || c.row_block < sh.rows * 2;
                             }));
  return out;
}

namespace {

// Winograd (ALGO 1): blocks of output channels x tiles (backward-filter: x input channels), and forward's and
// backward-data's fused blocks where they move fewer bytes than three phases.
Choice winograd_default(const ConvProblem& problem, const KernelTable& kt) {
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  Choice c;
  c.algo = 1;
  const int64_t tiles = problem.n * ceil_div(sh.rows, 4) * ceil_div(sh.row, 4);
  const auto [nv, nj] = best_bcast_block(kt, sh.oc, is_filter(problem) ? std::min(sh.ic, lanes) : tiles);
  c.vecs = nv, c.cols = nj;
  if (is_filter(problem)) return c;
  // Fused blocks (forward, backward-data) where reading U once per block moves at most twice the bytes of the
  // three phases' V and M, each written to memory and read back (the fused form's U reads hit L3 where the
  // three phases' V and M go to memory). Blocks of the most tile rows (a power of two) whose V and one oc
  // block's M fit about half of a core's L2. Two threads, wall, fused default against three phases
  // (forward; backward-data alike): 16 x 56x56, 64 -> 64 channels (U 0.6 MB) 10.7 -> 6.4 ms; 8 x 112x112,
  // 64 -> 64 25.4 -> 14.4; 4 x 40x40, 96 -> 96 2.15 -> 1.27; 8 x 28x28, 128 -> 128 (U 2.4 MB) 3.16 -> 2.20;
  // 16 x 28x28 6.24 -> 4.73. Where U is 9-14 MB on 256-1568 tiles (AlexNet's alex3-5, 14x14 and 28x28 with
  // 256 channels) fused blocks ran level to 29% slower, so three phases there.
  const int64_t tiles_w = ceil_div(sh.row, 4), tile_rows = problem.n * ceil_div(sh.rows, 4);
  const int64_t icp = ceil_div(sh.ic, lanes) * lanes, ocp = ceil_div(sh.oc, lanes) * lanes;
  const auto block_bytes = [&](int64_t rb, int64_t block) { return rb * tiles_w * 36 * 4 * (icp + block); };
  int64_t rb = 1;
  while (rb * 2 < 2 * tile_rows && rb * 2 <= 32 && block_bytes(rb * 2, 3 * lanes) <= half_l2()) rb *= 2;
  const double blocks = static_cast<double>(ceil_div(tile_rows, rb));
  const double u_bytes = 4.0 * 36 * static_cast<double>(icp * ocp);
  const double vm_bytes = 4.0 * 36 * static_cast<double>(tiles * (icp + ocp));
  if (block_bytes(rb, 3 * lanes) <= half_l2() && u_bytes * blocks <= 2 * 2 * vm_bytes) {
    const auto [fnv, fnj] = best_bcast_block(kt, sh.oc, std::min(rb, tile_rows) * tiles_w);
    c.row_block = rb, c.vecs = fnv, c.cols = fnj;
  }
  return c;
}

// 1x1 backward-filter into few output channels: dots of dy's and x's rows where they lie (detail::channel_dots).
// Vectors over input channels first copy all of x channel-interleaved, whose cost per FLOP grows as 1 / K. Two
// threads, 16 images: 144 -> 24 at 56x56 3.7-3.9 -> 1.7-1.8 ms, 192 -> 32 at 28x28 0.99 -> 0.68-0.76, 64 -> 16
// 1.6-1.7 -> 0.57-0.63; from 64 output channels on the dots lost (384 -> 64 at 14x14 0.73 -> 0.90-0.96, 960 ->
// 160 at 7x7 1.04 -> 2.0: each call sums its lanes, and the reduction is not blocked for the caches).
// (Also wherever filter_default's rules would take dots or vectors over output channels, whose blocks have one
// column for a 1x1 filter.)
Choice channel_dots_default(const ConvProblem& problem, const KernelTable& kt) {
  const Shape sh = shape_of(problem);
  const auto [ni, nj] = best_plane_block(kt, sh.oc, std::min<int64_t>(sh.ic, detail::kMaxDotColumns));
  Choice c;
  c.orient = 1, c.vecs = ni, c.cols = nj, c.layout = 0, c.row_block = 0;
  const int64_t tiles = problem.groups * ceil_div(sh.oc, ni) * ceil_div(sh.ic, nj);
  c.order = tiles >= 8 * static_cast<int64_t>(ThreadPool::instance().size()) ? 0 : 1;
  return c;
}

// Backward-filter's dots over whole output planes (stride_h 1), given the orientation filter_default chose, or
// nothing where they do not pay.
std::optional<Choice> plane_dots_default(const ConvProblem& problem, const KernelTable& kt, Choice c,
                                         double dy_bytes_per_flop) {
  const Shape sh = shape_of(problem);
  // Dots over whole output planes (stride_h 1) instead, where a block's dy planes and the x copies of a tile of
  // a few rows fit about an L1: dy read in place, no interleave, runs along whole planes. fmnist1 (one thread):
  // 1.37-1.40 ms with vectors over output channels and dy interleaved per tile, 1.04 with plane dots; a 3x3
  // layer with 3 input channels (CIFAR's first) 4.2 -> 2.0 ms against the row dots. Not where dy is cheap beside
  // the FMAs and vectors over output channels fill (3 input channels, 5x5 on 32x32: level; 64x64: 5.3 -> 7.5 ms).
  const auto plane = best_plane_block(kt, sh.oc, problem.s);
  // Four L1d (192 KiB on the developer hosts' 48 KiB). A group's channels, not the layer's: the layer's kept
  // ResNeXt's 32 groups of 8 channels (56x56, 8 images) on row dots over a whole copy of x, 12.0 ms (1.7x oneDNN);
  // with the group's, plane dots of 8 rows 9.8 ms, of 16 rows (125 KB, over twice an L1d) 8.1-8.5, of 32 8.8. At
  // four L1d the default took more rows on two other grouped layers (4 and 8 channels a group: 2.85 -> 2.72 ms
  // and 3.46 -> 3.38) and changed nothing else in the general, seed, AlexNet, ResNet-18 and cpu_shapes suites.
  const int64_t plane_budget = 4 * l1d_bytes();
  const auto plane_bytes = [&](int64_t rows) {
    return 4 * (problem.c_per_group() * problem.s * (rows + (problem.r - 1) * problem.dilation.h) * problem.q() +
                plane.first * rows * problem.q());
  };
  // Not for a 1x1 filter whose input channels fill the vectors: one tap leaves each plane dot a single product
  // per dy element (two threads: MobileNetV2's 24 -> 144 at 56x56, 16 images, 2.9 ms with plane dots, 1.6 with
  // vectors over input channels).
  const bool one_tap_filled = problem.r * problem.s == 1 && c.orient == 0;
  if (problem.stride.h != 1 || detail::channel_dots(problem) ||
      !(c.orient == 1 || (dy_bytes_per_flop >= 0.1 && !one_tap_filled)) || plane_bytes(1) > plane_budget) {
    return std::nullopt;
  }
  c.orient = 1, c.layout = 1, c.vecs = plane.first, c.cols = plane.second;
  // Whole images when one fits, else the most rows (a power of two) that do.
  int64_t rb = 0;
  if (plane_bytes(sh.rows) > plane_budget) {
    rb = 1;
    while (rb * 2 < sh.rows && plane_bytes(rb * 2) <= plane_budget && rb < 32) rb *= 2;
  }
  c.row_block = rb;
  // Threads split the reduction (each its own tiles and copies, no barrier per tile) when every thread has
  // two tiles or more.
  const int64_t tiles = problem.n * (rb == 0 ? 1 : ceil_div(sh.rows, rb));
  c.order = tiles >= 2 * static_cast<int64_t>(ThreadPool::instance().size()) ? 1 : 0;
  return c;
}

// Backward-filter's ORDER and ROW_BLOCK for the blocks of `c` (rows along output rows).
Choice filter_tiles(const ConvProblem& problem, const KernelTable& kt, Choice c) {
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  // Threads split the output tiles when there are plenty; else the reduction.
  const int64_t orient = c.orient;
  const int64_t tiles =
      problem.groups * problem.r *
      (orient == 0   ? ceil_div(sh.ic, c.vecs * lanes) * ceil_div(sh.oc, c.cols) * problem.s
       : orient == 1 ? ceil_div(sh.oc, c.vecs) * sh.ic
                     : ceil_div(sh.oc, c.vecs * lanes) * sh.ic * ceil_div(problem.s, c.cols));
  c.order = tiles >= 8 * static_cast<int64_t>(ThreadPool::instance().size()) ? 0 : 1;
  // Whole images per tile when an image is small; else blocks of rows that keep x and dy rows in L2.
  const int64_t row_bytes = 4 * (problem.c * problem.w * problem.stride.h + problem.k * problem.q());
  int64_t rb = 0;
  if (row_bytes * problem.p() > half_l2()) {
    rb = 1;
    while (rb * 2 < sh.rows && rb * 2 * row_bytes <= half_l2() && rb < 32) rb *= 2;
  }
  if (c.layout == 1) {
    // Per-tile copies: at least two tiles per image, so a tile's copy stays small beside L2 (fmnist1: 8 rows
    // 1.37 ms, whole images 1.46; alex1: 16 rows 15.8 ms, 8 rows 16.2).
    rb = 1;
    while (rb * 4 <= sh.rows && rb * 2 * row_bytes <= half_l2() && rb < 32) rb *= 2;
    // Threads split the reduction (each copying its own tiles) whenever each gets two tiles: splitting the output
    // tiles shares one copy per tile and so waits at two barriers per tile. Two threads, in rounds, on stems with
    // 3 input channels: alex1 8.7 -> 7.2 ms, ResNet's 7x7/2 at 8 images 11.6 -> 8.3 and at one 1.34 -> 1.15, a
    // 5x5/2 on 64x64 1.29 -> 0.91; alex1's tuned entries on both Intel hosts have it too.
    const int64_t reduction_tiles = problem.n * ceil_div(sh.rows, rb);
    if (reduction_tiles >= 2 * static_cast<int64_t>(ThreadPool::instance().size())) c.order = 1;
  }
  c.row_block = rb;
  return c;
}

// Backward-filter's direct default: the orientation, then dots over planes or tiles along rows.
Choice filter_default(const ConvProblem& problem, const KernelTable& kt) {
  if (detail::channel_dots(problem) && shape_of(problem).oc <= 32) return channel_dots_default(problem, kt);
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  const int regs = kt.registers;
  Choice c;
  // Vectors over input channels when they fill the vectors; else vectors over output channels when those do and
  // copying dy channel-interleaved, a reduction tile at a time (LAYOUT 1), is cheap beside the work (AlexNet's
  // first layer: 0.01 bytes of dy per FLOP; the Fashion-MNIST layer with one input channel: 0.16, where it ran
  // 1.37 ms against the dots' 1.50, one thread); else dot products along rows (which pay a horizontal sum per
  // block and partial vectors at row ends, but copy nothing of dy).
  double eff_c = 0, eff_k = 0;
  const auto by_c = best_bcast_block(kt, sh.ic, sh.oc, &eff_c);
  const auto by_k = best_bcast_block(kt, sh.oc, problem.s, &eff_k);
  const double dy_bytes_per_flop = 8.0 * static_cast<double>(problem.y_elements()) / problem.flops();
  const double row_fill = static_cast<double>(sh.row) / static_cast<double>(ceil_div(sh.row, lanes) * lanes);
  // Dots pay a horizontal sum per block, x copied once per filter column and short runs per call besides their
  // lane fill, so channel vectors are taken down to half the dots' fill (one thread: 19 -> 29 channels on 37x23,
  // 3x3, 0.41 ms with plane dots, 0.18 with vectors over input channels; 3 -> 32 channels stay with the dots,
  // 0.16 ms against 1.0).
  if (eff_c >= 0.75 || (eff_c >= eff_k && eff_c >= 0.5 * row_fill)) {
    c.orient = 0, c.vecs = by_c.first, c.cols = by_c.second;
  } else if ((eff_k >= 0.75 || (eff_k >= 0.5 && problem.stride.w > 1)) && dy_bytes_per_flop < 0.2) {
    // Copies per reduction tile: alex1 (one thread) 20.7 -> 15.8 ms against whole copies up front. At stride 2
    // down to half the FMA rate by the model (2 x 3 blocks: 32 output channels, 3 filter columns), where the row
    // dots read x split into stride phases: stems of 3-4 input channels, 3x3 stride 2, 32 output channels (one
    // thread, Intel Xeon, in rounds with oneDNN): one 512x512 image 2.49 -> 1.76 ms (oneDNN 1.33), 8 x 224x224
    // 5.13 -> 2.70 (2.30), RGBA 2 x 256x256 1.60 -> 1.04 (2.05).
    c.orient = 2, c.vecs = by_k.first, c.cols = by_k.second, c.layout = 1;
  } else {
    int64_t ni = std::min<int64_t>(sh.oc, regs >= 32 ? 4 : 2);
    while (ni > 1 && std::find(kVecs.begin(), kVecs.end(), ni) == kVecs.end()) --ni;
    int64_t nj = std::min<int64_t>(taps_per_class(problem), regs >= 32 ? 5 : 4);
    while (nj > 1 && !dot_compiled(kt, ni, nj)) --nj;
    c.orient = 1, c.vecs = ni, c.cols = nj;
  }
  if (detail::channel_dots(problem) && c.orient != 0) return channel_dots_default(problem, kt);
  if (const std::optional<Choice> planes = plane_dots_default(problem, kt, c, dy_bytes_per_flop)) return *planes;
  return filter_tiles(problem, kt, c);
}

// Forward / backward-data: the orientation whose best block keeps the FMA units busier (ORIENT, VECS and COLS);
// `eff_rows` gets the pixel vectors' lane fill along rows. Channel vectors also pay a transposed store per block,
// amortised over the reduction (input channels x taps steps): a gather per channel and a masked vector store
// (StoreBlock), about an eighth of a cycle per accumulator lane. Costed at half a cycle (a scalar store per lane,
// as without the gathers), the 1x1 layers of 24-64 input channels would take pixel vectors and run 2x slower than
// with channel vectors (two threads: ResNet-50's 64 -> 256 at 56x56, 8 images, 7.8 -> 3.9 ms; a stride-2 3x3
// backward-data of 64 -> 32 channels on 208x208, 12.9 -> 7.3), while Fashion-MNIST's first layer (25 steps) keeps pixel
// vectors (0.57 ms; channel vectors 0.78).
Choice oriented_block(const ConvProblem& problem, const KernelTable& kt, double* eff_rows) {
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  Choice c;
  double eff_oc = 0, eff_px = 0;
  const auto by_oc = best_bcast_block(kt, sh.oc, sh.row, &eff_oc, /*whole_rows=*/true);
  const auto by_px = best_bcast_block(kt, sh.row, sh.oc, &eff_px, /*whole_rows=*/false, /*even_split=*/true);
  const double store_cycles = static_cast<double>(by_oc.first * by_oc.second * lanes) / 8.0;
  const double reduce_cycles = static_cast<double>(sh.ic * sh.taps) * step_cycles(by_oc.first, by_oc.second);
  eff_oc *= reduce_cycles / (reduce_cycles + store_cycles);
  // Pixel vectors broadcast from the whole filter (one cache line per reduction step, used once per block):
  // beyond about half an L2 it streams from L3 for every block (ucla5x5 forward, a 6.5 MB filter: 2.2x oneDNN's
  // time, against 1.0x with channel vectors, whose per-block filter slab stays in L2).
  const double filter_bytes = 4.0 * static_cast<double>(sh.ic * sh.taps * sh.oc);
  *eff_rows = eff_px;
  if (filter_bytes > l2_scaled(1e6)) eff_px *= 0.5;
  if (!sh.unit_rows || eff_oc >= eff_px) {
    c.orient = 0, c.vecs = by_oc.first, c.cols = by_oc.second;
  } else {
    c.orient = 1, c.vecs = by_px.first, c.cols = by_px.second;
  }
  return c;
}

// Pixel vectors along whole planes (ALGO 2) in place of the rows of `c`, or nothing where rows do as well.
std::optional<Choice> plane_vectors_default(const ConvProblem& problem, const KernelTable& kt, const Choice& c,
                                            double eff_rows) {
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  // Pixel vectors along whole planes over column-shifted input copies (ALGO 2) where the plane fills the lanes at
  // least 5% better than the rows, with 8 or more output channels a group: the copies write a float per input pixel
  // and filter column, beside a FMA lane per output channel and tap. Two threads, AMD EPYC Zen 4, in rounds with
  // oneDNN: Fashion-MNIST's first layer (rows of 28, planes of 784; 100 images) 0.83 ms as rows (VECS 1, COLS 16,
  // ROW_BLOCK 32: better than the tuner had found), 0.76 as planes (2 x 13), 0.73 with 1 x 16; oneDNN 0.78. Groups
  // of 8 channels, rows against planes (1 x 8): 32 -> 32 in 4 groups at 20x20, 64 images, 1.03 -> 0.92 ms; ResNeXt's
  // 32 groups at 56x56, 4 images, 3.95 -> 3.21; 6 dilated groups at 31x29 0.163 -> 0.136. (8 groups at 97x61 keep
  // their rows, which fill 61 of 64 lanes: 0.371 ms, 0.342 as planes. With channel vectors the rule stays off:
  // Inception's 48 -> 64 5x5 at 35x35 ran 3.33 ms so, 3.75 as planes.) Not where the copies' runs (one per input row,
  // channel and filter column, a dozen cycles each, whatever their length) come to more than 1 in 20 of the FMAs: the
  // tiny 8 -> 8 3x3 on 8x8 (2 images, 0.1 of a run per FMA) took 4 us as planes, 3 as rows; the 20x20 layer above has
  // 0.037.
  const double runs_per_fma =
      static_cast<double>((problem.p() + (problem.r - 1) * problem.dilation.h) * lanes) /
      static_cast<double>(problem.p() * problem.q() * sh.oc * problem.r);
  if (c.orient == 1 && problem.direction == Direction::Forward && im2col_applies(problem) && sh.oc >= 8 &&
      runs_per_fma <= 0.05) {
    double eff_plane = 0;
    best_bcast_block(kt, sh.rows * sh.row, sh.oc, &eff_plane, /*whole_rows=*/false, /*even_split=*/true);
    if (eff_plane >= 1.05 * eff_rows) {
      // One vector of pixels under the widest output-channel block: more vectors per block measured slower along
      // planes (Fashion-MNIST's first layer 2 x 13 0.76 ms, 1 x 16 0.73; four 8-channel group layers 1 x 8 2-9%
      // faster than 2 x 8, the 20x20 one 7% faster than 3 x 8), the kernels' input runs are as many as the
      // reduction steps (C/groups x R x S of them) whatever the block.
      const auto by_channels = best_bcast_block(kt, kt.lanes, sh.oc, nullptr, /*whole_rows=*/false, /*even_split=*/true);
      Choice plane;
      plane.algo = 2, plane.orient = 1, plane.vecs = by_channels.first, plane.cols = by_channels.second;
      return plane;
    }
  }
  return std::nullopt;
}

// The rows and columns of the plane a forward or backward-data pass reads: x's, or dy's.
std::pair<int64_t, int64_t> read_plane(const ConvProblem& problem) {
  const bool fwd = problem.direction == Direction::Forward;
  return {fwd ? problem.h : problem.p(), fwd ? problem.w : problem.q()};
}

// LAYOUT for the blocks of `c`: planar, channel-blocked up front, or channel-blocked by the computing thread.
int64_t input_layout(const ConvProblem& problem, const KernelTable& kt, const Choice& c) {
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  int64_t layout = 0;
  // Channel-blocked input for channel vectors when the input channels fill whole blocks well (not AlexNet's 3).
  const double ic_fill = static_cast<double>(sh.ic) / static_cast<double>(ceil_div(sh.ic, lanes) * lanes);
  // Dilated rows too (a call per filter row there): DeepLab's rate-2 and rate-4 3x3 (256 and 512 channels), forward
  // and backward-data, 10-15% faster than planar input (two threads, in rounds).
  if (c.orient == 0 && ic_fill >= 0.75) layout = 1;
  // Copied an image at a time by the thread computing on it (LAYOUT 2) when an image's copy is small beside L2 and
  // every thread has images of its own to copy: one thread, fmnist2 backward-data 12.8 -> 12.1 ms, forward 12.4 ->
  // 12.1, alex2 1-2%. Not ucla5x5 (one image of 53 MB: each thread would copy all of it).
  const auto [in_rows, in_cols] = read_plane(problem);
  // The padded copy's own extent: forward pads x by `pad` on both sides, backward-data pads dy by the dilated
  // filter's reach less `pad`. (The filter size in place of the padding would overstate a plane of 196 pixels as
  // one row (computed_problem) by half, and send ResNet-50's 1024 -> 256 1x1 to a whole copy up front: 3.0 -> 3.4
  // ms.)
  const bool fwd = problem.direction == Direction::Forward;
  const int64_t pad_rows = fwd ? problem.pad.h : problem.dilation.h * (problem.r - 1) - problem.pad.h;
  const int64_t pad_cols = fwd ? problem.pad.w : problem.dilation.w * (problem.s - 1) - problem.pad.w;
  const int64_t image_bytes = 4 * ceil_div(sh.ic, lanes) * lanes * (in_rows + 2 * std::max<int64_t>(pad_rows, 0)) *
                              (in_cols + 2 * std::max<int64_t>(pad_cols, 0));
  if (layout == 1 && image_bytes <= image_copy_bytes() &&
      problem.n * problem.groups >= 2 * static_cast<int64_t>(ThreadPool::instance().size())) {
    layout = 2;
  }
  // A copy made up front, by every thread, of an input that planar channel vectors read in place (a 1x1 filter at
  // stride 1 without padding): the copy costs more than its cache lines save where there are too few images for a
  // copy each. Batch-1 1x1 layers, two threads, in rounds with oneDNN: 960 -> 160 on 7x7 0.096 -> 0.057 ms, 96 ->
  // 576 and 576 -> 96 on 14x14 0.095 -> 0.077 and 0.132 -> 0.087, backward-data alike.
  if (layout == 1 && problem.r == 1 && problem.s == 1 && pad_rows == 0 && pad_cols == 0 && problem.stride.h == 1 &&
      problem.stride.w == 1)
    layout = 0;
  return layout;
}

// IC_CHUNK for the blocks of `c`.
int64_t input_chunk(const ConvProblem& problem, const KernelTable& kt, const Choice& c) {
  const Shape sh = shape_of(problem);
  const int64_t lanes = kt.lanes;
  // Input channels per pass: all unless a pass's filter slab and the input rows of one output row outgrow about
  // half an L2 (ucla5x5: 256 channels x 5 rows x 228 columns plus a 256 x 25 x 32 slab is 2 MB).
  const int64_t block = c.orient == 0 ? c.vecs * lanes : sh.oc;
  const int64_t window = problem.r * (problem.direction == Direction::Forward ? problem.w + 2 * problem.pad.w
                                                                              : problem.q() + 2 * problem.s);
  // Pixel vectors block a pass's input columns themselves (view_strategy.cpp, pixel_rows), so only their filter
  // counts there: with the window, a plane of 3136 pixels as one row (computed_problem) cut ResNet-50's 1x1
  // backward-data into passes of 64 channels that add to the outputs (6.3 ms against 4.3 in one pass).
  const auto pass_bytes = [&](int64_t channels) {
    return 4 * channels * (sh.taps * block + (c.orient == 1 ? 0 : window));
  };
  int64_t chunk = 0;
  if (pass_bytes(sh.ic) > half_l2()) {
    for (int64_t candidate : kChunks)
      if (candidate > 0 && candidate < sh.ic && pass_bytes(candidate) <= half_l2()) chunk = candidate;
    if (chunk == 0 && kChunks[1] < sh.ic) chunk = kChunks[1];  // the smallest pass there is
  }
  // (Pixel vectors step through the input channels a plane apart. Passes of 32 channels would keep a pass's pages
  // within the first-level TLB, but the broadcast kernel prefetches such strided runs a few steps ahead
  // (microkernels.cpp), and one pass is faster: alternated in one process, ResNet-50's 64 -> 256 1x1 at 56x56, 8
  // images, forward 7.06 -> 6.71 ms on one thread, 4.39 -> 3.86 on two; its backward-data 6.89 -> 5.99 and 4.24
  // -> 3.45; MobileNetV2's 24 <- 144 backward-data 3.78 -> 3.59 and 1.63 -> 1.35.)
  return chunk;
}

// ROW_BLOCK and ORDER (and the per-thread copies of LAYOUT 2 where row blocks allow them) for `c`.
Choice rows_and_order(const ConvProblem& problem, const KernelTable& kt, Choice c) {
  const Shape sh = shape_of(problem);
  // Enough work items for the threads to balance, each a few rows.
  int64_t rb = 0;
  if (sh.rows > 16) rb = 8;
  c.row_block = rb;
  // Channel vectors over planar input whose whole padded copy outgrows L2 (one phase per axis): rows outside
  // channel blocks, so that each thread copies a row block's input rows into L2 once for all its channel blocks
  // (view_strategy.cpp; pixel vectors have one channel block, so the order does not matter there). alex1
  // forward, one thread: 17.4 ms with ORDER 0, 15.6 with ORDER 1 (8 rows; 16 rows 15.5-15.6).
  const bool one_phase = problem.direction == Direction::Forward || (problem.stride.h == 1 && problem.stride.w == 1);
  const auto [in_rows, in_cols] = read_plane(problem);
  const double planar_bytes =
      4.0 * static_cast<double>(problem.n * problem.groups * sh.ic * (in_rows + problem.r) * (in_cols + problem.s));
  if (c.orient == 0 && c.layout == 0 && one_phase && rb > 0 && planar_bytes > l2_scaled(2e6)) c.order = 1;
  // Channel-blocked input whose image outgrows the per-image copy: copied a row block at a time by each thread
  // (LAYOUT 2, rows outside channel blocks) where the row blocks allow it, instead of whole up front (written to
  // memory and read back).
  if (c.layout == 1 && rb > 0) {
    Choice rows = c;
    rows.layout = 2, rows.order = 1;
    if (detail::copies_row_blocks(problem, rows, kt)) c = rows;
  }
  return c;
}

// Forward's and backward-data's direct default.
Choice data_default(const ConvProblem& problem, const KernelTable& kt) {
  double eff_rows = 0;
  Choice c = oriented_block(problem, kt, &eff_rows);
  if (const std::optional<Choice> plane = plane_vectors_default(problem, kt, c, eff_rows)) return *plane;
  c.layout = input_layout(problem, kt, c);
  c.ic_chunk = input_chunk(problem, kt, c);
  return rows_and_order(problem, kt, c);
}

// The default for the computed problem with the kernels of `kt` (WIDTH left 0).
Choice default_choice(const ConvProblem& problem, const KernelTable& kt) {
  const Shape sh = shape_of(problem);
  // Winograd for 3x3 stride-1 layers with enough channels on both sides that the 36 GEMMs, not the transforms,
  // dominate (AlexNet's layers 3-5: 192-384 channels).
  // Not over fewer than 16 tiles, in any direction: the transformed filters (36 per channel pair, 4x the filters'
  // bytes) then cost more to write and stream than the few tiles' GEMMs save over the direct sums (one 7x7 image,
  // 512 -> 512: 4 tiles, backward-filter 5.9 ms against the direct form's 3.0, oneDNN 2.2; one thread, Intel Xeon).
  // ResNet-50's last stage at 8 images (32 tiles) keeps it.
  const int64_t winograd_tiles = problem.n * ceil_div(sh.rows, 4) * ceil_div(sh.row, 4);
  if (winograd_applies(problem) && sh.ic >= 32 && sh.oc >= 32 && winograd_tiles >= 16)
    return winograd_default(problem, kt);
  return is_filter(problem) ? filter_default(problem, kt) : data_default(problem, kt);
}

// The share of the vector lanes a configuration's blocks fill with channels or pixels (the rest is padding).
double vector_fill(const ConvProblem& problem, const Choice& c, const KernelTable& kt) {
  const Shape sh = shape_of(problem);
  const auto fill = [](int64_t extent, int64_t span) {
    return static_cast<double>(extent) / static_cast<double>(ceil_div(extent, span) * span);
  };
  const int64_t span = c.vecs * kt.lanes;
  if (c.algo == 1) return fill(sh.oc, span);
  if (c.algo == 2) return fill(sh.rows * sh.row, span);
  if (!is_filter(problem)) return fill(c.orient == 0 ? sh.oc : sh.row, span);
  if (c.orient == 0) return fill(sh.ic, span);
  if (c.orient == 2) return fill(sh.oc, span);
  // Dots: runs along output rows, or whole output planes (LAYOUT 1), in vectors with a masked tail.
  return fill(c.layout == 1 ? problem.p() * problem.q() : sh.row, kt.lanes);
}

}  // namespace

Config default_config(const ConvProblem& asked) {
  const ConvProblem problem = computed_problem(asked);
  Choice c = default_choice(problem, kernels(0));
  // Half-width vectors (WIDTH 1) where their default fills the lanes at least 1.25x better and an 8-lane FMA does
  // about as much a cycle as a 16-lane one (AMD Zen 4; on Intel's two 512-bit units it does half, so the full
  // width stays). Zen 4, two threads, untuned, against oneDNN in the same rounds: 8-channel groups at stride 2
  // (5x5, 12 groups) backward-filter 3.6 -> 1.6x oneDNN's time, forward 2.2 -> 1.5; 4 groups of 8 channels on 20x20
  // 2.0-2.8 -> 1.2-1.7; a 1x7 layer's 24-channel side backward-data 1.34 -> 0.89 and backward-filter 1.18 -> 0.86.
  // Where the full width's pixel vectors already filled 90% (rows of 29 and 61) the half width ran 7-35% slower, and
  // the rule keeps the full width there.
  if (half_width_available()) {
    Choice half = default_choice(problem, kernels(1));
    half.width = 1;
    const double full_fill = vector_fill(problem, c, kernels(0)), half_fill = vector_fill(problem, half, kernels(1));
    if (half_fill >= 1.25 * full_fill && avx2_over_avx512_fma_rate() >= 0.75) c = half;
  }
  return parameter_table(problem).write(c);
}

Isa isa_of(const Choice& choice) { return kernels(choice.width).isa; }

// The prepared state behind a Convolution.
struct Plan {
  ConvProblem problem;
  Config config;
  Isa isa = Isa::Scalar;
  std::unique_ptr<detail::Strategy> strategy;
  std::vector<float> own_weights;  // pack_weights()'s copy
  bool weights_packed = false;
  StageTimes times;
};

Convolution::Convolution(const ConvProblem& problem, const Config& config) : plan_(std::make_unique<Plan>()) {
  problem.validate();
  if (const std::string why = fp32_only_reason(kFamilyName, problem); !why.empty()) throw Unsupported(why);
  // The plan's own check (parameters, candidate values, constraints), so a Convolution made outside a plan (tests,
  // the sweep tool) refuses exactly what a plan refuses.
  if (const std::string why = config_problem(kernel_family(kFamilyName), config, problem,
                                             Registry::instance().find("cpu").info());
      !why.empty()) {
    throw InvalidArgument(fmt::format("{} on {}", why, problem.to_string()));
  }
  plan_->problem = problem;
  plan_->config = config;
  const Choice choice = parameter_table(problem).read(config);
  plan_->isa = isa_of(choice);
  const KernelTable& kt = detail::kernel_table(plan_->isa);
  const ConvProblem computed = computed_problem(problem);
  plan_->strategy = choice.algo == 1   ? detail::make_winograd_strategy(computed, choice, kt)
                    : choice.algo == 2 ? detail::make_im2col_strategy(computed, choice, kt)
                    : is_filter(problem) ? detail::make_filter_strategy(computed, choice, kt)
                                         : detail::make_view_strategy(computed, choice, kt);
}

Convolution::~Convolution() = default;
Convolution::Convolution(Convolution&&) noexcept = default;
Convolution& Convolution::operator=(Convolution&&) noexcept = default;

size_t Convolution::workspace_bytes() const {
  // Packed weights (when not owned) and the strategy's buffers, each 64-byte aligned from an unaligned start.
  return plan_->strategy->packed_weight_floats() * sizeof(float) + plan_->strategy->workspace_bytes() + 2 * 64;
}

void Convolution::run(float* x, float* w, float* y, void* workspace) {
  using Clock = std::chrono::steady_clock;
  Plan& p = *plan_;
  StageTimes times;
  const float* packed = nullptr;
  std::byte* rest = static_cast<std::byte*>(workspace);
  const size_t packed_floats = p.strategy->packed_weight_floats();
  if (packed_floats > 0) {
    if (p.weights_packed) {
      packed = p.own_weights.data();
    } else {
      detail::Carver carver(workspace);
      float* buffer = carver.floats(packed_floats);
      const auto start = Clock::now();
      p.strategy->pack_weights(w, buffer);
      times.weights_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      packed = buffer;
    }
    rest += packed_floats * sizeof(float) + 64;
  }
  p.strategy->run(x, packed, w, y, rest, times);
  p.times = times;
}

void Convolution::pack_weights(const float* w) {
  Plan& p = *plan_;
  const size_t count = p.strategy->packed_weight_floats();
  if (count == 0) return;
  p.own_weights.assign(count, 0.0f);
  p.strategy->pack_weights(w, p.own_weights.data());
  p.weights_packed = true;
}

void Convolution::forget_weights() {
  plan_->weights_packed = false;
  plan_->own_weights.clear();
  plan_->own_weights.shrink_to_fit();
}

const StageTimes& Convolution::last_times() const { return plan_->times; }
Isa Convolution::isa() const { return plan_->isa; }
const ConvProblem& Convolution::problem() const { return plan_->problem; }

double Convolution::performed_flops() const { return plan_->strategy->performed_flops(plan_->problem); }

std::string Convolution::describe() const {
  return fmt::format("{}: {}", to_string(plan_->isa), plan_->strategy->describe());
}

}  // namespace convtune::cpu_blocked
