// The filter-tiled half of direct_tiled: backward-filter, each work-item a TILE_K x TILE_CRS tile of dw reduced
// over N*P*Q, optionally split over SPLIT_NPQ work-groups whose partials a second kernel sums.
#include <fmt/format.h>

#include <algorithm>

#include "src/families/direct_tiled/direct_tiled_variant.h"

namespace convtune::direct_tiled {

namespace {

constexpr int64_t kSmallestChunk = 8;

struct FilterParams {
  int64_t tile_k = 0, tile_crs = 0, threads_k = 0, threads_crs = 0;
  int64_t use_local = 0, chunk_npq = 0, split_npq = 0, vector_width = 0, unroll = 0;
};

const ParameterTable<FilterParams>& table() {
  using P = FilterParams;
  static const ParameterTable<P> t({
      {"TILE_K", &P::tile_k, {1, 2, 4, 8}, "dw output channels per work-item"},
      {"TILE_CRS", &P::tile_crs, {1, 2, 4, 8}, "dw filter taps (c, r, s flattened) per work-item"},
      {"THREADS_K", &P::threads_k, {1, 2, 4, 8, 16, 32, 64}, "work-group extent along output channels (local axis 1)"},
      {"THREADS_CRS", &P::threads_crs, {1, 2, 4, 8, 16, 32, 64, 128},
       "work-group extent along filter taps (local axis 0)"},
      {"USE_LOCAL", &P::use_local, {1, 0}, "1: stage dy and the x patches of a chunk of output positions in local memory"},
      {"CHUNK_NPQ", &P::chunk_npq, {kSmallestChunk, 16, 32, 64}, "output positions staged per local-memory fill"},
      {"SPLIT_NPQ", &P::split_npq, {1, 2, 4, 8, 16, 32, 64, 128},
       "work-groups sharing one dw tile's N*P*Q reduction (partials in the workspace, summed by a second kernel)"},
      {"VECTOR_WIDTH", &P::vector_width, {1, 2, 4}, "floats per global dy load / dw store where the row length allows"},
      {"UNROLL", &P::unroll, {1, 0}, "1: unroll the reduction loop over output positions"},
  });
  return t;
}

class FilterTiled final : public DirectTiledVariant {
 public:
  explicit FilterTiled(const ConvProblem& problem)
      : pb_(problem), taps_(problem.c_per_group() * problem.r * problem.s),
        positions_(problem.n * problem.p() * problem.q()) {}

  std::vector<Parameter> parameters() const override { return table().parameters(); }

  std::vector<Constraint> constraints() const override {
    using P = FilterParams;
    using X = ConstraintContext;
    const ParameterTable<P>& t = table();
    const int64_t k_per_group = pb_.k_per_group(), taps = taps_, positions = positions_;
    const int64_t pq = pb_.p() * pb_.q(), dw_bytes = pb_.w_elements() * static_cast<int64_t>(sizeof(float));
    return {
        t.constraint(fmt::format("register tile of at most {} outputs per work-item", kMaxRegisterTile),
                     {&P::tile_k, &P::tile_crs},
                     [](const P& p, const X&) { return p.tile_k * p.tile_crs <= kMaxRegisterTile; }),
        within(t, "channel tile within the group's output channels", {&P::tile_k}, k_per_group),
        within(t, "tap tile within the filter's taps", {&P::tile_crs}, taps),
        within(t, "work-group's channels within the group's output channels", {&P::tile_k, &P::threads_k}, k_per_group),
        within(t, "work-group's taps within the filter's taps", {&P::tile_crs, &P::threads_crs}, taps),
        t.constraint("threads per work-group within the device limit", {&P::threads_k, &P::threads_crs},
                     [](const P& p, const X& x) {
                       return static_cast<size_t>(p.threads_k * p.threads_crs) <= x.device.max_work_group_size;
                     }),
        t.constraint(fmt::format("CHUNK_NPQ is {} without local memory", kSmallestChunk), {&P::use_local, &P::chunk_npq},
                     [](const P& p, const X&) { return p.use_local == 1 || p.chunk_npq == kSmallestChunk; }),
        t.constraint("local memory within the device limit and 48 KiB (CUDA static shared memory)",
                     {&P::tile_k, &P::tile_crs, &P::threads_k, &P::threads_crs, &P::use_local, &P::chunk_npq},
                     [](const P& p, const X& x) { return local_memory_bytes(p) <= local_memory_limit(x.device); }),
        t.constraint("every split of the reduction gets at least one chunk of positions", {&P::chunk_npq, &P::split_npq},
                     [positions](const P& p, const X&) {
                       return p.split_npq == 1 || p.split_npq * p.chunk_npq <= positions;
                     }),
        t.constraint("split partials within the workspace limit", {&P::split_npq},
                     [dw_bytes](const P& p, const X& x) {
                       return p.split_npq == 1 || static_cast<uint64_t>(p.split_npq * dw_bytes) <= workspace_limit(x.device);
                     }),
        t.constraint("vector width divides a row the kernel loads (dy, staged with local memory) or stores (dw)",
                     {&P::tile_crs, &P::use_local, &P::vector_width},
                     [pq, taps](const P& p, const X&) {
                       const int64_t v = p.vector_width;
                       const bool loads = p.use_local == 1 && pq % v == 0;
                       const bool stores = taps % v == 0 && p.tile_crs % v == 0;
                       return v == 1 || loads || stores;
                     }),
    };
  }

  // 4 x 4 outputs per work-item, 8 x 16 work-items, local memory on, and the reduction split until the launch
  // has about four work-groups per compute unit; fitted to the problem and device, all ones when nothing fits.
  Config default_config(const DeviceInfo& device) const override {
    FilterParams c;
    c.tile_k = 4, c.tile_crs = 4, c.threads_k = 8, c.threads_crs = 16, c.use_local = 1, c.chunk_npq = 16;
    c.split_npq = 1, c.vector_width = 1, c.unroll = 1;
    fit_extent(c.tile_k, c.threads_k, pb_.k_per_group());
    fit_extent(c.tile_crs, c.threads_crs, taps_);
    while (c.threads_k * c.threads_crs < 64 && c.threads_crs < 128 && c.tile_crs * c.threads_crs * 2 <= pow2_ceil(taps_)) {
      c.threads_crs *= 2;
    }
    while (static_cast<size_t>(c.threads_k * c.threads_crs) > device.max_work_group_size) {
      (c.threads_k > c.threads_crs ? c.threads_k : c.threads_crs) /= 2;
    }
    if (local_memory_bytes(c) > local_memory_limit(device)) {
      c.use_local = 0;
      c.chunk_npq = kSmallestChunk;
    }
    const int64_t blocks = ceil_div(taps_, c.tile_crs * c.threads_crs) * pb_.groups *
                           ceil_div(pb_.k_per_group(), c.tile_k * c.threads_k);
    const int64_t target = 4 * std::max(1, device.compute_units);
    const auto constraint_list = constraints();
    const Problem generic(pb_);
    auto valid = [&](const FilterParams& p) {
      const Config config = table().write(p);
      const ConstraintContext context{config, generic, device};
      for (const auto& f : table().fields())
        if (std::find(f.values.begin(), f.values.end(), p.*f.member) == f.values.end()) return false;
      return std::all_of(constraint_list.begin(), constraint_list.end(),
                         [&](const Constraint& k) { return k.holds(context); });
    };
    while (blocks * c.split_npq < target && c.split_npq < 128) {
      FilterParams doubled = c;
      doubled.split_npq *= 2;
      if (!valid(doubled)) break;
      c = doubled;
    }
    return first_valid_default<FilterParams>(table(), constraint_list, c,
                                             [](FilterParams& ones) { ones.chunk_npq = kSmallestChunk; }, generic, device);
  }

  KernelRecipe recipe(const Epilogue&, const Config& config, const DeviceInfo& device) const override {
    const FilterParams p = table().read(config);
    KernelRecipe recipe;
    recipe.source = {"direct_tiled/backward_filter.cl", problem_defines(pb_), {}};
    table().add_defines(p, recipe.source.defines);
    const int64_t tap_blocks = ceil_div(taps_, p.tile_crs * p.threads_crs);
    const int64_t k_blocks = ceil_div(pb_.k_per_group(), p.tile_k * p.threads_k);
    constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
    LaunchStep reduce;
    reduce.kernel = "direct_tiled_backward_filter";
    reduce.args = {ArgSource::of_operand(x), ArgSource::of_operand(y),
                   p.split_npq > 1 ? ArgSource::workspace() : ArgSource::of_operand(w)};
    reduce.geometry.dims = 3;
    reduce.geometry.local = {static_cast<size_t>(p.threads_crs), static_cast<size_t>(p.threads_k), 1};
    reduce.geometry.global = {static_cast<size_t>(tap_blocks) * reduce.geometry.local[0],
                              static_cast<size_t>(pb_.groups * k_blocks) * reduce.geometry.local[1],
                              static_cast<size_t>(p.split_npq)};
    recipe.steps.push_back(std::move(reduce));
    if (p.split_npq > 1) {
      recipe.workspace_bytes = static_cast<size_t>(p.split_npq * pb_.w_elements()) * sizeof(float);
      recipe.steps.push_back(families::split_sum_step("direct_tiled_sum_splits", w, pb_.w_elements(), device));
    }
    return recipe;
  }

 private:
  static int64_t local_memory_bytes(const FilterParams& p) {
    if (p.use_local == 0) return 0;
    const int64_t block_k = p.tile_k * p.threads_k, block_taps = p.tile_crs * p.threads_crs;
    return p.chunk_npq * (block_k + block_taps) * static_cast<int64_t>(sizeof(float));
  }

  ConvProblem pb_;
  int64_t taps_;       // C_PER_GROUP * R * S: one dw row
  int64_t positions_;  // N * P * Q: the reduction length
};

}  // namespace

std::unique_ptr<DirectTiledVariant> make_filter_tiled(const ConvProblem& problem) {
  return std::make_unique<FilterTiled>(problem);
}

}  // namespace convtune::direct_tiled
