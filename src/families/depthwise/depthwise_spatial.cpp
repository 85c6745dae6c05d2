// The depthwise family's forward and backward-data: each work-item a TILE_H x TILE_W tile of the written tensor (y
// or dx) in one channel (forward: TILE_M output channels of one input channel), THREADS_C channels per work-group,
// the read window staged in local memory with USE_LOCAL.
#include <fmt/format.h>

#include <algorithm>

#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/direct_tiled/direct_tiled_variant.h"
#include "src/families/parameter_table.h"

namespace convtune::depthwise {

namespace {

using direct_tiled::ceil_div;
using direct_tiled::fit_extent;
using direct_tiled::kMaxRegisterTile;
using direct_tiled::local_memory_limit;
using direct_tiled::pow2_ceil;
using direct_tiled::within;

struct SpatialParams {
  int64_t tile_m = 0, tile_h = 0, tile_w = 0;           // tile_m: forward only (1 in backward-data)
  int64_t threads_w = 0, threads_h = 0, threads_c = 0;  // local axes 0, 1, 2
  int64_t use_local = 0;
};

ParameterTable<SpatialParams> make_table(bool forward) {
  using P = SpatialParams;
  const std::string written = forward ? "y" : "dx";
  std::vector<ParameterTable<P>::Field> fields = {
      {"TILE_H", &P::tile_h, {1, 2, 4, 8}, fmt::format("{} rows per work-item", written)},
      {"TILE_W", &P::tile_w, {1, 2, 4, 8}, fmt::format("{} columns per work-item", written)},
      {"THREADS_W", &P::threads_w, {1, 2, 4, 8, 16, 32, 64}, "work-group extent along columns (local axis 0)"},
      {"THREADS_H", &P::threads_h, {1, 2, 4, 8, 16}, "work-group extent along rows (local axis 1)"},
      {"THREADS_C", &P::threads_c, {1, 2, 4, 8, 16, 32, 64},
       "work-group extent along channels (local axis 2): small images fill a work-group with several channels"},
      {"USE_LOCAL", &P::use_local, {1, 0},
       fmt::format("1: stage the work-group's {} window in local memory; 0: read it through the caches",
                   forward ? "x" : "dy")},
  };
  if (forward) {
    fields.insert(fields.begin(), {"TILE_M", &P::tile_m, {1, 2, 4},
                                   "output channels per work-item, all reading the same input channel"});
  }
  return ParameterTable<P>(std::move(fields));
}

class Spatial final : public DepthwiseVariant {
 public:
  explicit Spatial(const ConvProblem& problem)
      : pb_(problem), forward_(problem.direction == Direction::Forward), table_(make_table(forward_)),
        rows_(forward_ ? problem.p() : problem.h), cols_(forward_ ? problem.q() : problem.w) {}

  std::vector<Parameter> parameters() const override { return table_.parameters(); }

  std::vector<Constraint> constraints() const override {
    using P = SpatialParams;
    using X = ConstraintContext;
    const ParameterTable<P>& t = table_;
    // Backward-data's table has no TILE_M (its tile_m stays 0 here): one channel per work-item.
    const auto register_tile = forward_ ? std::vector<int64_t P::*>{&P::tile_m, &P::tile_h, &P::tile_w}
                                        : std::vector<int64_t P::*>{&P::tile_h, &P::tile_w};
    std::vector<Constraint> list = {
        t.constraint(fmt::format("register tile of at most {} outputs per work-item", kMaxRegisterTile), register_tile,
                     [](const P& p, const X&) {
                       return std::max<int64_t>(p.tile_m, 1) * p.tile_h * p.tile_w <= kMaxRegisterTile;
                     }),
        within(t, "row tile within the rows", {&P::tile_h}, rows_),
        within(t, "column tile within the columns", {&P::tile_w}, cols_),
        within(t, "work-group's rows within the rows", {&P::tile_h, &P::threads_h}, rows_),
        within(t, "work-group's columns within the columns", {&P::tile_w, &P::threads_w}, cols_),
        t.constraint("threads per work-group within the device limit", {&P::threads_w, &P::threads_h, &P::threads_c},
                     [](const P& p, const X& x) {
                       return static_cast<size_t>(p.threads_w * p.threads_h * p.threads_c) <= x.device.max_work_group_size;
                     }),
        t.constraint("local memory within the device limit and 48 KiB (CUDA static shared memory)",
                     {&P::tile_h, &P::tile_w, &P::threads_w, &P::threads_h, &P::threads_c, &P::use_local},
                     [pb = pb_, forward = forward_](const P& p, const X& x) {
                       return window_bytes(pb, forward, p) <= local_memory_limit(x.device);
                     }),
    };
    if (forward_) {
      const int64_t multiplier = pb_.k_per_group(), channels = pb_.c;
      list.push_back(within(t, "TILE_M within the channel multiplier", {&P::tile_m}, multiplier));
      list.push_back(t.constraint("work-group's channel units within the channels x multiplier blocks",
                                  {&P::tile_m, &P::threads_c}, [channels, multiplier](const P& p, const X&) {
                                    return p.threads_c <= pow2_ceil(channels * ceil_div(multiplier, p.tile_m));
                                  }));
    } else {
      list.push_back(within(t, "work-group's channels within the channels", {&P::threads_c}, pb_.c));
    }
    return list;
  }

  // GPUs: 2 x 4 outputs per work-item, 16 x 4 work-items (64 x 8 outputs), the window in local memory (it saves
  // the caches the filter halo's re-reads). CPUs (PoCL, which vectorises across work-items along local axis 0): one
  // column per work-item, 32 along a row, no local memory (only a copy there): on a 28x28 layer (N=4, C=64) 3.8x
  // (forward) and 4x (backward-data) faster than the GPU shape. Fitted to the image; small images fill the
  // work-group (up to 128 work-items) with channels. The all-ones configuration when nothing fits.
  Config default_config(const DeviceInfo& device) const override {
    SpatialParams c;
    bool grow_channels = true;  // small images fill the work-group with channels, unless measured otherwise
    c.tile_m = forward_ && pb_.k_per_group() % 2 == 0 ? 2 : 1;
    c.tile_h = 2, c.tile_w = device.is_gpu ? 4 : 1, c.threads_w = device.is_gpu ? 16 : 32, c.threads_h = 4;
    c.threads_c = 1;
    c.use_local = device.is_gpu ? 1 : 0;
    if (device.is_gpu && forward_) {
      // Tuned on the H200 over seven MobileNet-style layers: forward ran best with one output column per work-item,
      // 32 along a row, no local staging and one output channel each (coalesced reads straight from the input; the
      // caches serve the halo), two rows (stride 2) or four (stride 1) per work-item. The 4-column local-memory shape
      // above, still backward-data's best, took 1.3-1.7x longer forward on the stride-2 layers.
      c.tile_m = 1, c.tile_w = 1, c.threads_w = 32, c.threads_h = 1, c.use_local = 0;
      c.tile_h = pb_.stride.h > 1 ? 2 : 4;
      // Wider filters at stride 1 reuse each loaded input across more outputs of a row: the 5x5 layer ran best with
      // 8 columns and one row per work-item (0.014 ms against 0.024 with the shape above).
      if (pb_.s >= 5 && pb_.stride.w == 1) c.tile_w = 8, c.tile_h = 1, c.threads_h = 16;
    } else if (device.is_gpu && rows_ >= 56) {
      // Backward-data into large images: the 112x112 layers (both strides) ran best with four rows per work-item and
      // 32 work-items along a row (local staging kept): 0.045 against 0.059 ms with the shape above. On 7x7 to
      // 28x28 images that shape lost (0.022 against 0.013 ms at 7x7), so they keep the one above.
      c.tile_h = 4, c.threads_w = 32, c.threads_h = 2;
    } else if (device.is_gpu && cols_ > 8 && cols_ <= 16) {
      // Backward-data into 9-16 columns: 8 rows x 2 columns per work-item, 8 x 2 work-items on 2 channels (32).
      // On the H200 (two sweeps) 14x14 layers took 0.0191 ms (3x3, C=512)
      // and 0.0161 (5x5, C=240) against 0.0231 and 0.0177 with the shape above and 0.0200-0.0211 and 0.0170-0.0190
      // with 2 x 2 outputs; on 28x28 and 112x112 the taller tile lost.
      c.tile_h = 8, c.tile_w = 2, c.threads_w = 8, c.threads_h = 2, c.threads_c = 2;
      grow_channels = false;
    } else if (device.is_gpu && cols_ <= 8) {
      // Backward-data into 8 columns or fewer: the window straight from the caches, 0.0120 ms against 0.0150 staged
      // on the 7x7 C=1024 layer (H200): a work-group's window there is mostly halo.
      c.use_local = 0;
    }
    fit_extent(c.tile_w, c.threads_w, cols_);
    fit_extent(c.tile_h, c.threads_h, rows_);
    const int64_t units = forward_ ? pb_.c * ceil_div(pb_.k_per_group(), c.tile_m) : pb_.c;
    while (grow_channels && c.threads_w * c.threads_h * c.threads_c < 128 && c.threads_c < 64 &&
           c.threads_c * 2 <= pow2_ceil(units))
      c.threads_c *= 2;
    while (static_cast<size_t>(c.threads_w * c.threads_h * c.threads_c) > device.max_work_group_size) {
      int64_t* largest = &c.threads_c;
      for (int64_t* t : {&c.threads_h, &c.threads_w})
        if (*t > *largest) largest = t;
      *largest /= 2;
    }
    if (window_bytes(pb_, forward_, c) > local_memory_limit(device)) c.use_local = 0;
    const auto parameter_list = parameters();
    const auto constraint_list = constraints();
    if (satisfies(parameter_list, constraint_list, table_.write(c), pb_, device)) return table_.write(c);
    SpatialParams ones{1, 1, 1, 1, 1, 1, 0};
    return table_.write(ones);
  }

  KernelRecipe recipe(const Epilogue& epilogue, const Config& config, const DeviceInfo&) const override {
    SpatialParams p = table_.read(config);
    if (!forward_) p.tile_m = 1;
    KernelRecipe recipe;
    recipe.source = {forward_ ? "depthwise/forward.cl" : "depthwise/backward_data.cl", problem_defines(pb_), {}};
    table_.add_defines(p, recipe.source.defines);
    if (forward_) {
      recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
      recipe.source.defines["APPLY_RELU"] = epilogue.relu ? "1" : "0";
    }
    const int64_t units = forward_ ? pb_.c * ceil_div(pb_.k_per_group(), p.tile_m) : pb_.c;
    // One flat grid axis (the kernels decompose it): CUDA's axis 0 takes 2^31-1 blocks, more than any tensor of
    // 2^31-1 elements needs.
    const int64_t blocks = pb_.n * ceil_div(units, p.threads_c) * ceil_div(rows_, p.tile_h * p.threads_h) *
                           ceil_div(cols_, p.tile_w * p.threads_w);
    constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
    LaunchStep step;
    step.kernel = forward_ ? "depthwise_forward" : "depthwise_backward_data";
    step.args = forward_ ? std::vector<ArgSource>{ArgSource::of_operand(x), ArgSource::of_operand(w), ArgSource::of_operand(y)}
                         : std::vector<ArgSource>{ArgSource::of_operand(y), ArgSource::of_operand(w), ArgSource::of_operand(x)};
    if (epilogue.bias) step.args.push_back(ArgSource::of_operand(kBiasOperand));
    step.geometry.dims = 3;
    step.geometry.local = {static_cast<size_t>(p.threads_w), static_cast<size_t>(p.threads_h),
                           static_cast<size_t>(p.threads_c)};
    step.geometry.global = {static_cast<size_t>(blocks) * step.geometry.local[0], step.geometry.local[1],
                            step.geometry.local[2]};
    recipe.steps.push_back(std::move(step));
    return recipe;
  }

 private:
  // Bytes of the staged windows (the kernels' IN_TILE_H x IN_TILE_W, DY_TILE_H x DY_TILE_W per channel).
  static int64_t window_bytes(const ConvProblem& pb, bool forward, const SpatialParams& p) {
    if (p.use_local == 0) return 0;
    const int64_t block_h = p.tile_h * p.threads_h, block_w = p.tile_w * p.threads_w;
    int64_t rows = 0, cols = 0;
    if (forward) {
      rows = (block_h - 1) * pb.stride.h + (pb.r - 1) * pb.dilation.h + 1;
      cols = (block_w - 1) * pb.stride.w + (pb.s - 1) * pb.dilation.w + 1;
    } else {
      rows = ceil_div(block_h + (pb.r - 1) * pb.dilation.h, pb.stride.h);
      cols = ceil_div(block_w + (pb.s - 1) * pb.dilation.w, pb.stride.w);
    }
    return p.threads_c * rows * cols * static_cast<int64_t>(sizeof(float));
  }

  ConvProblem pb_;
  bool forward_;
  ParameterTable<SpatialParams> table_;
  int64_t rows_, cols_;  // of the written tensor
};

}  // namespace

std::unique_ptr<DepthwiseVariant> make_spatial(const ConvProblem& problem) { return std::make_unique<Spatial>(problem); }

}  // namespace convtune::depthwise
