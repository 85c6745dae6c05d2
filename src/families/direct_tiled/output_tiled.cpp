// The output-tiled half of direct_tiled: forward (tiles of y over k, p, q) and backward-data (tiles of dx over
// c, h, w), one kernel each with the same parameters under the written tensor's axis names.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "src/families/direct_tiled/direct_tiled_variant.h"

namespace convtune::direct_tiled {

namespace {

// Axis names and extents of the written tensor, and of the tensor staged in local memory.
struct Axes {
  std::string channel, rows, cols, reduced;  // forward: K, P, Q, C; backward-data: C, H, W, K
  int64_t channels = 0;                      // written channels per group
  int64_t row_extent = 0, col_extent = 0;    // of the written tensor (before pooling)
  int64_t reduced_channels = 0;              // channels per group summed over
  int64_t staged_row_length = 0;             // W (x staged) or Q (dy staged)
};

class OutputTiled final : public DirectTiledVariant {
 public:
  explicit OutputTiled(const ConvProblem& problem) : pb_(problem), forward_(problem.direction == Direction::Forward) {
    if (forward_) {
      axes_ = {"K", "P", "Q", "C", pb_.k_per_group(), pb_.p(), pb_.q(), pb_.c_per_group(), pb_.w};
    } else {
      axes_ = {"C", "H", "W", "K", pb_.c_per_group(), pb_.h, pb_.w, pb_.k_per_group(), pb_.q()};
    }
    tile_c_ = "TILE_" + axes_.channel;
    tile_r_ = "TILE_" + axes_.rows;
    tile_q_ = "TILE_" + axes_.cols;
    threads_c_ = "THREADS_" + axes_.channel;
    threads_r_ = "THREADS_" + axes_.rows;
    threads_q_ = "THREADS_" + axes_.cols;
    chunk_ = "CHUNK_" + axes_.reduced;
  }

  std::vector<Parameter> parameters() const override {
    const std::string written = forward_ ? "y" : "dx";
    const std::string staged = forward_ ? "x" : "dy";
    return {
        {tile_c_, {1, 2, 4, 8}, fmt::format("{} channels per work-item", written)},
        {tile_r_, {1, 2, 4, 8}, fmt::format("{} rows per work-item (pooled rows when the epilogue pools)", written)},
        {tile_q_, {1, 2, 4, 8}, fmt::format("{} columns per work-item (pooled when the epilogue pools)", written)},
        {threads_c_, {1, 2, 4, 8, 16, 32, 64}, "work-group extent along channels (local axis 2)"},
        {threads_r_, {1, 2, 4, 8, 16}, "work-group extent along rows (local axis 1)"},
        {threads_q_, {1, 2, 4, 8, 16, 32}, "work-group extent along columns (local axis 0)"},
        {"USE_LOCAL", {1, 0}, fmt::format("1: stage the work-group's {} tile + filter halo in local memory", staged)},
        {chunk_, {1, 2, 4, 8, 16}, fmt::format("{} channels staged per local-memory fill", staged)},
        {"VECTOR_WIDTH", {1, 2, 4}, "floats per global load/store along columns where the row length allows"},
        {"UNROLL", {2, 1, 0}, "filter loops unrolled: 2 both r and s, 1 the inner loop over s, 0 none"},
    };
  }

  std::vector<Constraint> constraints() const override {
    const Axes a = axes_;
    const std::string tc = tile_c_, tr = tile_r_, tq = tile_q_, hc = threads_c_, hr = threads_r_, hq = threads_q_,
                      ch = chunk_;
    // A tile or work-group wider than the extent rounded up to a power of two only adds idle work-items.
    auto within = [](const std::string& name, std::vector<std::string> uses, int64_t extent) {
      return Constraint{name, uses, [uses, limit = pow2_ceil(extent)](const ConstraintContext& c) {
                          int64_t product = 1;
                          for (const auto& u : uses) product *= c.config.at(u);
                          return product <= limit;
                        }};
    };
    return {
        {fmt::format("register tile of at most {} outputs per work-item", kMaxRegisterTile), {tc, tr, tq},
         [=](const ConstraintContext& c) {
           return c.config.at(tc) * c.config.at(tr) * c.config.at(tq) <= kMaxRegisterTile;
         }},
        within("channel tile within the group's channels", {tc}, a.channels),
        within("row tile within the rows", {tr}, a.row_extent),
        within("column tile within the columns", {tq}, a.col_extent),
        within("work-group's channels within the group's channels", {tc, hc}, a.channels),
        within("work-group's rows within the rows", {tr, hr}, a.row_extent),
        within("work-group's columns within the columns", {tq, hq}, a.col_extent),
        {"threads per work-group within the device limit", {hc, hr, hq},
         [=](const ConstraintContext& c) {
           return static_cast<size_t>(c.config.at(hc) * c.config.at(hr) * c.config.at(hq)) <=
                  c.device.max_work_group_size;
         }},
        {fmt::format("{} is 1 without local memory", ch), {"USE_LOCAL", ch},
         [=](const ConstraintContext& c) { return c.config.at("USE_LOCAL") == 1 || c.config.at(ch) == 1; }},
        within(fmt::format("{} within the group's {} channels", ch, a.reduced), {ch}, a.reduced_channels),
        {"local memory within the device limit and 48 KiB (CUDA static shared memory)",
         {tc, tr, tq, hc, hr, hq, "USE_LOCAL", ch, "VECTOR_WIDTH"},
         [self = std::make_shared<OutputTiled>(*this)](const ConstraintContext& c) {
           return static_cast<int64_t>(self->local_memory_bytes(c.config)) <= local_memory_limit(c.device);
         }},
        {"vector width divides a row the kernel loads (staged with local memory) or stores", {tq, "USE_LOCAL",
                                                                                               "VECTOR_WIDTH"},
         [=](const ConstraintContext& c) {
           const int64_t v = c.config.at("VECTOR_WIDTH");
           const bool loads = c.config.at("USE_LOCAL") == 1 && a.staged_row_length % v == 0;
           const bool stores = a.col_extent % v == 0 && c.config.at(tq) % v == 0;
           return v == 1 || loads || stores;
         }},
    };
  }

  // Seed 000's best on NVIDIA (1 x 2 x 8 per work-item, 16 x 2 x 2 work-items, local memory on), fitted to the
  // problem's extents and the device's limits; the all-ones configuration when nothing else fits.
  Config default_config(const DeviceInfo& device) const override {
    Config c{{tile_c_, 1}, {tile_r_, 2}, {tile_q_, 8}, {threads_c_, 16}, {threads_r_, 2}, {threads_q_, 2},
             {"USE_LOCAL", 1}, {chunk_, std::min<int64_t>(4, pow2_ceil(axes_.reduced_channels))},
             {"VECTOR_WIDTH", 1}, {"UNROLL", pb_.r * pb_.s <= 25 ? 2 : 1}};
    fit_extent(c, tile_c_, threads_c_, axes_.channels);
    fit_extent(c, tile_r_, threads_r_, axes_.row_extent);
    fit_extent(c, tile_q_, threads_q_, axes_.col_extent);
    // Work-items freed by a narrow axis (depthwise has one channel per group) go to the spatial axes.
    for (const auto& [threads, extent, tile, most] : {std::tuple{threads_q_, axes_.col_extent, tile_q_, 32},
                                                        std::tuple{threads_r_, axes_.row_extent, tile_r_, 16}}) {
      while (c[threads_c_] * c[threads_r_] * c[threads_q_] < 64 && c[threads] < most &&
             c[tile] * c[threads] * 2 <= pow2_ceil(extent)) {
        c[threads] *= 2;
      }
    }
    while (static_cast<size_t>(c[threads_c_] * c[threads_r_] * c[threads_q_]) > device.max_work_group_size) {
      const std::string* largest = &threads_c_;
      for (const std::string* t : {&threads_r_, &threads_q_})
        if (c[*t] > c[*largest]) largest = t;
      c[*largest] /= 2;
    }
    while (c[chunk_] > 1 && static_cast<int64_t>(local_memory_bytes(c)) > local_memory_limit(device)) c[chunk_] /= 2;
    if (static_cast<int64_t>(local_memory_bytes(c)) > local_memory_limit(device)) {
      c["USE_LOCAL"] = 0;
      c[chunk_] = 1;
    }
    return first_valid(default_candidates(c, {}), parameters(), constraints(), pb_, device);
  }

  // Forward problems may be run with a 2x2 max-pool, which doubles the pre-pool tile behind each output; the
  // constraints cannot see the epilogue, so this is the larger of the two (an upper bound for every epilogue).
  size_t local_memory_bytes(const Config& config) const override {
    int64_t bytes = staged_bytes(config, 1);
    if (forward_ && pb_.p() >= 2 && pb_.q() >= 2) bytes = std::max(bytes, staged_bytes(config, 2));
    return static_cast<size_t>(bytes);
  }

  KernelRecipe recipe(const Epilogue& epilogue, const Config& config, const DeviceInfo&) const override {
    KernelRecipe recipe;
    const std::string file = forward_ ? "direct_tiled/forward.cl" : "direct_tiled/backward_data.cl";
    recipe.source = {file, kernel_defines(pb_, config), {}};
    if (forward_) {
      recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
      recipe.source.defines["APPLY_RELU"] = epilogue.relu ? "1" : "0";
      recipe.source.defines["POOL"] = std::to_string(epilogue.pool);
    }
    const int64_t out_rows = pooled_extent(axes_.row_extent, epilogue);
    const int64_t out_cols = pooled_extent(axes_.col_extent, epilogue);
    const int64_t col_blocks = ceil_div(out_cols, config.at(tile_q_) * config.at(threads_q_));
    const int64_t row_blocks = ceil_div(out_rows, config.at(tile_r_) * config.at(threads_r_));
    const int64_t channel_blocks = ceil_div(axes_.channels, config.at(tile_c_) * config.at(threads_c_));
    LaunchStep step;
    step.kernel = forward_ ? "direct_tiled_forward" : "direct_tiled_backward_data";
    step.args = forward_ ? std::vector<std::string>{"x", "w", "y"} : std::vector<std::string>{"y", "w", "x"};
    if (epilogue.bias) step.args.push_back("bias");
    step.geometry.dims = 3;
    step.geometry.local = {static_cast<size_t>(config.at(threads_q_)), static_cast<size_t>(config.at(threads_r_)),
                           static_cast<size_t>(config.at(threads_c_))};
    step.geometry.global = {static_cast<size_t>(pb_.n * col_blocks) * step.geometry.local[0],
                            static_cast<size_t>(row_blocks) * step.geometry.local[1],
                            static_cast<size_t>(pb_.groups * channel_blocks) * step.geometry.local[2]};
    recipe.steps.push_back(std::move(step));
    return recipe;
  }

 private:
  // Bytes of the kernel's staged tile (the same formulas as the kernel's IN_TILE_*/DY_TILE_* and LOCAL_ROW).
  int64_t staged_bytes(const Config& config, int64_t pool) const {
    if (config.at("USE_LOCAL") == 0) return 0;
    const int64_t block_rows = config.at(tile_r_) * pool * config.at(threads_r_);
    const int64_t block_cols = config.at(tile_q_) * pool * config.at(threads_q_);
    int64_t rows = 0, cols = 0;
    if (forward_) {
      rows = (block_rows - 1) * pb_.stride.h + (pb_.r - 1) * pb_.dilation.h + 1;
      cols = (block_cols - 1) * pb_.stride.w + (pb_.s - 1) * pb_.dilation.w + 1;
    } else {
      rows = ceil_div(block_rows + (pb_.r - 1) * pb_.dilation.h, pb_.stride.h);
      cols = ceil_div(block_cols + (pb_.s - 1) * pb_.dilation.w, pb_.stride.w);
    }
    const int64_t v = config.at("VECTOR_WIDTH");
    const int64_t load_width = v > 1 && axes_.staged_row_length % v == 0 ? v : 1;
    const int64_t row_length = ceil_div(cols + load_width - 1, load_width) * load_width;
    return config.at(chunk_) * rows * row_length * static_cast<int64_t>(sizeof(float));
  }

  ConvProblem pb_;
  bool forward_;
  Axes axes_;
  std::string tile_c_, tile_r_, tile_q_, threads_c_, threads_r_, threads_q_, chunk_;
};

}  // namespace

std::unique_ptr<DirectTiledVariant> make_output_tiled(const ConvProblem& problem) {
  return std::make_unique<OutputTiled>(problem);
}

}  // namespace convtune::direct_tiled
