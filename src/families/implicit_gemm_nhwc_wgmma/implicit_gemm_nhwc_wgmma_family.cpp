// The implicit_gemm_nhwc_wgmma family: forward and backward-data convolutions as implicit GEMMs on Hopper's warpgroup
// MMA over a channels-last copy of the gathered tensor (kernels/tensor_core/implicit_gemm_nhwc_wgmma.cu), so both
// operands are copied by 16-byte cp.async like a plain GEMM's: implicit_gemm_wgmma gathers NCHW's scattered 2-byte
// elements through registers, which held its 3x3 and 5x5 layers at 100-240 TFLOP/s where its GEMM reaches 530-620.
// BF16/FP16 tensors and FP32 tensors in tf32 math, bias and ReLU fused forward. CUDA on compute capability 9.0.
// Channels-last problems need no copy where each group's channels fill whole 16-byte chunks: the gathered tensor is
// then read in place, and so are the forward filters.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/fused_epilogue.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

using wgmma::Params;

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t =
      wgmma::make_table({1}, "not split: forward and backward-data have N*P*Q or N*H*W rows of output tiles");
  return t;
}

using wgmma::aligned;
using wgmma::ceil_div;
using wgmma::round_up;

// The GEMM (rows M gathered, columns per group) and the workspace: the channels-last copy, then the filters' rows.
struct Shape {
  int64_t m = 0, cols = 0;
  bool direct_a = false;    // channels-last, whole chunks a group: the gathered tensor read in place (no copy)
  bool direct_b = false;    // channels-last forward, whole chunks a group: the filters read in place (no reorder)
  int64_t phases = 1;       // channels-last strided backward-data: one block layer per stride phase
  int64_t cp = 0;           // the gathered tensor's channels per group, padded to a whole 16-byte chunk
  int64_t copy_elements = 0;  // [n][pixel][group][cp]
  int64_t reduction = 0;    // R * S * cp
  uint64_t copy_bytes = 0, w_bytes = 0;
  uint64_t workspace() const { return copy_bytes + w_bytes; }
};

Shape shape(const ConvProblem& pb) {
  Shape s;
  const int64_t eb = wgmma::element_bytes(pb.type), chunk = wgmma::chunk_elements(pb.type);
  const bool forward = pb.direction == Direction::Forward;
  const int64_t gathered = forward ? pb.c_per_group() : pb.k_per_group();
  const int64_t pixels = forward ? pb.h * pb.w : pb.p() * pb.q();
  s.m = forward ? pb.n * pb.p() * pb.q() : pb.n * pb.h * pb.w;
  if (!forward && pb.layout == Layout::NHWC && (pb.stride.h > 1 || pb.stride.w > 1)) {
    s.phases = pb.stride.h * pb.stride.w;
    s.m = pb.n * ceil_div(pb.h, pb.stride.h) * ceil_div(pb.w, pb.stride.w);  // a phase's rows at most
  }
  s.cols = forward ? pb.k_per_group() : pb.c_per_group();
  s.cp = round_up(gathered, chunk);
  const bool nhwc = pb.layout == Layout::NHWC;
  s.direct_a = nhwc && gathered % chunk == 0;
  s.direct_b = nhwc && forward && pb.c_per_group() % chunk == 0;
  s.copy_elements = pb.n * pixels * pb.groups * s.cp;
  s.reduction = pb.r * pb.s * s.cp;
  s.copy_bytes = s.direct_a ? 0 : aligned(static_cast<uint64_t>(s.copy_elements * eb));
  s.w_bytes = s.direct_b ? 0 : aligned(static_cast<uint64_t>(pb.groups * s.cols * s.reduction * eb));
  return s;
}

class ImplicitGemmNhwcWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "implicit_gemm_nhwc_wgmma"; }
  std::string description() const override {
    return "implicit GEMM on Hopper's warpgroup MMA (wgmma, sm_90a) over a channels-last copy of the gathered tensor: "
           "both operands by 16-byte cp.async, a chunk one tap's channels; BF16/FP16 tensors and FP32 in tf32 math, "
           "forward (bias, residual and ReLU or ReLU6 fused) and backward-data";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }
  bool computes_nhwc() const override { return true; }
  bool fuses_residual() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    if (pb.direction == Direction::BackwardFilter)
      return "computes forward and backward-data; backward-filter is implicit_gemm_shifted_wgmma's and "
             "implicit_gemm_wgmma's";
    // Channels-last strided backward-data runs by phases (each product once). NCHW's stays with col2im_wgmma and
    // implicit_gemm_wgmma (by phases): masked here, a stride-s backward-data would spend (s*s-1)/(s*s) of its MMAs on
    // zeros (alex1's stride 4: 17 ms against 1.5 ms).
    if (pb.direction == Direction::BackwardData && pb.layout != Layout::NHWC && (pb.stride.h > 1 || pb.stride.w > 1))
      return fmt::format("NCHW strided backward-data (stride {}x{}) is col2im_wgmma's and implicit_gemm_wgmma's (by "
                         "phases); channels-last runs here by phases",
                         pb.stride.h, pb.stride.w);
    const Shape s = shape(pb);
    if (s.copy_elements > std::numeric_limits<int32_t>::max() ||
        pb.groups * s.cols * s.reduction > std::numeric_limits<int32_t>::max())
      return "the channels-last copy or the reordered filters exceed 2^31-1 elements (32-bit indexing)";
    if (s.workspace() > workspace_limit(device)) {
      return fmt::format("{} needs {} bytes of workspace (the channels-last copy and the reordered filters), over "
                         "the limit of {} bytes",
                         name(), s.workspace(), workspace_limit(device));
    }
    // One block row per 64 output pixels at the least (WG_M 1): beyond the grid's y axis no tile fits.
    if (ceil_div(s.m, 64) > wgmma::kMaxGridAxis)
      return fmt::format("{} output pixels exceed the grid limit of {} tiles of 64", s.m, wgmma::kMaxGridAxis);
    if (pb.groups * s.phases > wgmma::kMaxGridAxis)
      return fmt::format("groups x stride phases ({} x {}) exceed the grid limit", pb.groups, s.phases);
    const int64_t pixels = pb.direction == Direction::Forward ? pb.h * pb.w : pb.p() * pb.q();
    if (pb.n > wgmma::kMaxGridAxis || ceil_div(pixels, 32) > wgmma::kMaxGridAxis)
      return fmt::format("N={} or {} pixels exceed the grid limits of the channels-last copy", pb.n, pixels);
    return {};
  }

  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    if (std::string why = wgmma::conv_poor_fit(pb); !why.empty()) return why;
    // A first layer's few input channels padded to a whole chunk (alex1's 3 to 8: 0.56 ms against
    // implicit_gemm_wgmma's 0.20).
    const int64_t gathered = pb.direction == Direction::Forward ? pb.c_per_group() : pb.k_per_group();
    if (2 * gathered < shape(pb).cp)
      return fmt::format("{} channels per group padded to {}: most of the MMAs would multiply zeros", gathered,
                         shape(pb).cp);
    return {};
  }

  std::string untuned_claim(const Problem& generic, const DeviceInfo& device) const override {
    if (!unsupported_reason(generic, {}, device).empty() || shape(generic.conv()).phases == 1) return {};
    return "channels-last strided backward-data by phases, each product once (col2im_wgmma writes R*S columns per "
           "dy pixel and gathers them)";
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const ConvProblem pb = problem.conv();
    std::vector<Constraint> list = wgmma::tile_constraints(table());
    list.push_back(table().constraint("M-tiles within the CUDA grid limit", {&Params::wg_m},
                                      [pb](const Params& p, const X&) {
                                        return ceil_div(shape(pb).m, p.block_m()) <= wgmma::kMaxGridAxis;
                                      }));
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const Shape s = shape(pb);
    Params p = wgmma::default_tiles(s.m, s.cols);
    auto valid = [&](const Params& q) { return config_problem(*this, table().write(q), problem, device).empty(); };
    while (!valid(p) && p.stages > 3) --p.stages;
    return table().write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo&) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table().read(config);
    const Shape s = shape(pb);
    KernelRecipe recipe;
    recipe.source.file = "tensor_core/implicit_gemm_nhwc_wgmma.cu";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines.erase("N");  // an argument: a new batch size reuses the program
    recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
    recipe.source.defines["HAS_RELU"] = epilogue.relu ? "1" : "0";
    if (epilogue.residual) recipe.source.defines["HAS_RESIDUAL"] = "1";  // absent: the programs compiled before
    if (epilogue.relu && epilogue.relu_max > 0) {
      recipe.source.defines["HAS_RELU_MAX"] = "1";
      recipe.source.defines["RELU_MAX"] = families::relu_max_literal(epilogue);
    }
    recipe.source.defines["CP"] = std::to_string(s.cp);
    recipe.source.defines["WS_T"] = "0";
    recipe.source.defines["WS_W"] = std::to_string(s.copy_bytes);
    const bool nhwc = pb.layout == Layout::NHWC;
    if (nhwc) {  // NCHW recipes keep their defines as they were, and so their compiled programs
      recipe.source.defines["LAYOUT_NHWC"] = "1";
      recipe.source.defines["DIRECT_A"] = s.direct_a ? "1" : "0";
      recipe.source.defines["DIRECT_B"] = s.direct_b ? "1" : "0";
      if (s.phases > 1) recipe.source.defines["PHASED"] = "1";
    }
    wgmma::add_defines(table(), p, pb.type, recipe);
    recipe.workspace_bytes = s.workspace();

    constexpr int x = 0, w = 1, y = 2;
    const bool forward = pb.direction == Direction::Forward;
    // Forward gathers x (operand 0); backward-data dy (operand 2) and writes dx (operand 0).
    const int gathered = forward ? x : y;
    if (!s.direct_a) {
      LaunchStep copy{"wgn_to_channels_last", {ArgSource::of_operand(gathered), ArgSource::workspace()}, {}};
      copy.geometry.dims = 3;
      const int64_t pixels = forward ? pb.h * pb.w : pb.p() * pb.q();
      copy.geometry.global = {static_cast<size_t>(ceil_div(pb.groups * s.cp, 32) * 32),
                              static_cast<size_t>(ceil_div(pixels, 32) * 8), static_cast<size_t>(pb.n)};
      copy.geometry.local = {32, 8, 1};
      recipe.steps.push_back(std::move(copy));
    }
    if (!s.direct_b) {
      recipe.steps.push_back(wgmma::elementwise_step("wgn_weights", {ArgSource::of_operand(w), ArgSource::workspace()},
                                                     pb.groups * s.cols * s.reduction));
    }
    LaunchStep main;
    main.kernel = "implicit_gemm_nhwc_wgmma";
    main.geometry = wgmma::main_geometry(s.m, s.cols, pb.groups * s.phases, p);
    if (nhwc) {
      main.args = {ArgSource::of_operand(x), ArgSource::of_operand(w), ArgSource::of_operand(y), ArgSource::workspace()};
      if (forward && epilogue.bias) main.args.push_back(ArgSource::of_operand(kBiasOperand));
      if (forward && epilogue.residual) main.args.push_back(ArgSource::of_operand(kResidualOperand));
    } else if (forward) {
      main.args = {ArgSource::of_operand(x), ArgSource::of_operand(y), ArgSource::workspace()};
      if (epilogue.bias) main.args.push_back(ArgSource::of_operand(kBiasOperand));
      if (epilogue.residual) main.args.push_back(ArgSource::of_operand(kResidualOperand));
    } else {
      main.args = {ArgSource::of_operand(x), ArgSource::workspace()};
    }
    main.args.push_back(ArgSource::fixed(static_cast<int32_t>(pb.n)));
    recipe.steps.push_back(std::move(main));
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_implicit_gemm_nhwc_wgmma() {
  return std::make_unique<ImplicitGemmNhwcWgmmaFamily>();
}

}  // namespace convtune
