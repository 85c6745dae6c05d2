// The implicit_gemm_shifted_wgmma family: backward-filter convolutions as implicit GEMMs on Hopper's warpgroup MMA
// over S column-shifted, row-padded copies of x and a row-padded copy of dy (kernels/tensor_core/
// implicit_gemm_shifted_wgmma.cu), so both operands are copied by 16-byte cp.async like a plain GEMM's:
// implicit_gemm_wgmma gathers x's scattered 2-byte elements through registers, which held its 3x3 and 5x5
// backward-filter rows at 67-170 TFLOP/s in bf16 (1.6-3.0x cuDNN). BF16/FP16 tensors and FP32 in tf32 math, split-K.
// CUDA on compute capability 9.0. Channels-last problems make the same copies from channels-last x and dy.
#include <fmt/format.h>

#include <algorithm>
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
using wgmma::round_up;

// The GEMM (rows C/groups*R*S, columns K/groups, reduction N*P*QP) and the workspace: the shifted copies of x, dy's
// rows, then the split-K partials.
struct Shape {
  int64_t m = 0, cols = 0;
  int64_t qp = 0;  // Q padded to a whole 16-byte chunk: every copied row's length
  int64_t reduction = 0;
  int64_t x_elements = 0, dy_elements = 0;
  uint64_t x_bytes = 0, dy_bytes = 0, partial_bytes = 0;
  uint64_t workspace() const { return x_bytes + dy_bytes + partial_bytes; }
};

Shape shape(const ConvProblem& pb, int64_t split_k) {
  Shape s;
  const int64_t eb = wgmma::element_bytes(pb.type);
  s.m = pb.c_per_group() * pb.r * pb.s;
  s.cols = pb.k_per_group();
  s.qp = round_up(pb.q(), wgmma::chunk_elements(pb.type));
  s.reduction = pb.n * pb.p() * s.qp;
  s.x_elements = pb.s * pb.n * pb.c * pb.h * s.qp;
  s.dy_elements = pb.k * s.reduction;
  s.x_bytes = aligned(static_cast<uint64_t>(s.x_elements * eb));
  s.dy_bytes = aligned(static_cast<uint64_t>(s.dy_elements * eb));
  s.partial_bytes = split_k > 1 ? aligned(static_cast<uint64_t>(split_k * pb.k * s.m * 4)) : 0;
  return s;
}

class ImplicitGemmShiftedWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "implicit_gemm_shifted_wgmma"; }
  std::string description() const override {
    return "backward-filter implicit GEMM on Hopper's warpgroup MMA (wgmma, sm_90a) over S column-shifted copies of "
           "x and dy's rows, each row padded to a 16-byte chunk: both operands by cp.async; BF16/FP16 tensors and "
           "FP32 in tf32 math, split-K";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }
  bool computes_nhwc() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    if (pb.direction != Direction::BackwardFilter)
      return fmt::format("computes backward-filter, not {}: implicit_gemm_nhwc_wgmma and implicit_gemm_wgmma compute "
                         "the others",
                         to_string(pb.direction));
    const Shape s = shape(pb, 1);
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    if (s.x_elements > kMax || s.reduction > kMax)
      return fmt::format("the shifted copies of x ({} elements) or the reduction ({}) exceed 2^31-1 (32-bit indexing)",
                         s.x_elements, s.reduction);
    if (s.workspace() > workspace_limit(device)) {
      return fmt::format("{} needs {} bytes of workspace (S={} shifted copies of x and dy's rows), over the limit of "
                         "{} bytes",
                         name(), s.workspace(), pb.s, workspace_limit(device));
    }
    if (pb.n * pb.p() * (s.qp / wgmma::chunk_elements(pb.type)) * pb.k > kMax)
      return "dy's rows exceed 2^31-1 chunks (the copy's work-items)";
    return {};
  }

  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    if (std::string why = wgmma::conv_poor_fit(pb); !why.empty()) return why;
    const Shape s = shape(pb, 1);
    // Every padded column is a multiply by zero: past half of them (Q=3 padded to 8) the copies and MMAs cost more
    // than twice the layer. Thin first layers are not a poor fit: on the H100 Fashion-MNIST's C=1 (25 filter rows)
    // took 2.0 ms against widened_fft_tc's 4.0 and cuDNN's 3.3.
    if (2 * pb.q() < s.qp)
      return fmt::format("output rows of {} padded to {}: most of the MMAs would multiply zeros", pb.q(), s.qp);
    return {};
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    const ConvProblem pb = problem.conv();
    const Shape s = shape(pb, 1);
    return wgmma::split_gemm_constraints(table(), s.m, s.reduction, pb.groups, pb.type,
                                         [pb](int64_t split) { return shape(pb, split).workspace(); });
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
    recipe.source.file = "tensor_core/implicit_gemm_shifted_wgmma.cu";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines["QP"] = std::to_string(s.qp);
    recipe.source.defines["WS_X"] = "0";
    recipe.source.defines["WS_DY"] = std::to_string(s.x_bytes);
    recipe.source.defines["WS_PARTIAL"] = std::to_string(s.x_bytes + s.dy_bytes);
    const bool nhwc = pb.layout == Layout::NHWC;
    if (nhwc) recipe.source.defines["LAYOUT_NHWC"] = "1";  // NCHW recipes keep their defines (and programs)
    wgmma::add_defines(table(), p, pb.type, recipe);
    recipe.workspace_bytes = s.workspace();

    constexpr int x = 0, w = 1, dy = 2;
    const int64_t chunk = wgmma::chunk_elements(pb.type);
    if (nhwc) {
      // One 32 x 8 work-group per 32 x 32 tile: (columns, channels) of each input row of each shift, and of each
      // output row.
      const auto tiled = [](std::string kernel, int operand, int64_t tiles) {
        LaunchStep step{std::move(kernel), {ArgSource::of_operand(operand), ArgSource::workspace()}, {}};
        step.geometry.dims = 2;
        step.geometry.local = {32, 8, 1};
        step.geometry.global = {static_cast<size_t>(tiles) * 32, 8, 1};
        return step;
      };
      const int64_t q_tiles = ceil_div(s.qp, 32);
      recipe.steps.push_back(tiled("wgs_shift_x", x, pb.s * pb.n * pb.h * ceil_div(pb.c, 32) * q_tiles));
      recipe.steps.push_back(tiled("wgs_dy_rows", dy, pb.n * pb.p() * ceil_div(pb.k, 32) * q_tiles));
    } else {
      recipe.steps.push_back(wgmma::elementwise_step("wgs_shift_x", {ArgSource::of_operand(x), ArgSource::workspace()},
                                                     s.x_elements / chunk));
      recipe.steps.push_back(wgmma::elementwise_step("wgs_dy_rows", {ArgSource::of_operand(dy), ArgSource::workspace()},
                                                     s.dy_elements / chunk));
    }
    LaunchStep main;
    main.kernel = "implicit_gemm_shifted_wgmma";
    main.geometry = wgmma::main_geometry(s.m, s.cols, pb.groups * p.split_k, p);
    main.args = {ArgSource::of_operand(w), ArgSource::workspace()};
    recipe.steps.push_back(std::move(main));
    if (p.split_k > 1) {
      recipe.steps.push_back(wgmma::elementwise_step("wgs_filter_reduce",
                                                     {ArgSource::workspace(), ArgSource::of_operand(w)}, pb.k * s.m));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_implicit_gemm_shifted_wgmma() {
  return std::make_unique<ImplicitGemmShiftedWgmmaFamily>();
}

}  // namespace convtune
