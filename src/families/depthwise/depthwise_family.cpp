// depthwise: convolutions with one input channel per group (groups == C, any channel multiplier K/groups) in all
// three directions, as memory-bound kernels rather than GEMM tiles; support here, each direction's parameters and
// launches in depthwise_spatial.cpp (forward, backward-data) and depthwise_filter.cpp (backward-filter).
#include <fmt/format.h>

#include <algorithm>

#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"

namespace convtune {

namespace {

class DepthwiseFamily final : public KernelFamily {
 public:
  std::string name() const override { return "depthwise"; }
  std::string description() const override {
    return "depthwise convolution (groups == C, any multiplier): forward and backward-data as register tiles of "
           "rows x columns per channel with the read window in local memory; backward-filter as a work-group per "
           "channel and chunk of N*P*Q, summed in a fixed order; fused bias/ReLU";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  // One input channel (groups = C = 1): backward-filter is then K x R x S sums over N x P x Q, this family's
  // per-channel reduction. Measured on the H200 against the untuned plan: Fashion-MNIST's conv1 (N=10000, 32
  // filters 5x5) 1.20 ms against implicit_gemm's tuned 1.60 and cuDNN's 1.39; three small C=1 layers 0.015-0.024 ms
  // against 0.043-0.081. FP32 math only: in tf32 implicit_gemm_tc took 0.54 ms on conv1.
  std::string untuned_claim(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& problem = generic.conv();
    if (problem.math != MathMode::FP32 && problem.math != MathMode::FP32Fast) return {};
    if (problem.direction != Direction::BackwardFilter || problem.c != 1 || problem.groups != 1) return {};
    return fmt::format("backward-filter with one input channel: {} x {} x {} sums over N x P x Q, a per-channel "
                       "reduction",
                       problem.k, problem.r, problem.s);
  }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = fp32_kernel_conv_reason(name(), generic, device); !why.empty()) return why;
    const ConvProblem& problem = generic.conv();
    if (!depthwise::one_channel_per_group(problem)) {
      return fmt::format("computes depthwise layers (groups == C), not groups={} with C={}", problem.groups, problem.c);
    }
    if (epilogue.pool > 1) return "a fused max-pool is not implemented (bias and ReLU are)";
    if (epilogue.any() && problem.direction != Direction::Forward) return "epilogues apply to the forward direction only";
    for (int64_t elements : {problem.x_elements(), problem.w_elements(), problem.y_elements()}) {
      if (elements > kMaxTensorElements) return "a tensor exceeds 2^31-1 elements (32-bit indexing)";
    }
    if (device.max_work_group_size < 1) return "the device reports no work-group size";
    return {};
  }

  // One input channel in all (C = groups = 1) is an ordinary convolution with K filters, which the GEMM-shaped
  // families tile well forward and backward-data; backward-filter is this family's (untuned_claim).
  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& problem = generic.conv();
    if (problem.groups == 1 && untuned_claim(generic, device).empty())
      return "a single-channel layer is an ordinary convolution (K/groups rows to tile)";
    if (depthwise::direct_tiled_backward_data(problem, device))
      return fmt::format("on a GPU, direct_tiled computes stride-1 depthwise backward-data on {} columns faster",
                         problem.w);
    return {};
  }

  std::vector<Parameter> parameters(const Problem& problem) const override { return variant(problem)->parameters(); }
  std::vector<Constraint> constraints(const Problem& problem) const override { return variant(problem)->constraints(); }
  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    return variant(problem)->default_config(device);
  }
  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    return variant(problem)->recipe(epilogue, config, device);
  }

  // Backward-filter's SPLIT decomposes the reduction: a tuned shape's split is recomputed for the new shape (as
  // implicit_gemm's split-K is), the kernel's shape (THREADS, TILE_Q) kept.
  Config carry_config(const Config& tuned, const Problem& /*tuned_problem*/, const Problem& problem,
                      const DeviceInfo& device) const override {
    if (problem.conv().direction != Direction::BackwardFilter) return tuned;
    for (const Parameter& p : parameters(problem))
      if (!tuned.count(p.name)) return tuned;  // not this direction's parameters: fit_config repairs it
    return depthwise::carry_filter_split(tuned, problem.conv(), device);
  }

 private:
  static std::unique_ptr<depthwise::DepthwiseVariant> variant(const Problem& generic) {
    const ConvProblem& problem = generic.conv();
    return problem.direction == Direction::BackwardFilter ? depthwise::make_filter(problem)
                                                          : depthwise::make_spatial(problem);
  }
};

}  // namespace

namespace depthwise {

bool satisfies(const std::vector<Parameter>& parameters, const std::vector<Constraint>& constraints,
               const Config& config, const ConvProblem& problem, const DeviceInfo& device) {
  for (const Parameter& p : parameters) {
    const auto it = config.find(p.name);
    if (it == config.end() || std::find(p.values.begin(), p.values.end(), it->second) == p.values.end()) return false;
  }
  const Problem generic(problem);
  const ConstraintContext context{config, generic, device};
  return std::all_of(constraints.begin(), constraints.end(), [&](const Constraint& c) { return c.holds(context); });
}

}  // namespace depthwise

std::unique_ptr<KernelFamily> families::make_depthwise() { return std::make_unique<DepthwiseFamily>(); }

}  // namespace convtune
