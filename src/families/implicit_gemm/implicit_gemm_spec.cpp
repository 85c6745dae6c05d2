// implicit_gemm: seed 004's local-memory kernel (section 5, figures 4-6) for all three directions. Parameters
// are seed 004's M_BLK, N_BLK, K_BLK, M_DIM x N_DIM (work-group), M_THR x N_THR (register tile), plus local
// padding, vector width, unroll and split-K; constraints are the algorithm, software and hardware limits that
// section 5.4 lists.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "convtune/error.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"
#include "src/families/implicit_gemm/implicit_gemm_spec.h"
#include "src/families/nvidia_arch.h"

namespace convtune::implicit_gemm {

namespace {

constexpr size_t kLocalMemoryCap = 48 * 1024;  // what OpenCL guarantees and CUDA gives without opting in
constexpr int64_t kMaxAccumulators = 64;        // register tile; more spills on every GPU we target
constexpr int64_t kMaxStaged = 32;              // A+B elements a work-item holds in registers between tiles
constexpr int64_t kMaxGridAxis = 65535;         // CUDA's limit on grid axes 1 and 2

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// cp.async exists from compute capability 8.0.
bool supports_async_copy(const DeviceInfo& device) { return families::nvidia_compute_capability(device) >= 80; }

ParameterTable<Params> make_table(Direction direction) {
  using P = Params;
  std::vector<ParameterTable<P>::Field> fields = {
      {"TILE_M", &P::tile_m, {16, 32, 64, 128},
       "block tile rows (seed 004's M_BLK): output channels, or input channels for backward-data"},
      {"TILE_N", &P::tile_n, {16, 32, 64, 128, 256},
       "block tile columns (N_BLK): output pixels, input pixels or filter taps"},
      {"TILE_K", &P::tile_k, {4, 8, 16, 32}, "reduction slice staged in local memory per step (K_BLK)"},
      {"THREADS_M", &P::threads_m, {4, 8, 16, 32}, "work-group rows (M_DIM); the register tile has TILE_M/THREADS_M rows"},
      {"THREADS_N", &P::threads_n, {4, 8, 16, 32},
       "work-group columns (N_DIM); the register tile has TILE_N/THREADS_N columns"},
      {"VECTOR_WIDTH", &P::vector_width, {1, 2, 4}, "floats per local-memory read of the register-tile operands"},
      {"LOCAL_PADDING", &P::local_padding, {0, 1, 2, 4}, "floats added to each local-memory row against bank conflicts"},
      {"UNROLL_K", &P::unroll_k, {1, 2, 4, 8, 16, 32}, "unroll of the loop over a local tile's reduction slice"},
      {"ASYNC_COPY", &P::async_copy, {0, 1},
       "1: tiles go global -> local memory by cp.async (NVIDIA sm_80+, no staging registers); 0: through registers"},
      {"MAX_REGISTERS", &P::max_registers, {0, 80, 128, 168},
       "register cap per work-item on NVIDIA (0: the compiler's choice); CUDA turns it into a minimum of resident "
       "blocks, which keeps the next tile's loads ahead of the FMAs"},
  };
  if (direction == Direction::BackwardFilter) {
    fields.push_back({"SPLIT_K", &P::split_k, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
                      "slices of the N*P*Q reduction summed by a second kernel (fills the GPU for small filters)"});
  } else {
    fields.push_back({"SPLIT_K", &P::split_k, {1, 2, 3, 4},
                      "slices of the reduction summed by a second kernel (evens out the last wave of work-groups)"});
  }
  return ParameterTable<P>(std::move(fields));
}

bool holds_local_memory(const Params& p, const DeviceInfo& device) {
  return local_bytes(p) <= std::min<uint64_t>(kLocalMemoryCap, device.local_memory_bytes);
}

// Constraints, in the order their parameters are assigned (SearchSpace checks each as soon as it can).
std::vector<Constraint> make_constraints(const ConvProblem& problem) {
  using P = Params;
  using X = ConstraintContext;
  const GemmShape gemm = gemm_shape(problem);
  const ParameterTable<P>& t = parameter_table(problem);
  return {
      t.constraint("UNROLL_K divides TILE_K", {&P::tile_k, &P::unroll_k},
                   [](const P& p, const X&) { return p.tile_k % p.unroll_k == 0; }),
      t.constraint("THREADS_M divides TILE_M", {&P::tile_m, &P::threads_m},
                   [](const P& p, const X&) { return p.tile_m % p.threads_m == 0; }),
      t.constraint("THREADS_N divides TILE_N", {&P::tile_n, &P::threads_n},
                   [](const P& p, const X&) { return p.tile_n % p.threads_n == 0; }),
      t.constraint("threads per work-group within the device limit", {&P::threads_m, &P::threads_n},
                   [](const P& p, const X& x) { return static_cast<size_t>(p.threads()) <= x.device.max_work_group_size; }),
      t.constraint("register tile at most 64 accumulators", {&P::tile_m, &P::tile_n, &P::threads_m, &P::threads_n},
                   [](const P& p, const X&) {
                     return (p.tile_m / p.threads_m) * (p.tile_n / p.threads_n) <= kMaxAccumulators;
                   }),
      t.constraint("A tile loads in whole passes of the work-group",
                   {&P::tile_m, &P::tile_k, &P::threads_m, &P::threads_n},
                   [](const P& p, const X&) { return p.tile_m * p.tile_k % p.threads() == 0; }),
      t.constraint("B tile loads in whole passes of the work-group",
                   {&P::tile_n, &P::tile_k, &P::threads_m, &P::threads_n},
                   [](const P& p, const X&) { return p.tile_k * p.tile_n % p.threads() == 0; }),
      t.constraint("staged tile elements per work-item at most 32",
                   {&P::tile_m, &P::tile_n, &P::tile_k, &P::threads_m, &P::threads_n},
                   [](const P& p, const X&) { return (p.tile_m + p.tile_n) * p.tile_k / p.threads() <= kMaxStaged; }),
      t.constraint("register tile rows and columns are whole vectors",
                   {&P::tile_m, &P::tile_n, &P::threads_m, &P::threads_n, &P::vector_width},
                   [](const P& p, const X&) {
                     return (p.tile_m / p.threads_m) % p.vector_width == 0 &&
                            (p.tile_n / p.threads_n) % p.vector_width == 0;
                   }),
      t.constraint("local padding keeps vector reads aligned", {&P::vector_width, &P::local_padding},
                   [](const P& p, const X&) { return p.local_padding % p.vector_width == 0; }),
      t.constraint("local memory within the device limit and 48 KiB",
                   {&P::tile_m, &P::tile_n, &P::tile_k, &P::local_padding},
                   [](const P& p, const X& x) { return holds_local_memory(p, x.device); }),
      t.constraint("asynchronous copies need an NVIDIA GPU of compute capability 8.0 or newer", {&P::async_copy},
                   [](const P& p, const X& x) { return p.async_copy == 0 || supports_async_copy(x.device); }),
      t.constraint("register cap leaves room for the register tile",
                   {&P::tile_m, &P::tile_n, &P::threads_m, &P::threads_n, &P::max_registers},
                   [](const P& p, const X&) {
                     const int64_t mt = p.tile_m / p.threads_m, nt = p.tile_n / p.threads_n;
                     return p.max_registers == 0 || mt * nt + mt + nt + 24 <= p.max_registers;
                   }),
      t.constraint("M-tiles within the grid limit", {&P::tile_m},
                   [gemm](const P& p, const X&) { return ceil_div(gemm.m, p.tile_m) <= kMaxGridAxis; }),
      t.constraint("each split-K slice gets at least one reduction tile", {&P::tile_k, &P::split_k},
                   [gemm](const P& p, const X&) {
                     // Slices take ceil(tiles / SPLIT_K) tiles each, so the last one must still start inside the
                     // reduction.
                     const int64_t tiles = ceil_div(gemm.reduction, p.tile_k);
                     return (p.split_k - 1) * ceil_div(tiles, p.split_k) < tiles;
                   }),
      t.constraint("groups x split-K slices within the grid limit", {&P::split_k},
                   [](const P& p, const X& x) { return x.problem.conv().groups * p.split_k <= kMaxGridAxis; }),
      t.constraint("split-K workspace indexable with 32-bit integers", {&P::split_k},
                   [](const P& p, const X& x) {
                     return p.split_k * x.problem.conv().written_elements() <= kMaxTensorElements;
                   }),
      t.constraint("split-K workspace within the workspace limit", {&P::split_k},
                   [](const P& p, const X& x) {
                     const auto bytes = static_cast<uint64_t>(p.split_k * x.problem.conv().written_elements()) * sizeof(float);
                     return p.split_k == 1 || bytes <= workspace_limit(x.device);
                   }),
  };
}

bool valid(const Params& params, const ConvProblem& problem, const DeviceInfo& device) {
  const Config config = parameter_table(problem).write(params);
  const Problem generic(problem);
  const ConstraintContext context{config, generic, device};
  for (const Constraint& c : make_constraints(problem))
    if (!c.holds(context)) return false;
  return true;
}

// The largest tile of `sizes` (descending) that wastes at most 1/8 of its rows or columns at the edge, else the
// least wasteful one.
int64_t pick_tile(int64_t extent, std::initializer_list<int64_t> sizes) {
  int64_t best = *sizes.begin();
  double best_waste = 2;
  for (int64_t t : sizes) {
    const double waste = 1.0 - static_cast<double>(extent) / static_cast<double>(ceil_div(extent, t) * t);
    if (waste <= 0.125) return t;
    if (waste < best_waste) best_waste = waste, best = t;
  }
  return best;
}

Params make_params(int64_t tm, int64_t tn, int64_t tk, int64_t async, int64_t max_registers) {
  Params p;
  p.tile_m = tm, p.tile_n = tn, p.tile_k = tk;
  p.threads_m = std::clamp<int64_t>(tm / 8, 4, 16), p.threads_n = std::clamp<int64_t>(tn / 8, 4, 16);
  p.vector_width = 4;
  p.local_padding = 4;  // 0 measured 20-25% slower: the transposed A stores conflict
  p.unroll_k = tk;
  p.split_k = 1;
  p.async_copy = async;
  p.max_registers = max_registers;
  return p;
}

// Backward-filter's split of its N*P*Q reduction: doubled while each slice keeps at least 512 elements and the
// work-groups stay within about 24 waves of `resident` (multiprocessors x work-groups each holds), at most 512.
// On the H200 this split is the best or within 1.5% of it on all eight benchmark layers; a cap of 64 would leave
// fmnist1 at 12.6 ms where 512 slices take 1.61, alex1 at 0.93 where 128 take 0.68.
// Larger splits would leave the last slice empty on fmnist1 (980,000 tiles do not divide evenly), so 512 stays.
//
// Where 512-element slices of a reduction of at least 8,192 still leave under two waves, slices go down to 256
// elements: on the H200 three 3x3 stride-2 and grouped layers with reductions of 25,088 ran 1.2-1.4x
// faster at 64 slices than at the 16-32 the 512 floor allowed (s2a 0.138 against 0.194 ms, with the tile below).
int64_t backward_filter_split(int64_t reduction, int64_t tiles, int64_t resident) {
  int64_t split = 1;
  while (split < 512 && tiles * split * 2 <= 24 * resident &&
         (reduction / (split * 2) >= 512 ||
          (reduction >= 8192 && reduction / (split * 2) >= 256 && tiles * split < 2 * resident))) {
    split *= 2;
  }
  return split;
}

// Forward and backward-data's split where the tiles fill less than a wave: the largest of `max_split` slices that
// keeps the work-groups within about one wave and each slice at least 80 reduction elements (ten steps of 8; a
// bound not measured at its edge: a ResNet stem at N=1, 147 long, stays unsplit), else 1. 1x1 filters
// keep 1: there every split measured slower. Measured on the H200: a small 7x5 stride-2 forward (5 tiles, reduction
// 560) 0.025 ms at 4 slices against 0.059 unsplit; backward-data of Inception's 1x7 and 7x1 (145 tiles of 128x64)
// 0.102 and 0.140 at 3 against 0.118 and 0.178, a prime-sized layer 0.020 against 0.034; the 1x1 layers (N=1 at 104
// tiles, 196 tiles) 1-5% slower at 2 or 3, up to 22%.
int64_t short_wave_split(const ConvProblem& problem, int64_t reduction, int64_t tiles, int64_t resident,
                         int64_t max_split) {
  if (problem.r * problem.s == 1) return 1;
  for (int64_t split = max_split; split > 1; --split) {
    if (tiles * split * 20 <= resident * 23 && reduction / split >= 80) return split;
  }
  return 1;
}

// GPU default, from H200 measurements through CUDA and NVIDIA OpenCL:
// - GEMM rows filling 128-row tiles: 128x128x16 tiles on 256 work-items (8x8 register tiles) with asynchronous
//   copies, the fastest forward choice on both backends; backward-data prefers 128x64 on 128 work-items, and so
//   does everything without asynchronous copies: capped at 168 registers (three work-groups a multiprocessor),
//   ptxas keeps the register-staged loads ahead of the FMAs.
// - 64-row tiles otherwise (AlexNet's 192 channels): 64x128 on 128 work-items, 168 registers.
// - Split-K: backward-filter slices its long N*P*Q reduction until about 24 waves of work-groups (at least 512
//   reduction elements a slice, at most 512 slices); the others split in three where the work-groups would fill
//   two to three waves (CUDA forward) or less than two (backward-data with 64-row tiles), the cases where it
//   measured faster.
std::optional<Params> gpu_default(const ConvProblem& problem, const DeviceInfo& device) {
  const GemmShape gemm = gemm_shape(problem);
  const int64_t async = supports_async_copy(device) ? 1 : 0;
  int64_t tm = pick_tile(gemm.m, {128, 64, 32, 16}), tn = pick_tile(gemm.n, {128, 64, 32, 16});
  const Direction dir = problem.direction;
  const int64_t sms = std::max(1, device.compute_units);
  // Fewer tiles than half the multiprocessors leave most idle: halve the longer side (down to 64) until they cover
  // half (a 0.76 wave of 128x128 tiles on a batch-16 VGG layer keeps them: not measured worse). Backward-filter's
  // split fills the device instead, unless the reduction is too short to split (under 1,024: two slices of 512).
  // Measured on the H200: N=1 1x1 layers (1024 x 784 x 512) ran implicit_gemm's 128x128 default at 0.089-0.10 ms in
  // every direction, im2col_gemm's 64x64 at 0.055-0.069; a 1x1 layer of 512 x 1568 x 2048 0.30 ms against 0.20.
  if (dir != Direction::BackwardFilter || gemm.reduction < 1024) {
    while ((tm > 64 || tn > 64) && 2 * ceil_div(gemm.m, tm) * ceil_div(gemm.n, tn) * problem.groups < sms) {
      (tm >= tn ? tm : tn) /= 2;
    }
  }
  Params c;
  int64_t per_sm = 1;  // work-groups a multiprocessor holds, as measured (registers decide)
  // Backward-filter whose split 128x128 tiles make under four work-groups a multiprocessor (one fits): 128x64 tiles,
  // three a multiprocessor. On the H200 two 3x3 stride-2 layers of 5 and 9 such tiles (160 and 288 work-groups) ran
  // 1.15-1.24x faster so at the same 32 slices (0.157 against 0.194 ms, 0.257 against 0.295), 1.40x and 1.23x at 64;
  // AlexNet's (54 tiles, 1,728 work-groups) keep 128x128.
  const int64_t square_tiles = ceil_div(gemm.m, 128) * ceil_div(gemm.n, 128) * problem.groups;
  const bool few_filter_tiles = dir == Direction::BackwardFilter && tm == 128 && tn == 128 &&
                                square_tiles * backward_filter_split(gemm.reduction, square_tiles, sms) < 4 * sms;
  // Backward-data of 1x1 layers: 64x128 tiles where 128x64 ones would serve; on the H200 two ResNet-style 1x1 layers
  // ran 12-16% faster (0.066 against 0.076 ms, 0.102 against 0.122), a third level.
  const bool pointwise_data = dir == Direction::BackwardData && problem.r * problem.s == 1 && tm == 128 && tn >= 64;
  if (pointwise_data) {
    c = make_params(64, 128, 8, async, 168), per_sm = 3;
  } else if (tm == 128 && tn == 128 && async && dir != Direction::BackwardData && !few_filter_tiles) {
    c = make_params(128, 128, 16, 1, 0);  // about 170 registers: one work-group of 256 a multiprocessor
  } else if (tm == 128 && tn >= 64) {
    c = make_params(128, 64, 8, async, 168), per_sm = 3;  // staged: 26 TFLOP/s through NVIDIA OpenCL, async 35
  } else if (tm == 64 && tn >= 64) {
    // Forward measured 4% faster with register-staged loads here, on both backends.
    c = make_params(64, tn == 128 ? 128 : 64, 8, dir == Direction::Forward ? 0 : async, 168), per_sm = 3;
  } else {
    c = make_params(tm, tn, 8, async, 0), per_sm = 4;
  }
  if (!valid(c, problem, device)) return std::nullopt;

  const int64_t tiles = ceil_div(gemm.m, c.tile_m) * ceil_div(gemm.n, c.tile_n) * problem.groups;
  const double waves = static_cast<double>(tiles) / static_cast<double>(sms * per_sm);
  int64_t split = 1;
  if (dir == Direction::BackwardFilter) {
    split = backward_filter_split(gemm.reduction, tiles, sms * per_sm);
  } else {
    if (gemm.reduction / 3 >= 16 * c.tile_k) {
      const bool forward_tail = dir == Direction::Forward && device.backend == BackendKind::Cuda &&
                                c.tile_n == 128 && c.tile_m == 128 && waves >= 2 && waves < 3;
      const bool backward_data_tail = dir == Direction::BackwardData && c.tile_m == 64 && waves < 2 && !pointwise_data;
      if (forward_tail || backward_data_tail) split = 3;
    }
    // Forward only with tiles for under half the multiprocessors (measured: 5 tiles); backward-data wherever the
    // tiles fill under a wave of resident work-groups (measured: 94-145 tiles).
    if (split == 1 && (dir == Direction::BackwardData || 2 * tiles < sms)) {
      split = short_wave_split(problem, gemm.reduction, tiles, sms * per_sm, dir == Direction::Forward ? 4 : 3);
    }
  }
  // A split that leaves the last slice empty gives way to the next smaller one of the same kind (powers of two for
  // backward-filter, whose table holds only those).
  Params with_split = c;
  for (; split > 1; split = dir == Direction::BackwardFilter ? split / 2 : split - 1) {
    with_split.split_k = split;
    if (valid(with_split, problem, device)) return with_split;
  }
  return c;
}

class ImplicitGemmFamily final : public KernelFamily {
 public:
  std::string name() const override { return "implicit_gemm"; }
  std::string description() const override {
    return "seed 004's local-memory kernel: implicit GEMM with the im2col gather inside the tile loads, "
           "double-buffered local tiles, register tiles; all three directions, split-K for backward-filter";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = fp32_kernel_conv_reason(name(), generic, device); !why.empty()) return why;
    const ConvProblem& problem = generic.conv();
    if (epilogue.pool > 1) return "a fused max-pool is not implemented (bias and ReLU are)";
    if (epilogue.any() && problem.direction != Direction::Forward) {
      return "epilogues apply to the forward direction only";
    }
    for (int64_t elements : {problem.x_elements(), problem.w_elements(), problem.y_elements()}) {
      if (elements > kMaxTensorElements) return "a tensor exceeds 2^31-1 elements (32-bit indexing)";
    }
    if (problem.groups > kMaxGridAxis) return fmt::format("groups={} exceeds the grid limit {}", problem.groups, kMaxGridAxis);
    return {};
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return parameter_table(problem.conv()).parameters();
  }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    return make_constraints(problem.conv());
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& problem = generic.conv();
    const ParameterTable<Params>& table = parameter_table(problem);
    if (device.is_gpu) {
      if (const std::optional<Params> c = gpu_default(problem, device)) return table.write(*c);
    }
    // CPUs (PoCL) and anything the GPU list does not fit: small tiles, 64 work-items.
    Params c = make_params(32, 32, 8, 0, 0);
    c.threads_m = c.threads_n = 8, c.local_padding = 0;
    if (!valid(c, problem, device)) c.tile_m = c.tile_n = 16, c.threads_m = c.threads_n = 4;
    return table.write(c);
  }

  // Measured on the H200, each rule against the family a tune found:
  // - backward-data's GEMM has C/groups rows: with fewer than 8 most of every tile idles. C=3 at 111 ms for alex1,
  //   where im2col_gemm takes 1.36 ms and direct_tiled 1.70; the same 60-90x on a second C=3 layer;
  // - strided backward-data gathers through the zero-inserted gradient, so most of each tile's loads are masked:
  //   3x3 stride 2 at 0.53 and 1.71 ms where im2col_gemm took 0.18 and 0.48, a 7x5 stride-2 layer 0.076 against
  //   0.013;
  // - grouped layers with fewer than 16 channels a group (in and out; forward 16 too) leave most of each tile idle:
  //   depthwise 3x3 forward (groups = C = 256) at 0.293 ms where direct_tiled took 0.030; 8 a group (ResNeXt style)
  //   forward and backward-data at 0.036 ms where direct_tiled took 0.026, 16 a group forward 0.118 against 0.099,
  //   while 32 a group ran within 10% of the tuned best. Not backward-filter: its split-K fills the device whatever
  //   the group's width, and on five layers of 8-16 channels a group (reductions of 6,272 to 100,352) it ran level
  //   with direct_tiled or up to 1.6x faster (ResNeXt's 56x56 stage 1.15 against 1.44 ms);
  // - backward-filter over a short N*P*Q reduction into few outputs cannot be split to fill the device (a slice
  //   keeps at least 512 elements): two small odd-shaped layers (reductions of 288 and 1,680, 13,440 and 525
  //   outputs) at 0.033 and 0.050 ms where direct_tiled took 0.012 and 0.019; under 10,000 outputs a reduction up
  //   to 65,536 is still too short: a ResNet stem at N=1 (9,408 outputs, 12,544 long) 0.114 ms against
  //   direct_tiled's 0.040, a prime-sized layer (4,959 and 5,957) 0.080 against 0.019, a 1x1 projection (4,608 and
  //   50,176) 0.090 against 0.072; at N=32 the same stem (401,408 long) and a C=1 stride-2 layer (65,536) ran
  //   implicit_gemm fastest.
  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& problem = generic.conv();
    const Direction dir = problem.direction;
    if (dir == Direction::BackwardData && problem.c_per_group() < 8) {
      return fmt::format("backward-data with C/groups={} leaves most of each GEMM tile idle", problem.c_per_group());
    }
    if (dir == Direction::BackwardData && (problem.stride.h > 1 || problem.stride.w > 1)) {
      return fmt::format("backward-data with stride {}x{} masks most of each tile's gathers", problem.stride.h,
                         problem.stride.w);
    }
    if (problem.groups > 1 && dir != Direction::BackwardFilter) {
      const int64_t rows = dir == Direction::BackwardData ? problem.c_per_group() : problem.k_per_group();
      if (rows < 16 || (dir == Direction::Forward && rows == 16)) {
        return fmt::format("{} with {}/groups={} leaves most of each GEMM tile idle", to_string(dir),
                           dir == Direction::BackwardData ? "C" : "K", rows);
      }
    }
    if (dir == Direction::BackwardFilter) {
      // Only where the output tiles are few as well: a short reduction over many tiles (N=1 on a wide layer) fills
      // the device without a split.
      const GemmShape gemm = gemm_shape(problem);
      const int64_t outputs = gemm.m * gemm.n * problem.groups;
      if ((gemm.reduction < 2048 && outputs < 4 * 128 * 128) || (gemm.reduction < 65536 && outputs < 10000)) {
        return fmt::format("backward-filter's reduction N*P*Q={} over {} outputs is too short to split and too small "
                           "to fill the device",
                           gemm.reduction, outputs);
      }
    }
    // Larger multipliers still reduce over only R*S taps per output: the depthwise family's layers.
    return depthwise::leave_to_depthwise(problem);
  }

  // Backward-filter's split-K gives a long N*P*Q reduction over few output tiles its parallelism, and its best
  // value follows the new shape's reduction length and tile count, not the tuned shape's: it is recomputed with
  // the built-in default's rule on the carried tiles. Measured on the H200 over eight layers never tuned, the split
  // this rule gives (fitted) ran within 3% of the best split on all eight; keeping the tuned split cost 15% on one
  // (0.590 vs 0.514 ms), and scaling it to keep the tuned work-group count 38% on another (0.929 vs 0.672 ms). The
  // other directions' splits of 2-4 even out a last wave; they are kept as tuned.
  Config carry_config(const Config& tuned, const Problem& tuned_problem, const Problem& generic,
                      const DeviceInfo& device) const override {
    const ConvProblem& problem = generic.conv();
    if (tuned_problem == generic) return tuned;
    // A tile larger than this problem's default takes (the default fits its tiles to the GEMM and to the
    // multiprocessors) leaves most of it idle: the default serves instead. Measured on the H200: a 128x128
    // backward-filter tile carried to a 64-channel 5x5 layer ran 0.44 ms where the
    // default (64 rows) took 0.22.
    if (device.is_gpu) {
      const Config fresh = default_config(generic, device);
      for (const char* name : {"TILE_M", "TILE_N"}) {
        const auto t = tuned.find(name), f = fresh.find(name);
        if (t != tuned.end() && f != fresh.end() && t->second > f->second) return fresh;
      }
    }
    if (problem.direction != Direction::BackwardFilter) return tuned;
    const ParameterTable<Params>& table = parameter_table(problem);
    Params p;
    try {
      p = table.read(tuned);
    } catch (const InvalidArgument&) {
      return tuned;  // not this family's parameters: fit_config refuses them
    }
    const GemmShape gemm = gemm_shape(problem);
    const int64_t tiles = ceil_div(gemm.m, p.tile_m) * ceil_div(gemm.n, p.tile_n) * problem.groups;
    // Work-groups a multiprocessor holds, as the defaults measured them: one of 128x128, three of 64x64 and up.
    const int64_t area = p.tile_m * p.tile_n;
    const int64_t per_sm = area >= 128 * 128 ? 1 : area >= 64 * 64 ? 3 : 4;
    p.split_k = backward_filter_split(gemm.reduction, tiles, std::max(1, device.compute_units) * per_sm);
    Config carried = tuned;
    carried[table.name(&Params::split_k)] = p.split_k;
    return carried;
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    return make_recipe(problem.conv(), epilogue, parameter_table(problem.conv()).read(config), device);
  }
};

}  // namespace

const ParameterTable<Params>& parameter_table(const ConvProblem& problem) {
  static const ParameterTable<Params> filter = make_table(Direction::BackwardFilter);
  static const ParameterTable<Params> other = make_table(Direction::Forward);
  return problem.direction == Direction::BackwardFilter ? filter : other;
}

GemmShape gemm_shape(const ConvProblem& pb) {
  const int64_t rs = pb.r * pb.s;
  switch (pb.direction) {
    case Direction::Forward: return {pb.k_per_group(), pb.n * pb.p() * pb.q(), pb.c_per_group() * rs};
    case Direction::BackwardData: return {pb.c_per_group(), pb.n * pb.h * pb.w, pb.k_per_group() * rs};
    case Direction::BackwardFilter: return {pb.k_per_group(), pb.c_per_group() * rs, pb.n * pb.p() * pb.q()};
  }
  return {};
}

size_t local_bytes(const Params& p) {
  return static_cast<size_t>(2 * p.tile_k * (p.tile_m + p.local_padding + p.tile_n + p.local_padding)) * sizeof(float);
}

int64_t work_groups(const ConvProblem& problem, const Params& p) {
  const GemmShape gemm = gemm_shape(problem);
  return ceil_div(gemm.n, p.tile_n) * ceil_div(gemm.m, p.tile_m) * problem.groups * p.split_k;
}

}  // namespace convtune::implicit_gemm

std::unique_ptr<convtune::KernelFamily> convtune::families::make_implicit_gemm() {
  return std::make_unique<implicit_gemm::ImplicitGemmFamily>();
}
