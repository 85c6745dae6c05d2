// depthwise_nhwc: channels-last depthwise convolutions (groups == C == K) in all three directions, FP32, BF16 and FP16
// tensors with FP32 arithmetic, on any device that compiles kernels (kernels/depthwise/depthwise_nhwc.cl): channel
// vectors of 16 bytes along the contiguous axis, so 16-bit layers need neither FP32 copies (widened_depthwise) nor
// NCHW ones (the channels-last wrapper) and every access is coalesced.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"
#include "src/families/parameter_table.h"

namespace convtune {

namespace {

struct Params {
  int64_t vec = 0;     // channels per work-item: one 16-byte access (4 FP32, 8 16-bit), or 1
  int64_t tile_q = 0;  // forward / backward-data: output columns per work-item
  int64_t split = 0;   // backward-filter: slices of the N x P output rows
  int64_t local = 0;   // work-group size
};

const ParameterTable<Params>& table() {
  using P = Params;
  static const ParameterTable<Params> t({
      {"VEC", &P::vec, {8, 4, 1}, "channels per work-item: a 16-byte access (4 FP32 or 8 16-bit elements), or 1"},
      {"TILE_Q", &P::tile_q, {4, 2, 1, 8}, "forward and backward-data: output columns per work-item"},
      {"SPLIT", &P::split, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048},
       "backward-filter: slices of the N x P output rows, FP32 partials summed in order by a second kernel"},
      {"LOCAL", &P::local, {128, 256, 64}, "work-items per work-group"},
  });
  return t;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t element_bytes(ElementType type) { return type == ElementType::F32 ? 4 : 2; }
// The channels one 16-byte access holds.
int64_t full_vector(ElementType type) { return 16 / element_bytes(type); }

// Work-items of the main launch.
int64_t work_items(const ConvProblem& pb, const Params& p) {
  if (pb.direction == Direction::BackwardFilter) return p.split * pb.r * (pb.c / p.vec);
  const int64_t rows = pb.direction == Direction::Forward ? pb.p() : pb.h;
  const int64_t cols = pb.direction == Direction::Forward ? pb.q() : pb.w;
  return pb.n * rows * ceil_div(cols, p.tile_q) * (pb.c / p.vec);
}

uint64_t partial_bytes(const ConvProblem& pb, int64_t split) {
  return pb.direction == Direction::BackwardFilter ? static_cast<uint64_t>(split * pb.c * pb.r * pb.s) * 4 : 0;
}

class DepthwiseNhwcFamily final : public KernelFamily {
 public:
  std::string name() const override { return "depthwise_nhwc"; }
  std::string description() const override {
    return "channels-last depthwise convolution (groups == C == K), every direction, FP32/BF16/FP16 tensors with FP32 "
           "arithmetic: 16-byte channel vectors a work-item, forward and backward-data over a few output columns, "
           "backward-filter in slices of the output rows summed in order";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool computes_nhwc() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!generic.is_conv()) return "computes convolutions, not matrix products";
    if (!device.can_run_kernels) return fmt::format("needs a device that compiles kernels: {}", device.cannot_run_reason);
    const ConvProblem& pb = generic.conv();
    if (pb.layout != Layout::NHWC) return "computes channels-last (NHWC) layers; NCHW ones are depthwise's";
    if (pb.groups != pb.c || pb.k != pb.c)
      return fmt::format("computes depthwise layers with one filter a channel (groups == C == K), not groups={}, C={}, "
                         "K={}",
                         pb.groups, pb.c, pb.k);
    if (epilogue.any()) return "no fused epilogue";
    if (pb.s > 16) return fmt::format("a filter {} columns wide: backward-filter keeps S x 8 sums a work-item", pb.s);
    for (int64_t elements : {pb.x_elements(), pb.w_elements(), pb.y_elements()}) {
      if (elements > kMaxTensorElements) return "a tensor exceeds 2^31-1 elements (32-bit indexing)";
    }
    if (device.max_work_group_size < 64) return "the device's work-groups hold fewer than 64 work-items";
    return {};
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const ConvProblem pb = problem.conv();
    const bool filter = pb.direction == Direction::BackwardFilter;
    return {
        table().constraint("VEC is one 16-byte access of the element type, or 1", {&Params::vec},
                           [pb](const Params& p, const X&) { return p.vec == 1 || p.vec == full_vector(pb.type); }),
        table().constraint("VEC divides C", {&Params::vec}, [pb](const Params& p, const X&) { return pb.c % p.vec == 0; }),
        // The parameter of the other directions stays at its first value, so each direction's space has only the
        // configurations that differ.
        table().constraint("TILE_Q only where it is used", {&Params::tile_q},
                           [filter](const Params& p, const X&) { return !filter || p.tile_q == 4; }),
        table().constraint("SPLIT only where it is used, at most the output rows", {&Params::split},
                           [filter, pb](const Params& p, const X&) {
                             return filter ? p.split <= pb.n * pb.p() : p.split == 1;
                           }),
        table().constraint("work-group within the device limit", {&Params::local},
                           [](const Params& p, const X& x) {
                             return static_cast<size_t>(p.local) <= x.device.max_work_group_size;
                           }),
        table().constraint("partial sums within the workspace limit", {&Params::split},
                           [pb](const Params& p, const X& x) {
                             return partial_bytes(pb, p.split) <= workspace_limit(x.device);
                           }),
        table().constraint("work-items within 2^31", {&Params::vec, &Params::tile_q, &Params::split},
                           [pb](const Params& p, const X&) {
                             return work_items(pb, p) < std::numeric_limits<int32_t>::max();
                           }),
    };
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    Params p;
    p.vec = pb.c % full_vector(pb.type) == 0 ? full_vector(pb.type) : 1;
    const int64_t columns = pb.direction == Direction::Forward ? pb.q() : pb.w;
    p.tile_q = pb.direction == Direction::BackwardFilter || columns >= 4 ? 4 : 1;
    p.local = 128;
    p.split = 1;
    if (pb.direction == Direction::BackwardFilter) {
      // Enough work-items to fill the device several times over, each with at least 8 output rows.
      const int64_t wanted = std::max<int64_t>(1, device.compute_units) * 2048;
      const int64_t rows = pb.n * pb.p();
      while (p.split < 2048 && p.split * 2 * pb.r * (pb.c / p.vec) <= wanted && rows / (p.split * 2) >= 8 &&
             partial_bytes(pb, p.split * 2) <= workspace_limit(device))
        p.split *= 2;
    }
    return table().write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo&) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table().read(config);
    KernelRecipe recipe;
    recipe.source.file = "depthwise/depthwise_nhwc.cl";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines["ELEM"] = pb.type == ElementType::F32 ? "0" : pb.type == ElementType::BF16 ? "1" : "2";
    recipe.source.defines["VEC"] = std::to_string(p.vec);
    recipe.source.defines["TILE_Q"] = std::to_string(p.tile_q);
    recipe.source.defines["SPLIT"] = std::to_string(p.split);
    const auto launch = [&](std::string kernel, std::vector<ArgSource> args, int64_t items) {
      LaunchStep step{std::move(kernel), std::move(args), {}};
      step.geometry.dims = 1;
      step.geometry.local = {static_cast<size_t>(p.local), 1, 1};
      step.geometry.global = {static_cast<size_t>(ceil_div(std::max<int64_t>(items, 1), p.local) * p.local), 1, 1};
      return step;
    };
    constexpr int x = 0, w = 1, y = 2;
    switch (pb.direction) {
      case Direction::Forward:
        recipe.steps.push_back(launch("depthwise_nhwc", {ArgSource::of_operand(x), ArgSource::of_operand(w),
                                                         ArgSource::of_operand(y)},
                                      work_items(pb, p)));
        break;
      case Direction::BackwardData:
        recipe.steps.push_back(launch("depthwise_nhwc", {ArgSource::of_operand(y), ArgSource::of_operand(w),
                                                         ArgSource::of_operand(x)},
                                      work_items(pb, p)));
        break;
      case Direction::BackwardFilter:
        recipe.workspace_bytes = partial_bytes(pb, p.split);
        recipe.steps.push_back(launch("depthwise_nhwc_filter", {ArgSource::of_operand(x), ArgSource::of_operand(y),
                                                                ArgSource::workspace()},
                                      work_items(pb, p)));
        recipe.steps.push_back(launch("dwn_filter_reduce", {ArgSource::workspace(), ArgSource::of_operand(w)},
                                      pb.c * pb.r * pb.s));
        break;
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_depthwise_nhwc() { return std::make_unique<DepthwiseNhwcFamily>(); }

}  // namespace convtune
