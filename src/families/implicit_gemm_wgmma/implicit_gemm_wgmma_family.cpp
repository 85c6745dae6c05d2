// The implicit_gemm_wgmma family: convolutions in all three directions as implicit GEMMs on Hopper's warpgroup MMA
// (kernels/tensor_core/implicit_gemm_wgmma.cu): the gathered operand goes through registers into 128-byte-swizzled
// shared memory while the previous stage's MMAs run, with a per-stage table of the reduction's offsets; the filters
// (transposed for backward-data) by cp.async. BF16/FP16 tensors and FP32 tensors in tf32 math, bias and ReLU fused
// forward, split-K for backward-filter; FP32 tensors in 3xtf32 math too (each operand split into a TF32 big part and
// residual, three products a stage, FP32-accurate). CUDA on compute capability 9.0.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

using wgmma::Params;

const ParameterTable<Params>& table(Direction direction) {
  static const ParameterTable<Params> filter = wgmma::make_table(
      {1, 2, 4, 8, 16, 32}, "slices of the N*P*Q reduction summed by a second kernel (fills the GPU: "
                            "backward-filter's output is only K x C/groups*R*S)");
  static const ParameterTable<Params> other =
      wgmma::make_table({1}, "not split: forward and backward-data have N*P*Q or N*H*W rows of output tiles");
  return direction == Direction::BackwardFilter ? filter : other;
}

using wgmma::aligned;
using wgmma::ceil_div;
using wgmma::round_up;

// 3xTF32: FP32 tensors split into TF32 big parts and residuals (kernel's SPLIT3).
bool split3(const ConvProblem& pb) { return pb.type == ElementType::F32 && pb.math == MathMode::TF32x3; }

// Strided backward-data (without dilation) runs one stride-1 GEMM per phase of dx instead of masking the taps that
// miss dy's grid: alex1's (stride 4) took 63 ms masked, where 15 of 16 gathered elements were zeros.
bool phased(const ConvProblem& pb) {
  return pb.direction == Direction::BackwardData && (pb.stride.h > 1 || pb.stride.w > 1) && pb.dilation.h == 1 &&
         pb.dilation.w == 1;
}

// The GEMM a direction is (rows M gathered, columns N, reduction) and how the workspace is used.
struct Shape {
  int64_t m = 0, n = 0, reduction = 0;
  int64_t phases = 1;     // strided backward-data: one GEMM per phase of dx (stride_h x stride_w), grid axis 2
  int64_t red_p = 0;      // row length of the filter operand (forward, backward-data), a multiple of 16 bytes
  bool w_direct = false;  // forward: the filter rows are read where they are
  bool dy_t = false;      // backward-filter: dy transposed K-contiguous into the workspace (else gathered)
  uint64_t w_bytes = 0, partial_bytes = 0;
  int64_t lo_shift = 0;   // 3xTF32: elements from a copied operand's big parts to its residuals in the workspace
};

Shape shape(const ConvProblem& pb, const Params& p, uint64_t limit) {
  Shape s;
  const int64_t rs = pb.r * pb.s, crs = pb.c_per_group() * rs, krs = pb.k_per_group() * rs;
  const int64_t eb = wgmma::element_bytes(pb.type), chunk = wgmma::chunk_elements(pb.type);
  // The copied operand's elements in the workspace (3xTF32: big parts, then residuals lo_shift elements on).
  const auto copied = [&](int64_t elements) {
    if (!split3(pb)) return aligned(static_cast<uint64_t>(elements * eb));
    s.lo_shift = static_cast<int64_t>(aligned(static_cast<uint64_t>(elements * eb))) / eb;
    return 2 * aligned(static_cast<uint64_t>(elements * eb));
  };
  switch (pb.direction) {
    case Direction::Forward:
      s.m = pb.n * pb.p() * pb.q(), s.n = pb.k_per_group(), s.reduction = crs;
      s.red_p = round_up(crs, chunk);
      s.w_direct = crs % chunk == 0 && !split3(pb);  // 3xTF32 splits the filters in the workspace
      s.w_bytes = s.w_direct ? 0 : copied(pb.k * s.red_p);
      break;
    case Direction::BackwardData:
      s.n = pb.c_per_group();
      if (phased(pb)) {
        // Each phase's taps are every stride-th row and column of the filter: ceil(R / stride) x ceil(S / stride).
        s.phases = pb.stride.h * pb.stride.w;
        s.m = pb.n * ceil_div(pb.h, pb.stride.h) * ceil_div(pb.w, pb.stride.w);
        s.reduction = pb.k_per_group() * ceil_div(pb.r, pb.stride.h) * ceil_div(pb.s, pb.stride.w);
      } else {
        s.m = pb.n * pb.h * pb.w, s.reduction = krs;
      }
      s.red_p = round_up(s.reduction, chunk);
      s.w_bytes = copied(pb.c * s.phases * s.red_p);
      break;
    case Direction::BackwardFilter:
      s.m = crs, s.n = pb.k_per_group(), s.reduction = pb.n * pb.p() * pb.q();
      s.red_p = round_up(s.reduction, chunk);
      s.partial_bytes = aligned(static_cast<uint64_t>(p.split_k * pb.k * crs) * 4);
      // dy copied K-contiguous (one memory-bound pass) where the workspace allows: then the main kernel gathers
      // only x, half of what it gathered (alex4 backward-filter 0.42 ms with both gathered, 2.3x cuDNN).
      s.w_bytes = copied(pb.k * s.red_p);
      s.dy_t = s.partial_bytes + s.w_bytes <= limit;
      if (!s.dy_t) s.w_bytes = 0, s.lo_shift = 0;
      break;
  }
  return s;
}

// The stages (twice their operands in 3xTF32: big parts and residuals) plus the reduction tables (STAGES x
// WG_TILE_K entries of 8 bytes, 12 for backward-filter).
size_t shared_bytes(const ConvProblem& pb, const Params& p) {
  const int64_t entry = pb.direction == Direction::BackwardFilter ? 12 : 8;
  const size_t stages = wgmma::shared_bytes(p) + (split3(pb) ? wgmma::shared_bytes(p) - 1024 : 0);
  return stages + static_cast<size_t>(p.stages * wgmma::tile_k(pb.type) * entry);
}

class ImplicitGemmWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "implicit_gemm_wgmma"; }
  std::string description() const override {
    return "implicit GEMM on Hopper's warpgroup MMA (wgmma, sm_90a): the gathered operand through registers into "
           "swizzled shared memory behind the running MMAs, a per-stage reduction table; BF16/FP16 tensors and FP32 "
           "in tf32 or 3xtf32 math, all three directions, bias and ReLU fused forward, split-K for backward-filter";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device, /*split_tf32=*/true);
        !why.empty())
      return why;
    const ConvProblem& pb = generic.conv();
    // The table packs the taps' displacements into 16-bit halves.
    const int64_t reach = std::max({(pb.r - 1) * pb.dilation.h, (pb.s - 1) * pb.dilation.w,
                                    (pb.p() - 1) * pb.stride.h, (pb.q() - 1) * pb.stride.w});
    if (reach >= 16384) return fmt::format("displacements up to {} exceed the reduction table's 16-bit halves", reach);
    if (pb.h + 2 * pb.pad.h >= 16384 || pb.w + 2 * pb.pad.w >= 16384)
      return "images of 16384 rows or columns or more exceed the reduction table's 16-bit halves";
    Params smallest;
    smallest.wg_m = 1, smallest.block_n = 64, smallest.stages = 3, smallest.split_k = 1;
    const Shape s = shape(pb, smallest, workspace_limit(device));
    if (s.w_bytes + s.partial_bytes > workspace_limit(device)) {
      return fmt::format("{} needs {} bytes of workspace (the filters laid out K-contiguous, or backward-filter's "
                         "partial sums), over the limit of {} bytes",
                         name(), s.w_bytes + s.partial_bytes, workspace_limit(device));
    }
    return {};
  }

  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    return wgmma::conv_poor_fit(generic.conv());
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return table(problem.conv().direction).parameters();
  }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const ConvProblem pb = problem.conv();
    const ParameterTable<Params>& t = table(pb.direction);
    std::vector<Constraint> list = {
        t.constraint("shared memory of all stages and tables within the device's opt-in limit",
                     {&Params::wg_m, &Params::block_n, &Params::stages}, [pb](const Params& p, const X& x) {
                       return shared_bytes(pb, p) <=
                              std::max(x.device.local_memory_bytes, x.device.local_memory_optin_bytes);
                     }),
        t.constraint("threads within the device limit", {&Params::wg_m}, [](const Params& p, const X& x) {
          return static_cast<size_t>(p.threads()) <= x.device.max_work_group_size;
        }),
        t.constraint("M-tiles within the CUDA grid limit", {&Params::wg_m}, [pb](const Params& p, const X& x) {
          return ceil_div(shape(pb, p, workspace_limit(x.device)).m, p.block_m()) <= wgmma::kMaxGridAxis;
        }),
        t.constraint("groups x split-K slices x phases within the grid limit", {&Params::split_k},
                     [pb](const Params& p, const X& x) {
                       return pb.groups * p.split_k * shape(pb, p, workspace_limit(x.device)).phases <= wgmma::kMaxGridAxis;
                     }),
        t.constraint("workspace within the limit", {&Params::split_k}, [pb](const Params& p, const X& x) {
          const Shape s = shape(pb, p, workspace_limit(x.device));
          return s.w_bytes + s.partial_bytes <= workspace_limit(x.device);
        }),
    };
    if (split3(pb)) {
      // 3xTF32 holds a tile's partial sums beside the accumulators: 2 x 64 registers a thread at BLOCK_N 128.
      list.push_back(t.constraint("3xtf32: BLOCK_N at most 128 (the accumulators and a tile's partial sums in registers)",
                                  {&Params::block_n}, [](const Params& p, const X&) { return p.block_n <= 128; }));
    }
    if (pb.direction == Direction::BackwardFilter) {
      // dy's rows are gathered one thread per row: at most as many rows as threads.
      list.push_back(t.constraint("BLOCK_N within the block's threads (backward-filter gathers a B row a thread)",
                                  {&Params::wg_m, &Params::block_n},
                                  [](const Params& p, const X&) { return p.block_n <= p.threads(); }));
      list.push_back(t.constraint("each split-K slice gets at least one reduction tile", {&Params::split_k},
                                  [pb](const Params& p, const X&) {
                                    const int64_t tiles = ceil_div(pb.n * pb.p() * pb.q(), wgmma::tile_k(pb.type));
                                    return (p.split_k - 1) * ceil_div(tiles, p.split_k) < tiles;
                                  }));
    }
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    Params p;
    p.split_k = 1;
    const Shape s0 = shape(pb, p, workspace_limit(device));
    p = wgmma::default_tiles(s0.m, s0.n);
    const bool filter = pb.direction == Direction::BackwardFilter;
    // dy's gathered rows (backward-filter) and 3xTF32's partial sums: registers beside the accumulators.
    if (filter || split3(pb)) p.block_n = std::min<int64_t>(p.block_n, 128);
    auto valid = [&](const Params& q) {
      return config_problem(*this, table(pb.direction).write(q), problem, device).empty();
    };
    while (!valid(p) && p.stages > 3) --p.stages;
    if (filter) {
      const int64_t blocks = ceil_div(s0.m, p.block_m()) * ceil_div(s0.n, p.block_n) * pb.groups;
      p = wgmma::split_to_fill(p, blocks, s0.reduction, pb.type, 32, 8, device, valid);
    }
    return table(pb.direction).write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table(pb.direction).read(config);
    const Shape s = shape(pb, p, workspace_limit(device));
    KernelRecipe recipe;
    recipe.source.file = "tensor_core/implicit_gemm_wgmma.cu";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
    recipe.source.defines["HAS_RELU"] = epilogue.relu ? "1" : "0";
    recipe.source.defines["RED_P"] = std::to_string(s.red_p);
    recipe.source.defines["W_DIRECT"] = s.w_direct ? "1" : "0";
    recipe.source.defines["PHASED"] = phased(pb) ? "1" : "0";
    recipe.source.defines["DY_T"] = s.dy_t ? "1" : "0";
    recipe.source.defines["WS_W"] = "0";
    recipe.source.defines["WS_PARTIAL"] = std::to_string(s.w_bytes);  // after dy's transposed copy, if any
    if (split3(pb)) {
      recipe.source.defines["SPLIT3"] = "1";
      recipe.source.defines["WS_LO_SHIFT"] = std::to_string(s.lo_shift);
    }
    wgmma::add_defines(table(pb.direction), p, pb.type, recipe);
    recipe.workspace_bytes = s.w_bytes + s.partial_bytes;

    constexpr int x = 0, w = 1, y = 2;
    const auto elementwise = wgmma::elementwise_step;
    LaunchStep main;
    main.kernel = "implicit_gemm_wgmma";
    main.geometry = wgmma::main_geometry(s.m, s.n, pb.groups * p.split_k * s.phases, p);
    main.geometry.dynamic_local_bytes = shared_bytes(pb, p);
    switch (pb.direction) {
      case Direction::Forward:
        if (!s.w_direct)
          recipe.steps.push_back(elementwise("wg_weights", {ArgSource::of_operand(w), ArgSource::workspace()}, pb.k * s.red_p));
        main.args = {ArgSource::of_operand(x), ArgSource::of_operand(w), ArgSource::of_operand(y), ArgSource::workspace()};
        if (epilogue.bias) main.args.push_back(ArgSource::of_operand(kBiasOperand));
        recipe.steps.push_back(std::move(main));
        break;
      case Direction::BackwardData:
        recipe.steps.push_back(
            elementwise("wg_weights", {ArgSource::of_operand(w), ArgSource::workspace()}, pb.c * s.phases * s.red_p));
        main.args = {ArgSource::of_operand(x), ArgSource::of_operand(y), ArgSource::workspace()};
        recipe.steps.push_back(std::move(main));
        break;
      case Direction::BackwardFilter:
        if (s.dy_t)
          recipe.steps.push_back(elementwise("wg_dy_transpose", {ArgSource::of_operand(y), ArgSource::workspace()},
                                             pb.k * s.red_p));
        main.args = {ArgSource::of_operand(x), ArgSource::of_operand(y), ArgSource::workspace()};
        recipe.steps.push_back(std::move(main));
        recipe.steps.push_back(elementwise("wg_filter_reduce", {ArgSource::workspace(), ArgSource::of_operand(w)},
                                           pb.k * s.m));
        break;
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_implicit_gemm_wgmma() {
  return std::make_unique<ImplicitGemmWgmmaFamily>();
}

}  // namespace convtune
