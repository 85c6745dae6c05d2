// The winograd family: Winograd's minimal filtering (non-fused: transforms, a batched GEMM on the gemm kernel,
// inverse transform) for stride-1 square filters, F(2x2), F(4x4) or F(6x6) output tiles, in all three directions.
// Parameters, constraints, defaults and the launches; the kernels are kernels/winograd/winograd.cl, the transform
// matrices come from winograd_transforms.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm/gemm_tiles.h"
#include "src/families/winograd/winograd_transforms.h"

namespace convtune {

namespace {

struct Params : gemm::TileParams {
  int64_t m_tile = 0, batch_chunk = 0, split = 0, transform_threads = 0;
};

const std::vector<int64_t> kBatchChunks = {1, 2, 4, 8, 16, 32, 64, 128, 256};
// The recipe holds three launch steps per chunk of the batch; this bounds its size, so a huge N is refused up front
// instead of building millions of steps (as im2col_gemm once did: N = 2e8 took 6 GB before the OOM killer).
constexpr int64_t kMaxChunks = 4096;
constexpr int64_t kMaxAlpha = 8;
constexpr size_t kWorkspaceAlignFloats = 64;  // V and M start on 256-byte boundaries: vector loads stay aligned

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t = [] {
    std::vector<ParameterTable<Params>::Field> fields = {
        {"M_TILE", &Params::m_tile, {2, 4, 6},
         "Winograd tile: outputs per tile side (forward, backward-data) or dy taps per tile side (backward-filter); "
         "larger tiles do fewer multiplications with larger rounding errors"},
        {"BATCH_CHUNK", &Params::batch_chunk, kBatchChunks, "images whose transformed tiles the workspace holds per step"},
        {"SPLIT", &Params::split, {1, 2, 4, 8, 16, 32, 64},
         "backward-filter: slices of the tiles reduced by separate work-groups (fills the device when K x C is small)"},
        {"TRANSFORM_THREADS", &Params::transform_threads, {64, 128, 256}, "work-group size of the transform kernels"},
    };
    gemm::add_tile_fields<Params>(fields);
    return ParameterTable<Params>(std::move(fields));
  }();
  return t;
}

// The declared error bound of F(m x m, r x r) with alpha = m + r - 1 points, as a multiple of the direct sum's FP32
// tolerance, measured over tests/families/winograd_test.cpp and the conformance cases (docs/ARCHITECTURE.md,
// "Tolerance"): alpha 4 and 6 stay within the tolerance itself (at most 0.3x of it); alpha 8 reaches 0.5x on long
// reductions and 1.7x on the shortest (a 5x5 filter over a 5x5 input, where the tolerance is its 1e-6 floor and the
// transforms' own rounding dominates), so it is held to 4x, which only fp32-fast (and tf32) math admits.
double alpha_error_factor(int64_t alpha) { return alpha > 6 ? 4.0 : 1.0; }

// Whether the problem's math mode admits the rounding of `alpha` points (see max_error_factor in convtune/types.h).
bool math_admits(const ConvProblem& pb, int64_t alpha) {
  return alpha_error_factor(alpha) <= max_error_factor(pb.type, pb.math);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t align(uint64_t floats) { return static_cast<size_t>((floats + kWorkspaceAlignFloats - 1) / kWorkspaceAlignFloats * kWorkspaceAlignFloats); }

// The shape of one Winograd plan: tiles, the GEMM per group and position, the workspace's three parts (floats).
struct Layout {
  int64_t alpha = 0, tiles_y = 0, tiles_x = 0, tiles = 0;  // tiles: per channel and chunk, whole slices
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;            // one slice's GEMM
  size_t v_offset = 0, m_offset = 0, total = 0;
};

Layout layout(const ConvProblem& pb, int64_t m_tile, int64_t chunk, int64_t split) {
  Layout l;
  l.alpha = m_tile + pb.r - 1;
  const bool to_x = pb.direction == Direction::BackwardData;
  l.tiles_y = ceil_div(to_x ? pb.h : pb.p(), m_tile);
  l.tiles_x = ceil_div(to_x ? pb.w : pb.q(), m_tile);
  const int64_t s = pb.direction == Direction::BackwardFilter ? split : 1;
  l.tiles = ceil_div(chunk * l.tiles_y * l.tiles_x, s) * s;
  const uint64_t positions = static_cast<uint64_t>(pb.groups * l.alpha * l.alpha);
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group();
  uint64_t u = 0, v = 0, m = 0;
  switch (pb.direction) {
    case Direction::Forward:
    case Direction::BackwardData: {
      const int64_t in = to_x ? kg : cg, out = to_x ? cg : kg;
      l.gemm_m = out, l.gemm_n = l.tiles, l.gemm_k = in;
      u = positions * static_cast<uint64_t>(out * in);
      v = positions * static_cast<uint64_t>(in * l.tiles);
      m = positions * static_cast<uint64_t>(out * l.tiles);
      break;
    }
    case Direction::BackwardFilter:
      l.gemm_m = kg, l.gemm_n = cg, l.gemm_k = l.tiles / s;
      u = positions * static_cast<uint64_t>(kg * l.tiles);
      v = positions * static_cast<uint64_t>(cg * l.tiles);
      m = positions * static_cast<uint64_t>(kg * cg * s);
      break;
  }
  l.v_offset = align(u);
  l.m_offset = l.v_offset + align(v);
  l.total = l.m_offset + m;
  return l;
}

uint64_t workspace_bytes(const ConvProblem& pb, int64_t m_tile, int64_t chunk, int64_t split) {
  return layout(pb, m_tile, chunk, split).total * sizeof(float);
}

// Whether `width`-float loads of the GEMM's A (U) and B (V) stay aligned (gemm.cl's X_VECTOR contract): the stored
// rows' length and pitch are multiples of it. A's rows are the reduction (channels; backward-filter: one slice's
// tiles); B's rows are the tiles (backward-filter: one slice's tiles again, B being stored transposed).
bool a_vectorizes(const Layout& l, int64_t width) { return l.gemm_k % width == 0; }
bool b_vectorizes(const ConvProblem& pb, const Layout& l, int64_t width) {
  return (pb.direction == Direction::BackwardFilter ? l.gemm_k : l.tiles) % width == 0;
}

class WinogradFamily final : public KernelFamily {
 public:
  std::string name() const override { return "winograd"; }
  std::string description() const override {
    return "Winograd minimal filtering F(2x2|4x4|6x6, 3x3|5x5|7x7) for stride-1 square filters: filter and tile "
           "transforms, the gemm kernel batched over groups and transform positions, inverse transform; all "
           "directions (backward-filter with the dy tiles as filters)";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  int untuned_rank() const override { return 40; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!generic.is_conv()) return "computes convolutions, not matrix products";
    if (!device.can_run_kernels) return fmt::format("needs a device that compiles kernels: {}", device.cannot_run_reason);
    if (std::string why = fp32_only_reason(name(), generic); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    if (epilogue.pool > 1) return "a fused max-pool is not implemented (bias and ReLU are)";
    if (epilogue.any() && pb.direction != Direction::Forward) return "epilogues apply to the forward direction only";
    if (pb.stride.h != 1 || pb.stride.w != 1) return fmt::format("needs stride 1, not {}x{}", pb.stride.h, pb.stride.w);
    if (pb.dilation.h != 1 || pb.dilation.w != 1)
      return fmt::format("needs dilation 1, not {}x{}", pb.dilation.h, pb.dilation.w);
    if (pb.r != pb.s || (pb.r != 3 && pb.r != 5 && pb.r != 7))
      return fmt::format("needs a square 3x3, 5x5 or 7x7 filter, not {}x{}", pb.r, pb.s);
    // The smallest tile, F(2x2), is the most accurate: if its points are too many for the mode, every tile is.
    if (!math_admits(pb, 2 + pb.r - 1)) {
      return fmt::format("a {}x{} filter needs alpha {} (F(2x2,{}x{})), held to {:g}x the FP32 tolerance: {} math "
                         "admits {:g}x (fp32-fast admits it)",
                         pb.r, pb.s, 2 + pb.r - 1, pb.r, pb.s, alpha_error_factor(2 + pb.r - 1), to_string(pb.math),
                         max_error_factor(pb.type, pb.math));
    }
    if (pb.groups * 16 > gemm::kMaxGridAxis)
      return fmt::format("groups={} exceeds {} (groups x transform positions on CUDA grid axis 2)", pb.groups,
                         gemm::kMaxGridAxis / 16);
    if (workspace_bytes(pb, 2, 1, 1) > workspace_limit(device)) {
      return fmt::format("the transformed tiles of one image ({} bytes) exceed the workspace limit of {} bytes",
                         workspace_bytes(pb, 2, 1, 1), workspace_limit(device));
    }
    int64_t largest_chunk = 1;  // of those whose tiles fit the workspace at the smallest tile
    for (int64_t c : kBatchChunks)
      if (workspace_bytes(pb, 2, c, 1) <= workspace_limit(device)) largest_chunk = c;
    if (ceil_div(pb.n, largest_chunk) > kMaxChunks) {
      return fmt::format("N={} needs more than {} chunks of at most {} images (three launch steps each)", pb.n,
                         kMaxChunks, largest_chunk);
    }
    return {};
  }

  // Depthwise and few-channel layers make the GEMM a sliver: the transforms' memory traffic then dominates.
  std::string untuned_poor_fit(const Problem& generic) const override {
    const ConvProblem& pb = generic.conv();
    if (std::min(pb.c_per_group(), pb.k_per_group()) < 16)
      return fmt::format("{} channels per group: the transforms' traffic outweighs the GEMM", std::min(pb.c_per_group(), pb.k_per_group()));
    return {};
  }

  // Measured on the H200 with no tuning data (docs/PERFORMANCE.md, "layers never seen"): on 3x3 layers with at
  // least 32 channels a group in and out, winograd's default ran 1.3-3.7x faster than the best other family's in
  // every direction (N=1 to 32, 7x7 to 128x128 images); on 5x5 layers with at least 48, 1.1-1.7x, but for
  // backward-filter only where C x K per group reaches 4,096 (48 x 64 ran 0.31 ms against implicit_gemm's 0.22).
  // Below 32 channels (19, 8) it lost. FP32 math only: in tf32 the tensor-core families compete.
  std::string untuned_claim(const Problem& generic) const override {
    const ConvProblem& pb = generic.conv();
    if (pb.math != MathMode::FP32 && pb.math != MathMode::FP32Fast) return {};
    const int64_t channels = std::min(pb.c_per_group(), pb.k_per_group());
    const bool wide_3x3 = pb.r == 3 && channels >= 32;
    const bool wide_5x5 = pb.r == 5 && channels >= 48 &&
                          (pb.direction != Direction::BackwardFilter || pb.c_per_group() * pb.k_per_group() >= 4096);
    if (!wide_3x3 && !wide_5x5) return {};
    return fmt::format("a {}x{} stride-1 layer with {} channels a group: the transforms save 2-4x the multiplies", pb.r,
                       pb.s, channels);
  }

  double error_factor(const Problem& generic, const Config& config) const override {
    const auto it = config.find("M_TILE");
    return it == config.end() ? 1.0 : alpha_error_factor(it->second + generic.conv().r - 1);
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using X = ConstraintContext;
    const ConvProblem pb = generic.conv();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = {
        t.constraint("tile side + filter side - 1 (alpha) at most 8", {&Params::m_tile},
                     [pb](const Params& p, const X&) { return p.m_tile + pb.r - 1 <= kMaxAlpha; }),
        t.constraint(fmt::format("alpha's error bound within what {} math admits (alpha 8: fp32-fast)", to_string(pb.math)),
                     {&Params::m_tile}, [pb](const Params& p, const X&) { return math_admits(pb, p.m_tile + pb.r - 1); }),
        t.constraint("batch chunk at most the batch", {&Params::batch_chunk},
                     [pb](const Params& p, const X&) { return p.batch_chunk <= pb.n; }),
        t.constraint("at most 4096 batch chunks (launch steps)", {&Params::batch_chunk},
                     [pb](const Params& p, const X&) { return ceil_div(pb.n, p.batch_chunk) <= kMaxChunks; }),
        t.constraint("SPLIT above 1 only for backward-filter", {&Params::split},
                     [pb](const Params& p, const X&) { return p.split == 1 || pb.direction == Direction::BackwardFilter; }),
        t.constraint("SPLIT at most the tiles of a chunk", {&Params::m_tile, &Params::batch_chunk, &Params::split},
                     [pb](const Params& p, const X&) {
                       const Layout l = layout(pb, p.m_tile, p.batch_chunk, 1);
                       return p.split <= l.tiles;
                     }),
        t.constraint("workspace within the workspace limit", {&Params::m_tile, &Params::batch_chunk, &Params::split},
                     [pb](const Params& p, const X& x) {
                       return workspace_bytes(pb, p.m_tile, p.batch_chunk, p.split) <= workspace_limit(x.device);
                     }),
        t.constraint("transform work-group within the device limit", {&Params::transform_threads},
                     [](const Params& p, const X& x) {
                       return static_cast<size_t>(p.transform_threads) <= x.device.max_work_group_size;
                     }),
    };
    // The GEMM's rows are output channels (forward/backward-filter: K/groups; backward-data: C/groups).
    const int64_t rows = pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group();
    // Vector loads where one of the GEMM's operands takes them: its layout depends on the tile side, the chunk and
    // the slices, so the check is a constraint of its own (the recipe narrows the other operand's loads to 1).
    for (Constraint& c : gemm::tile_constraints(t, rows, [](int64_t) { return true; })) list.push_back(std::move(c));
    list.push_back(t.constraint("VECTOR_WIDTH above 1 only where the GEMM's U or V rows are multiples of it",
                                {&Params::m_tile, &Params::batch_chunk, &Params::split, &Params::vector_width},
                                [pb](const Params& p, const X&) {
                                  const Layout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
                                  return a_vectorizes(l, p.vector_width) || b_vectorizes(pb, l, p.vector_width);
                                }));
    return list;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    Params p;
    // F(4x4, 3x3) for 3x3 filters (alpha 6: 4x fewer multiplications than direct, errors still near FP32's) and
    // F(2x2) for larger ones; F(2x2) also where a 4x4 tile would be mostly padding (outputs of 4 or less).
    const int64_t out_side = std::min(pb.direction == Direction::BackwardData ? pb.h : pb.p(),
                                      pb.direction == Direction::BackwardData ? pb.w : pb.q());
    p.m_tile = pb.r == 3 && out_side > 4 ? 4 : 2;
    const uint64_t cap = workspace_limit(device);
    p.split = 1;
    if (pb.direction == Direction::BackwardFilter) {
      // Enough slices for about 4 work-groups per multiprocessor-sized share of a large GPU (K x C tiles are few).
      const int64_t groups_per_slice = pb.groups * (p.m_tile + pb.r - 1) * (p.m_tile + pb.r - 1) *
                                       ceil_div(pb.k_per_group(), 64) * ceil_div(pb.c_per_group(), 64);
      while (p.split < 64 && groups_per_slice * p.split < 512) p.split *= 2;
    }
    p.batch_chunk = 1;
    for (int64_t c : kBatchChunks)
      if (c <= pb.n && workspace_bytes(pb, p.m_tile, c, p.split) <= cap) p.batch_chunk = c;
    while (p.split > 1 && layout(pb, p.m_tile, p.batch_chunk, 1).tiles < p.split) p.split /= 2;
    p.transform_threads = device.max_work_group_size >= 128 ? 128 : 64;
    Config config;
    const Layout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
    std::vector<gemm::TileParams> candidates = gemm::preferred_tiles(device.is_gpu);
    // Large GEMMs on a GPU: the gemm family's large setup. Against 64x64 tiles with float4 reads it was not
    // measured yet; against 128x128 tiles with TILE_K 32 and scalar reads (the default before) the gemm family's
    // 4096^3 product was 10% faster.
    if (device.is_gpu && l.gemm_m >= 128 && l.gemm_n >= 128 * 16) candidates.insert(candidates.begin(), gemm::large_gpu_tiles());
    for (const gemm::TileParams& tiles : candidates) {
      // CPUs (PoCL) run a work-group's threads one after another between barriers: large groups only cost there.
      if (!device.is_gpu && tiles.threads() > 64) continue;
      static_cast<gemm::TileParams&>(p) = tiles;
      // The widest loads both operands take, else the widest either takes.
      for (int64_t width : {4, 2, 1}) {
        if (a_vectorizes(l, width) || b_vectorizes(pb, l, width)) {
          p.vector_width = width;
          break;
        }
      }
      config = table().write(p);
      if (config_problem(*this, config, generic, device).empty()) break;
    }
    return config;  // the smallest setup when none fits: Plan::create then names the failing constraint
  }

  // The chunk and the slices decompose the problem; the tile side and the GEMM tiles shape the kernels.
  Config carry_config(const Config& tuned, const Problem&, const Problem& problem, const DeviceInfo& device) const override {
    Config carried = tuned;
    const Config fresh = default_config(problem, device);
    for (const char* name : {"BATCH_CHUNK", "SPLIT"}) carried[name] = fresh.at(name);
    return carried;
  }

  KernelRecipe recipe(const Problem& generic, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    const Params p = table().read(config);
    const Layout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
    KernelRecipe recipe;
    recipe.source.file = "winograd/winograd.cl";
    recipe.source.defines = problem_defines(pb);
    table().add_defines(p, recipe.source.defines);
    auto s = [](int64_t v) { return std::to_string(v); };
    auto& d = recipe.source.defines;
    d["ALPHA"] = s(l.alpha);
    d["TILES_Y"] = s(l.tiles_y);
    d["TILES_X"] = s(l.tiles_x);
    d["V_OFFSET"] = s(static_cast<int64_t>(l.v_offset));
    d["M_OFFSET"] = s(static_cast<int64_t>(l.m_offset));
    d["A_VECTOR"] = s(a_vectorizes(l, p.vector_width) ? p.vector_width : 1);
    d["B_VECTOR"] = s(b_vectorizes(pb, l, p.vector_width) ? p.vector_width : 1);
    const int m = static_cast<int>(p.m_tile), r = static_cast<int>(pb.r);
    const bool filter_gradient = pb.direction == Direction::BackwardFilter;
    // Forward and backward-data: F(m, r). Backward-filter: F(r, m), the dy tile being the filter.
    const winograd::Transforms transforms = filter_gradient
                                                ? winograd::make_transforms(r, m, winograd::default_points(r, m))
                                                : winograd::make_transforms(m, r, winograd::default_points(m, r));
    winograd::add_defines(transforms, d);
    d["HAS_BIAS"] = epilogue.bias ? "1" : "0";  // bias and ReLU fused into the forward output transform
    d["HAS_RELU"] = epilogue.relu ? "1" : "0";
    recipe.workspace_bytes = l.total * sizeof(float);

    constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
    auto op = ArgSource::of_operand;
    const ArgSource workspace = ArgSource::workspace();
    const int64_t threads = p.transform_threads;
    auto flat = [threads](int64_t items) {
      LaunchGeometry g;
      g.global[0] = static_cast<size_t>(ceil_div(items, threads) * threads);
      g.local[0] = static_cast<size_t>(threads);
      return g;
    };
    const int64_t positions = l.alpha * l.alpha;
    const int64_t cg = pb.c_per_group(), kg = pb.k_per_group();
    if (!filter_gradient) {
      const bool forward = pb.direction == Direction::Forward;
      const int64_t in = forward ? cg : kg, out = forward ? kg : cg;
      const int in_operand = forward ? x : y, out_operand = forward ? y : x;
      recipe.steps.push_back({"winograd_filter_transform", {op(w), workspace}, flat(pb.groups * out * in)});
      const LaunchGeometry gemm_geometry = gemm::launch_geometry(l.gemm_m, l.gemm_n, pb.groups * positions, p);
      for (int64_t image0 = 0; image0 < pb.n; image0 += p.batch_chunk) {
        const ArgSource first = ArgSource::fixed(static_cast<int32_t>(image0));
        const ArgSource count = ArgSource::fixed(static_cast<int32_t>(std::min(p.batch_chunk, pb.n - image0)));
        recipe.steps.push_back({"winograd_input_transform", {op(in_operand), workspace, first, count}, flat(pb.groups * in * l.tiles)});
        recipe.steps.push_back({"gemm", {workspace, workspace, workspace, first, count}, gemm_geometry});
        std::vector<ArgSource> output_args = {workspace, op(out_operand), first, count};
        if (epilogue.bias) output_args.push_back(op(kBiasOperand));
        recipe.steps.push_back({"winograd_output_transform", output_args, flat(pb.groups * out * l.tiles)});
      }
    } else {
      recipe.steps.push_back({"winograd_zero", {workspace}, flat(p.split * pb.groups * positions * kg * cg)});
      const LaunchGeometry gemm_geometry = gemm::launch_geometry(l.gemm_m, l.gemm_n, p.split * pb.groups * positions, p);
      for (int64_t image0 = 0; image0 < pb.n; image0 += p.batch_chunk) {
        const ArgSource first = ArgSource::fixed(static_cast<int32_t>(image0));
        const ArgSource count = ArgSource::fixed(static_cast<int32_t>(std::min(p.batch_chunk, pb.n - image0)));
        recipe.steps.push_back({"winograd_gradient_transform", {op(y), workspace, first, count}, flat(pb.groups * kg * l.tiles)});
        recipe.steps.push_back({"winograd_input_transform", {op(x), workspace, first, count}, flat(pb.groups * cg * l.tiles)});
        recipe.steps.push_back({"gemm", {workspace, workspace, workspace, first, count}, gemm_geometry});
      }
      recipe.steps.push_back({"winograd_filter_output_transform", {workspace, op(w)}, flat(pb.groups * kg * cg)});
    }
    return recipe;
  }

};

}  // namespace

std::unique_ptr<KernelFamily> families::make_winograd() { return std::make_unique<WinogradFamily>(); }

}  // namespace convtune
