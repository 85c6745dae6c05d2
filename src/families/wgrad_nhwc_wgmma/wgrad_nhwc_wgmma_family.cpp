// The wgrad_nhwc_wgmma family: channels-last BF16/FP16 backward-filter convolutions as implicit GEMMs on Hopper's
// warpgroup MMA that read x and dy in place (kernels/tensor_core/wgrad_nhwc_wgmma.cu): channels-last, both operands
// run along the GEMM's rows and columns in memory, which wgmma takes as MN-major (transposed) tiles, so no copy of x or
// dy precedes the GEMM. implicit_gemm_shifted_wgmma, which lays both out reduction-major first, spent as long in those
// copies as in its GEMM on ResNet-50's channels-last training step. Split-K; CUDA on compute capability 9.0.
#include <fmt/format.h>

#include <limits>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

using wgmma::Params;

const ParameterTable<Params>& table() { return wgmma::filter_table(); }

using wgmma::aligned;
using wgmma::ceil_div;

// The GEMM: rows R*S*C/groups (dw's channels-last filter row), columns K/groups, reduction N*P*Q; the workspace holds
// the split-K partials only.
struct Shape {
  int64_t m = 0, cols = 0, reduction = 0;
  uint64_t partial_bytes = 0;
};

Shape shape(const ConvProblem& pb, int64_t split_k) {
  Shape s;
  s.m = pb.r * pb.s * pb.c_per_group();
  s.cols = pb.k_per_group();
  s.reduction = pb.n * pb.p() * pb.q();
  s.partial_bytes = split_k > 1 ? aligned(static_cast<uint64_t>(split_k * pb.k * s.m * 4)) : 0;
  return s;
}

class WgradNhwcWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "wgrad_nhwc_wgmma"; }
  std::string description() const override {
    return "channels-last backward-filter implicit GEMM on Hopper's warpgroup MMA (wgmma, sm_90a) reading x and dy in "
           "place as MN-major tiles (no copies); BF16/FP16, split-K";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }
  bool computes_nhwc() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    if (pb.direction != Direction::BackwardFilter)
      return fmt::format("computes backward-filter, not {}: implicit_gemm_nhwc_wgmma and col2im_wgmma compute the others",
                         to_string(pb.direction));
    if (pb.layout != Layout::NHWC)
      return "reads channels-last x and dy in place; NCHW backward-filter is implicit_gemm_shifted_wgmma's";
    if (generic.type() == ElementType::F32)
      return "wgmma reads transposed (MN-major) operands in 16-bit types only; tf32 backward-filter is "
             "implicit_gemm_shifted_wgmma's";
    if (pb.c_per_group() % 8 != 0 || pb.k_per_group() % 8 != 0)
      return fmt::format("C/groups ({}) and K/groups ({}) must be multiples of 8: each copy is 8 channels of one tap",
                         pb.c_per_group(), pb.k_per_group());
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    const Shape s = shape(pb, 1);
    if (s.reduction > kMax || s.m > kMax) return "the reduction N*P*Q exceeds 2^31-1 (32-bit indexing)";
    return {};
  }

  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    return wgmma::conv_poor_fit(generic.conv());
  }

  std::string untuned_claim(const Problem& generic, const DeviceInfo& device) const override {
    if (!unsupported_reason(generic, {}, device).empty()) return {};
    return "channels-last backward-filter read in place (implicit_gemm_shifted_wgmma copies x and dy first)";
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    const ConvProblem pb = problem.conv();
    const Shape s = shape(pb, 1);
    return wgmma::split_gemm_constraints(table(), s.m, s.reduction, pb.groups, pb.type,
                                         [pb](int64_t split) { return shape(pb, split).partial_bytes; });
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const Shape s = shape(pb, 1);
    auto valid = [&](const Params& q) { return config_problem(*this, table().write(q), problem, device).empty(); };
    return table().write(wgmma::split_gemm_default(s.m, s.cols, s.reduction, pb.groups, pb.type, device, valid));
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo&) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table().read(config);
    const Shape s = shape(pb, p.split_k);
    KernelRecipe recipe;
    recipe.source.file = "tensor_core/wgrad_nhwc_wgmma.cu";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines.erase("N");  // an argument: a new batch size with the same tiles reuses the program
    wgmma::add_defines(table(), p, pb.type, recipe);
    recipe.workspace_bytes = s.partial_bytes;

    constexpr int x = 0, w = 1, dy = 2;
    LaunchStep main;
    main.kernel = "wgrad_nhwc_wgmma";
    main.geometry = wgmma::main_geometry(s.m, s.cols, pb.groups * p.split_k, p);
    main.args = {ArgSource::of_operand(w), ArgSource::of_operand(x), ArgSource::of_operand(dy),
                 ArgSource::fixed(static_cast<int32_t>(pb.n))};
    if (p.split_k > 1) main.args.push_back(ArgSource::workspace());
    recipe.steps.push_back(std::move(main));
    if (p.split_k > 1) {
      recipe.steps.push_back(
          wgmma::elementwise_step("wgr_reduce", {ArgSource::workspace(), ArgSource::of_operand(w)}, pb.k * s.m));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_wgrad_nhwc_wgmma() {
  return std::make_unique<WgradNhwcWgmmaFamily>();
}

}  // namespace convtune
