// The implicit_gemm_tc family: convolutions in all three directions as implicit GEMMs on NVIDIA tensor cores, of FP32
// tensors in tf32 or 3xtf32 math (kernels/tensor_core/implicit_gemm_tc.cl: implicit_gemm's gathers, cp.async into a
// multi-stage pipeline, mma.sync m16n8k8 TF32) and of BF16 or FP16 tensors with FP32 accumulation
// (implicit_gemm_tc16.cl: the same gathers through registers, m16n8k16, ldmatrix); split-K for long reductions
// (backward-filter), bias and ReLU fused into forward. FP32 math stays with the other families.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"
#include "src/families/gemm_tc/tc_tiles.h"
#include "src/families/implicit_gemm/implicit_gemm_spec.h"

namespace convtune {

namespace {

using tensor_core::Params;

const ParameterTable<Params>& table(Direction direction, ElementType type) {
  static const char* const filter_split =
      "slices of the N*P*Q reduction summed by a second kernel (fills the GPU for small filters)";
  static const char* const other_split =
      "slices of the reduction summed by a second kernel (fills the GPU when few output tiles)";
  static const std::vector<int64_t> filter_splits = {1, 2, 4, 8, 16, 32, 64, 128, 256}, other_splits = {1, 2, 4, 8};
  static const ParameterTable<Params> filter = tensor_core::make_table(filter_splits, filter_split);
  static const ParameterTable<Params> other = tensor_core::make_table(other_splits, other_split);
  static const ParameterTable<Params> filter16 = tensor_core::make_table(filter_splits, filter_split, ElementType::BF16);
  static const ParameterTable<Params> other16 = tensor_core::make_table(other_splits, other_split, ElementType::BF16);
  if (type != ElementType::F32) return direction == Direction::BackwardFilter ? filter16 : other16;
  return direction == Direction::BackwardFilter ? filter : other;
}
const ParameterTable<Params>& table(const ConvProblem& pb) { return table(pb.direction, pb.type); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// implicit_gemm_tc.cl's tiles: A K-contiguous always, B K-contiguous for backward-filter only.
tensor_core::TileLayout layout(Direction direction) { return {true, direction == Direction::BackwardFilter}; }

uint64_t workspace_bytes(const ConvProblem& pb, int64_t split) {
  return split > 1 ? static_cast<uint64_t>(split * pb.written_elements()) * sizeof(float) : 0;
}

class ImplicitGemmTcFamily final : public KernelFamily {
 public:
  std::string name() const override { return "implicit_gemm_tc"; }
  std::string description() const override {
    return "implicit GEMM on tensor cores: FP32 tensors in tf32 or 3xtf32 math (mma.sync m16n8k8), BF16/FP16 tensors "
           "with FP32 accumulation (m16n8k16, ldmatrix); implicit_gemm's gathers into a multi-stage pipeline; all "
           "three directions, split-K, bias and ReLU fused; NVIDIA sm_80+";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!generic.is_conv()) return "computes convolutions, not matrix products";
    if (std::string why = tensor_core::unsupported_reason(name(), generic, device, true); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    if (epilogue.pool > 1) return "a fused max-pool is not implemented (bias and ReLU are)";
    if (epilogue.any() && pb.direction != Direction::Forward) return "epilogues apply to the forward direction only";
    for (int64_t elements : {pb.x_elements(), pb.w_elements(), pb.y_elements()}) {
      if (elements > kMaxTensorElements) return "a tensor exceeds 2^31-1 elements (32-bit indexing)";
    }
    if (pb.groups > tensor_core::kMaxGridAxis) {
      return fmt::format("groups={} exceeds the grid limit {}", pb.groups, tensor_core::kMaxGridAxis);
    }
    return {};
  }

  // Untuned, a GEMM too thin for the 16x8 MMA tiles goes to the FP32 families (which compute tf32 and 3xtf32 too):
  // on the H200, alex1's backward-data (C=3, M=3) ran 135x slower than cuDNN on this family's default. Strided
  // backward-data gathers through the zero-inserted gradient as implicit_gemm's does (see its rule): alex1's
  // (stride 4) took 108-165 ms tuned where direct_tiled took 11 and im2col_gemm 1.4.
  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& problem = generic.conv();
    if (problem.direction == Direction::BackwardData && (problem.stride.h > 1 || problem.stride.w > 1)) {
      return fmt::format("backward-data with stride {}x{} masks most of each tile's gathers", problem.stride.h,
                         problem.stride.w);
    }
    const implicit_gemm::GemmShape gemm = implicit_gemm::gemm_shape(problem);
    if (gemm.m < 16) return fmt::format("a GEMM of {} rows per group fills less than one 16-row MMA tile", gemm.m);
    if (gemm.n < 8) return fmt::format("a GEMM of {} columns fills less than one 8-column MMA tile", gemm.n);
    return depthwise::leave_to_depthwise(generic.conv());
  }

  // tf32 backward-filter of fewer than 128 filter rows (C/groups*R*S): the wgmma families ranked before this one have
  // a single 64- or 128-row tile of them and at most a few hundred blocks of split-K, where this family's smaller tiles
  // and deeper split fill the GPU. On the H100 its default ran r50_exp (64 rows) and mb2_exp (24) at 0.53-0.67 of
  // cuDNN tf32's time, implicit_gemm_shifted_wgmma at 1.30-1.77 and implicit_gemm_wgmma at 1.42-1.76. In bf16 the
  // shifted family ran them at 0.26-0.53: no claim there.
  std::string untuned_claim(const Problem& generic, const DeviceInfo&) const override {
    if (!generic.is_conv()) return {};
    const ConvProblem& pb = generic.conv();
    const int64_t rows = pb.c_per_group() * pb.r * pb.s;
    if (pb.direction != Direction::BackwardFilter || pb.type != ElementType::F32 || pb.math != MathMode::TF32 ||
        rows >= 128)
      return {};
    return fmt::format("tf32 backward-filter of {} filter rows per group: smaller tiles and a deeper split-K than the "
                       "wgmma families' 64-row tiles",
                       rows);
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return table(problem.conv()).parameters();
  }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const ConvProblem pb = problem.conv();
    const implicit_gemm::GemmShape gemm = implicit_gemm::gemm_shape(pb);
    const ParameterTable<Params>& t = table(pb);
    std::vector<Constraint> list = tensor_core::tile_constraints(t, layout(pb.direction), pb.math, pb.type);
    list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&Params::tile_m}, [gemm](const Params& p, const X&) {
      return ceil_div(gemm.m, p.tile_m) <= tensor_core::kMaxGridAxis;
    }));
    list.push_back(t.constraint("each split-K slice gets at least one reduction tile", {&Params::tile_k, &Params::split_k},
                                [gemm](const Params& p, const X&) {
                                  // Slices take ceil(tiles / SPLIT_K) tiles each: the last must start inside.
                                  const int64_t tiles = ceil_div(gemm.reduction, p.tile_k);
                                  return (p.split_k - 1) * ceil_div(tiles, p.split_k) < tiles;
                                }));
    list.push_back(t.constraint("groups x split-K slices within the grid limit", {&Params::split_k},
                                [pb](const Params& p, const X&) { return pb.groups * p.split_k <= tensor_core::kMaxGridAxis; }));
    list.push_back(t.constraint("split-K workspace within the workspace limit and 32-bit indexing",
                                {&Params::split_k}, [pb](const Params& p, const X& x) {
                                  return p.split_k * pb.written_elements() <= kMaxTensorElements &&
                                         workspace_bytes(pb, p.split_k) <= workspace_limit(x.device);
                                }));
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const implicit_gemm::GemmShape gemm = implicit_gemm::gemm_shape(pb);
    auto valid = [&](const Params& p) { return config_problem(*this, table(pb).write(p), problem, device).empty(); };
    Params p = tensor_core::fit_default(tensor_core::default_tiles(gemm.m, gemm.n, gemm.reduction, pb.type), valid,
                                        pb.type == ElementType::F32 ? 8 : 16);
    const int64_t blocks = ceil_div(gemm.m, p.tile_m) * ceil_div(gemm.n, p.tile_n) * pb.groups;
    p.split_k = tensor_core::default_split(blocks, gemm.reduction, p, device,
                                           pb.direction == Direction::BackwardFilter ? 256 : 8, valid);
    return table(pb).write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table(pb).read(config);
    const implicit_gemm::GemmShape gemm = implicit_gemm::gemm_shape(pb);
    const bool narrow = pb.type != ElementType::F32;
    KernelRecipe recipe;
    recipe.source.file = narrow ? "tensor_core/implicit_gemm_tc16.cl" : "tensor_core/implicit_gemm_tc.cl";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
    recipe.source.defines["HAS_RELU"] = epilogue.relu ? "1" : "0";
    // Forward's A rows (one filter's C/groups*R*S weights) are contiguous: 16-byte copies where they stay aligned.
    // 16-bit: 16-byte copies of 8 elements where the rows are a multiple of 8 long.
    const int64_t vector = narrow ? 8 : 4;
    recipe.source.defines["A_VECTOR"] =
        pb.direction == Direction::Forward && gemm.reduction % vector == 0 ? std::to_string(vector) : "1";
    tensor_core::add_defines(table(pb), p, pb.math, recipe.source.defines, pb.type);
    tensor_core::add_register_cap(recipe, p, device);

    const int written = problem.written_operand();
    const bool split = p.split_k > 1;
    LaunchStep main;
    const std::string prefix = narrow ? "implicit_gemm_tc16" : "implicit_gemm_tc";
    main.kernel = prefix + (pb.direction == Direction::Forward        ? "_fwd"
                            : pb.direction == Direction::BackwardData ? "_bwd_data"
                                                                      : "_bwd_filter");
    // Arguments x, w, y; with split-K the written operand's place takes the workspace of partial outputs.
    for (int operand = 0; operand < Problem::kOperands; ++operand) {
      main.args.push_back(operand == written && split ? ArgSource::workspace() : ArgSource::of_operand(operand));
    }
    if (epilogue.bias && !split) main.args.push_back(ArgSource::of_operand(kBiasOperand));
    main.geometry = tensor_core::main_geometry(gemm.m, gemm.n, pb.groups * p.split_k, p, layout(pb.direction), pb.type);
    recipe.steps.push_back(std::move(main));
    if (split) {
      recipe.workspace_bytes = workspace_bytes(pb, p.split_k);
      std::vector<ArgSource> args = {ArgSource::workspace(), ArgSource::of_operand(written)};
      if (epilogue.bias) args.push_back(ArgSource::of_operand(kBiasOperand));
      recipe.steps.push_back(tensor_core::splitk_reduce_step(std::move(args), pb.written_elements(), device));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_implicit_gemm_tc() { return std::make_unique<ImplicitGemmTcFamily>(); }

}  // namespace convtune
