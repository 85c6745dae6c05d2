// The filter-tiled half of direct_tiled: backward-filter, each work-item a TILE_K x TILE_CRS tile of dw reduced
// over N*P*Q, optionally split over SPLIT_NPQ work-groups whose partials a second kernel sums.
#include <fmt/format.h>

#include <algorithm>

#include "src/families/direct_tiled/direct_tiled_variant.h"

namespace convtune::direct_tiled {

namespace {

// Split partials may take at most this much device memory, and a quarter of what the device has.
constexpr int64_t kMaxWorkspaceBytes = int64_t{1} << 30;
constexpr int64_t kSmallestChunk = 8;

class FilterTiled final : public DirectTiledVariant {
 public:
  explicit FilterTiled(const ConvProblem& problem)
      : pb_(problem), taps_(problem.c_per_group() * problem.r * problem.s),
        positions_(problem.n * problem.p() * problem.q()) {}

  std::vector<Parameter> parameters() const override {
    return {
        {"TILE_K", {1, 2, 4, 8}, "dw output channels per work-item"},
        {"TILE_CRS", {1, 2, 4, 8}, "dw filter taps (c, r, s flattened) per work-item"},
        {"THREADS_K", {1, 2, 4, 8, 16, 32, 64}, "work-group extent along output channels (local axis 1)"},
        {"THREADS_CRS", {1, 2, 4, 8, 16, 32, 64, 128}, "work-group extent along filter taps (local axis 0)"},
        {"USE_LOCAL", {1, 0}, "1: stage dy and the x patches of a chunk of output positions in local memory"},
        {"CHUNK_NPQ", {kSmallestChunk, 16, 32, 64}, "output positions staged per local-memory fill"},
        {"SPLIT_NPQ", {1, 2, 4, 8, 16, 32, 64, 128},
         "work-groups sharing one dw tile's N*P*Q reduction (partials in workspace0, summed by a second kernel)"},
        {"VECTOR_WIDTH", {1, 2, 4}, "floats per global dy load / dw store where the row length allows"},
        {"UNROLL", {1, 0}, "1: unroll the reduction loop over output positions"},
    };
  }

  std::vector<Constraint> constraints() const override {
    auto within = [](const std::string& name, std::vector<std::string> uses, int64_t extent) {
      return Constraint{name, uses, [uses, limit = pow2_ceil(extent)](const ConstraintContext& c) {
                          int64_t product = 1;
                          for (const auto& u : uses) product *= c.config.at(u);
                          return product <= limit;
                        }};
    };
    const int64_t k_per_group = pb_.k_per_group(), taps = taps_, positions = positions_;
    const int64_t pq = pb_.p() * pb_.q(), dw_bytes = pb_.w_elements() * static_cast<int64_t>(sizeof(float));
    return {
        {fmt::format("register tile of at most {} outputs per work-item", kMaxRegisterTile), {"TILE_K", "TILE_CRS"},
         [](const ConstraintContext& c) {
           return c.config.at("TILE_K") * c.config.at("TILE_CRS") <= kMaxRegisterTile;
         }},
        within("channel tile within the group's output channels", {"TILE_K"}, k_per_group),
        within("tap tile within the filter's taps", {"TILE_CRS"}, taps),
        within("work-group's channels within the group's output channels", {"TILE_K", "THREADS_K"}, k_per_group),
        within("work-group's taps within the filter's taps", {"TILE_CRS", "THREADS_CRS"}, taps),
        {"threads per work-group within the device limit", {"THREADS_K", "THREADS_CRS"},
         [](const ConstraintContext& c) {
           return static_cast<size_t>(c.config.at("THREADS_K") * c.config.at("THREADS_CRS")) <=
                  c.device.max_work_group_size;
         }},
        {fmt::format("CHUNK_NPQ is {} without local memory", kSmallestChunk), {"USE_LOCAL", "CHUNK_NPQ"},
         [](const ConstraintContext& c) {
           return c.config.at("USE_LOCAL") == 1 || c.config.at("CHUNK_NPQ") == kSmallestChunk;
         }},
        {"local memory within the device limit and 48 KiB (CUDA static shared memory)",
         {"TILE_K", "TILE_CRS", "THREADS_K", "THREADS_CRS", "USE_LOCAL", "CHUNK_NPQ"},
         [self = std::make_shared<FilterTiled>(*this)](const ConstraintContext& c) {
           return static_cast<int64_t>(self->local_memory_bytes(c.config)) <= local_memory_limit(c.device);
         }},
        {"every split of the reduction gets at least one chunk of positions", {"CHUNK_NPQ", "SPLIT_NPQ"},
         [positions](const ConstraintContext& c) {
           const int64_t split = c.config.at("SPLIT_NPQ");
           return split == 1 || split * c.config.at("CHUNK_NPQ") <= positions;
         }},
        {"split partials within 1 GiB and a quarter of device memory", {"SPLIT_NPQ"},
         [dw_bytes](const ConstraintContext& c) {
           const int64_t split = c.config.at("SPLIT_NPQ");
           const int64_t bytes = split * dw_bytes;
           const auto quarter = static_cast<int64_t>(c.device.global_memory_bytes / 4);
           return split == 1 || (bytes <= kMaxWorkspaceBytes && bytes <= quarter);
         }},
        {"vector width divides a row the kernel loads (dy, staged with local memory) or stores (dw)",
         {"TILE_CRS", "USE_LOCAL", "VECTOR_WIDTH"},
         [pq, taps](const ConstraintContext& c) {
           const int64_t v = c.config.at("VECTOR_WIDTH");
           const bool loads = c.config.at("USE_LOCAL") == 1 && pq % v == 0;
           const bool stores = taps % v == 0 && c.config.at("TILE_CRS") % v == 0;
           return v == 1 || loads || stores;
         }},
    };
  }

  // 4 x 4 outputs per work-item, 8 x 16 work-items, local memory on, and the reduction split until the launch
  // has about four work-groups per compute unit; fitted to the problem and device, all ones when nothing fits.
  Config default_config(const DeviceInfo& device) const override {
    Config c{{"TILE_K", 4}, {"TILE_CRS", 4}, {"THREADS_K", 8}, {"THREADS_CRS", 16}, {"USE_LOCAL", 1},
             {"CHUNK_NPQ", 16}, {"SPLIT_NPQ", 1}, {"VECTOR_WIDTH", 1}, {"UNROLL", 1}};
    fit_extent(c, "TILE_K", "THREADS_K", pb_.k_per_group());
    fit_extent(c, "TILE_CRS", "THREADS_CRS", taps_);
    while (c["THREADS_K"] * c["THREADS_CRS"] < 64 && c["THREADS_CRS"] < 128 &&
           c["TILE_CRS"] * c["THREADS_CRS"] * 2 <= pow2_ceil(taps_)) {
      c["THREADS_CRS"] *= 2;
    }
    while (static_cast<size_t>(c["THREADS_K"] * c["THREADS_CRS"]) > device.max_work_group_size) {
      c[c["THREADS_K"] > c["THREADS_CRS"] ? "THREADS_K" : "THREADS_CRS"] /= 2;
    }
    if (static_cast<int64_t>(local_memory_bytes(c)) > local_memory_limit(device)) {
      c["USE_LOCAL"] = 0;
      c["CHUNK_NPQ"] = kSmallestChunk;
    }
    const int64_t blocks = ceil_div(taps_, c["TILE_CRS"] * c["THREADS_CRS"]) * pb_.groups *
                           ceil_div(pb_.k_per_group(), c["TILE_K"] * c["THREADS_K"]);
    const int64_t target = 4 * std::max(1, device.compute_units);
    const auto parameter_list = parameters();
    const auto constraint_list = constraints();
    while (blocks * c["SPLIT_NPQ"] < target && c["SPLIT_NPQ"] < 128) {
      Config doubled = c;
      doubled["SPLIT_NPQ"] *= 2;
      if (first_valid({doubled, c}, parameter_list, constraint_list, pb_, device) != doubled) break;
      c = doubled;
    }
    return first_valid(default_candidates(c, {{"CHUNK_NPQ", kSmallestChunk}}), parameter_list, constraint_list, pb_,
                       device);
  }

  size_t local_memory_bytes(const Config& config) const override {
    if (config.at("USE_LOCAL") == 0) return 0;
    const int64_t block_k = config.at("TILE_K") * config.at("THREADS_K");
    const int64_t block_taps = config.at("TILE_CRS") * config.at("THREADS_CRS");
    return static_cast<size_t>(config.at("CHUNK_NPQ") * (block_k + block_taps)) * sizeof(float);
  }

  KernelRecipe recipe(const Epilogue&, const Config& config, const DeviceInfo& device) const override {
    KernelRecipe recipe;
    recipe.source = {"direct_tiled/backward_filter.cl", kernel_defines(pb_, config), {}};
    const int64_t split = config.at("SPLIT_NPQ");
    const int64_t tap_blocks = ceil_div(taps_, config.at("TILE_CRS") * config.at("THREADS_CRS"));
    const int64_t k_blocks = ceil_div(pb_.k_per_group(), config.at("TILE_K") * config.at("THREADS_K"));
    LaunchStep reduce;
    reduce.kernel = "direct_tiled_backward_filter";
    reduce.args = {"x", "y", split > 1 ? "workspace0" : "w"};
    reduce.geometry.dims = 3;
    reduce.geometry.local = {static_cast<size_t>(config.at("THREADS_CRS")),
                             static_cast<size_t>(config.at("THREADS_K")), 1};
    reduce.geometry.global = {static_cast<size_t>(tap_blocks) * reduce.geometry.local[0],
                              static_cast<size_t>(pb_.groups * k_blocks) * reduce.geometry.local[1],
                              static_cast<size_t>(split)};
    recipe.steps.push_back(std::move(reduce));
    if (split > 1) {
      recipe.workspace_bytes.push_back(static_cast<size_t>(split * pb_.w_elements()) * sizeof(float));
      LaunchStep sum;
      sum.kernel = "direct_tiled_sum_splits";
      sum.args = {"workspace0", "w"};
      const size_t local = std::min<size_t>(256, std::max<size_t>(1, device.max_work_group_size));
      sum.geometry.dims = 1;
      sum.geometry.local = {local, 1, 1};
      const auto blocks = static_cast<size_t>(ceil_div(pb_.w_elements(), static_cast<int64_t>(local)));
      sum.geometry.global = {blocks * local, 1, 1};
      recipe.steps.push_back(std::move(sum));
    }
    return recipe;
  }

 private:
  ConvProblem pb_;
  int64_t taps_;       // C_PER_GROUP * R * S: one dw row
  int64_t positions_;  // N * P * Q: the reduction length
};

}  // namespace

std::unique_ptr<DirectTiledVariant> make_filter_tiled(const ConvProblem& problem) {
  return std::make_unique<FilterTiled>(problem);
}

}  // namespace convtune::direct_tiled
