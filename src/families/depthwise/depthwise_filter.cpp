// The depthwise family's backward-filter: a work-group of THREADS work-items per (output channel, chunk of the
// N*P*Q reduction), every filter tap accumulated in registers over row segments of TILE_Q positions, reduced in
// local memory; SPLIT chunks per channel write partial filters to the workspace, summed in order by a second launch.
#include <fmt/format.h>

#include <algorithm>

#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/direct_tiled/direct_tiled_variant.h"
#include "src/families/parameter_table.h"

namespace convtune::depthwise {

namespace {

using direct_tiled::ceil_div;
using direct_tiled::local_memory_limit;
using direct_tiled::pow2_ceil;
using direct_tiled::within;

// The kernel accumulates at most this many taps per pass over its chunk (larger filters take several passes).
constexpr int64_t kMaxTapsPerPass = 64;

struct FilterParams {
  int64_t threads = 0, tile_q = 0, split = 0;
};

const ParameterTable<FilterParams>& table() {
  using P = FilterParams;
  static const ParameterTable<P> t({
      {"THREADS", &P::threads, {32, 64, 128, 256, 512}, "work-items per work-group (one channel's chunk)"},
      {"TILE_Q", &P::tile_q, {1, 2, 4, 8}, "consecutive output positions of a row per work-item step"},
      {"SPLIT", &P::split, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
       "chunks of each channel's N*P*Q reduction (partial filters in the workspace, summed in order)"},
  });
  return t;
}

class Filter final : public DepthwiseVariant {
 public:
  explicit Filter(const ConvProblem& problem) : pb_(problem) {}

  std::vector<Parameter> parameters() const override { return table().parameters(); }

  std::vector<Constraint> constraints() const override {
    using P = FilterParams;
    using X = ConstraintContext;
    const ParameterTable<P>& t = table();
    const ConvProblem pb = pb_;
    const int64_t taps = taps_per_pass(pb), dw = pb.w_elements();
    return {
        t.constraint("threads per work-group within the device limit", {&P::threads},
                     [](const P& p, const X& x) { return static_cast<size_t>(p.threads) <= x.device.max_work_group_size; }),
        within(t, "row segment within the output row", {&P::tile_q}, pb.q()),
        t.constraint("local memory of the work-group's reduction within the device limit and 48 KiB", {&P::threads},
                     [taps](const P& p, const X& x) {
                       return taps * p.threads * static_cast<int64_t>(sizeof(float)) <= local_memory_limit(x.device);
                     }),
        // Chunks shorter than the work-group are allowed (they idle work-items, but small layers still get SPLIT
        // > 1 and its second launch checked); more chunks than row segments would only add empty ones.
        t.constraint("at most one chunk per row segment of the reduction", {&P::tile_q, &P::split},
                     [pb](const P& p, const X&) { return p.split <= segments(pb, p); }),
        t.constraint("split partials within the workspace limit", {&P::split}, [dw](const P& p, const X& x) {
          return p.split == 1 || (p.split * dw <= kMaxTensorElements &&
                                  static_cast<uint64_t>(p.split * dw) * sizeof(float) <= workspace_limit(x.device));
        }),
    };
  }

  // 256 work-items and segments of 4 positions on GPUs; 64 and 8 on CPUs (PoCL: fewer barrier-split loops, 2.2x
  // faster on a 28x28 layer than 64 and 4); the reduction split until the launch has about four work-groups per
  // compute unit.
  Config default_config(const DeviceInfo& device) const override {
    FilterParams c;
    c.threads = device.is_gpu ? 256 : 64;
    c.tile_q = device.is_gpu ? 4 : 8;
    if (device.is_gpu) {
      // Tuned on the H200 over seven MobileNet-style layers: about one work-item per 48 reduction elements of a
      // channel (64 at 7x7, 128 at 14x14, 512 from 28x28 up, the split taking the rest), two output columns per step
      // at stride 1 and one at stride 2; 256 and 4 ran 1.1-1.8x longer on the larger and strided layers.
      const int64_t reduction = pb_.n * pb_.p() * pb_.q();
      c.threads = 64;
      while (c.threads < 512 && c.threads * 2 * 48 <= reduction) c.threads *= 2;
      c.tile_q = pb_.stride.w > 1 ? 1 : 2;
    }
    while (c.tile_q > 1 && c.tile_q > pow2_ceil(pb_.q())) c.tile_q /= 2;
    while (c.threads > 32 && (static_cast<size_t>(c.threads) > device.max_work_group_size ||
                              taps_per_pass(pb_) * c.threads * static_cast<int64_t>(sizeof(float)) >
                                  local_memory_limit(device))) {
      c.threads /= 2;
    }
    c.split = 1;
    c.split = fitted_split(c, device);
    const Config config = table().write(c);
    if (satisfies(parameters(), constraints(), config, pb_, device)) return config;
    return table().write(FilterParams{32, 1, 1});
  }

  // The largest power-of-two split that keeps the work-groups within 4 per compute unit and the constraints allow.
  // Tuned on the H200 (seven layers), the best splits gave 240-1024 work-groups; the smallest split reaching 4 per
  // unit is twice the tuned split on four of them.
  int64_t fitted_split(FilterParams p, const DeviceInfo& device) const {
    const int64_t target = 4 * std::max(1, device.compute_units);
    const auto parameter_list = parameters();
    const auto constraint_list = constraints();
    p.split = 1;
    while (pb_.k * p.split * 2 <= target && p.split < 512) {
      FilterParams doubled = p;
      doubled.split *= 2;
      if (!satisfies(parameter_list, constraint_list, table().write(doubled), pb_, device)) break;
      p = doubled;
    }
    return p.split;
  }

  KernelRecipe recipe(const Epilogue&, const Config& config, const DeviceInfo& device) const override {
    const FilterParams p = table().read(config);
    KernelRecipe recipe;
    recipe.source = {"depthwise/backward_filter.cl", problem_defines(pb_), {}};
    table().add_defines(p, recipe.source.defines);
    constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
    LaunchStep reduce;
    reduce.kernel = "depthwise_backward_filter";
    reduce.args = {ArgSource::of_operand(x), ArgSource::of_operand(y),
                   p.split > 1 ? ArgSource::workspace() : ArgSource::of_operand(w)};
    reduce.geometry.dims = 1;
    reduce.geometry.local = {static_cast<size_t>(p.threads), 1, 1};
    reduce.geometry.global = {static_cast<size_t>(pb_.k * p.split * p.threads), 1, 1};
    recipe.steps.push_back(std::move(reduce));
    if (p.split > 1) {
      recipe.workspace_bytes = static_cast<size_t>(p.split * pb_.w_elements()) * sizeof(float);
      recipe.steps.push_back(families::split_sum_step("depthwise_sum_splits", w, pb_.w_elements(), device));
    }
    return recipe;
  }

 private:
  // The kernel's TAPS_PER_PASS: whole filter rows, at most kMaxTapsPerPass taps (one row when a row is longer).
  static int64_t taps_per_pass(const ConvProblem& pb) {
    const int64_t rows = pb.s >= kMaxTapsPerPass ? 1 : std::min(pb.r, kMaxTapsPerPass / pb.s);
    return rows * pb.s;
  }
  // The kernel's SEGMENTS: (n, p, row segment of TILE_Q positions) units of the reduction.
  static int64_t segments(const ConvProblem& pb, const FilterParams& p) {
    return pb.n * pb.p() * ceil_div(pb.q(), p.tile_q);
  }

  ConvProblem pb_;
};

}  // namespace

std::unique_ptr<DepthwiseVariant> make_filter(const ConvProblem& problem) { return std::make_unique<Filter>(problem); }

Config carry_filter_split(const Config& tuned, const ConvProblem& problem, const DeviceInfo& device) {
  const Filter filter(problem);
  FilterParams p = table().read(tuned);
  p.split = filter.fitted_split(p, device);
  return table().write(p);
}

}  // namespace convtune::depthwise
