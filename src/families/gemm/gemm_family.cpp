// The gemm family: batched, strided matrix products (GemmProblem) on the tiled GEMM kernel, with split-K for
// products whose output is too small to fill a device (the dense layers' weight gradients, LeNet's fc1).
// Parameters, constraints, defaults and launches; the kernel is kernels/gemm/gemm_family.cl.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm/gemm_tiles.h"

namespace convtune {

namespace {

using gemm::a_vectorizes;
using gemm::b_vectorizes;

// Partial products of split-K may take at most this much device memory, and a quarter of what the device has.

struct Params : gemm::TileParams {
  int64_t split_k = 0;
};

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t = [] {
    std::vector<ParameterTable<Params>::Field> fields;
    gemm::add_tile_fields<Params>(fields);
    fields.push_back({"SPLIT_K", &Params::split_k, {1, 2, 4, 8, 16, 32, 64},
                      "slices of the reduction computed by separate work-groups and summed by a second kernel (fills "
                      "the device when the output has few tiles)"});
    return ParameterTable<Params>(std::move(fields));
  }();
  return t;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t slice_k(const GemmProblem& g, int64_t split, int64_t tile_k) { return gemm::slice_length(g.k, split, tile_k); }

bool valid(const GemmProblem& g, const Params& p, const KernelFamily& family, const DeviceInfo& device) {
  return config_problem(family, table().write(p), Problem(g), device).empty();
}

class GemmFamily final : public KernelFamily {
 public:
  std::string name() const override { return "gemm"; }
  std::string description() const override {
    return "tiled local-memory GEMM with register tiles, any transposition, leading dimensions and batch strides; "
           "split-K over separate work-groups for small outputs";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Gemm; }

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!problem.is_gemm()) return "computes matrix products, not convolutions";
    if (!device.can_run_kernels) return fmt::format("needs a device that compiles kernels: {}", device.cannot_run_reason);
    if (std::string why = fp32_only_reason(name(), problem); !why.empty()) return why;
    if (epilogue.any()) return fmt::format("no fused epilogue ({}) is implemented", to_string(epilogue));
    const GemmProblem& g = problem.gemm();
    if (g.batch > gemm::kMaxGridAxis)
      return fmt::format("batch={} exceeds {} (one work-group layer per batch item, CUDA grid axis 2)", g.batch,
                         gemm::kMaxGridAxis);
    return {};
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const GemmProblem g = problem.gemm();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = gemm::tile_constraints(
        t, g.m, [g](int64_t v) { return a_vectorizes(g, v) || b_vectorizes(g, v); });
    list.push_back(t.constraint("each split-K slice gets at least one reduction element", {&Params::tile_k, &Params::split_k},
                                [g](const Params& p, const X&) {
                                  return (p.split_k - 1) * slice_k(g, p.split_k, p.tile_k) < g.k;
                                }));
    const std::vector<Constraint> split_k = gemm::split_k_bounds(t, g);
    list.insert(list.end(), split_k.begin(), split_k.end());
    return list;
  }

  // The largest preferred tile that is valid, then the reduction split while the work-groups stay within about
  // four per compute unit and every slice keeps at least four TILE_K steps: products with few output tiles and a
  // long reduction (a dense layer's batch x features by its inputs) otherwise leave most of a GPU idle.
  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const GemmProblem& g = problem.gemm();
    Params best;
    bool found = false;
    std::vector<gemm::TileParams> candidates = gemm::preferred_tiles(device.is_gpu);
    if (device.is_gpu && g.m >= 1024 && g.n >= 1024) candidates.insert(candidates.begin(), gemm::large_gpu_tiles());
    for (const gemm::TileParams& tiles : candidates) {
      // CPUs (PoCL) run a work-group's threads one after another between barriers: 256-thread groups only cost
      // there. LeNet-small's fc1 on PoCL took 4.8x longer with 64x64 tiles than with the 32x32 ones below.
      if (!device.is_gpu && tiles.threads() > 64) continue;
      Params p;
      static_cast<gemm::TileParams&>(p) = tiles;
      p.split_k = 1;
      p.vector_width = a_vectorizes(g, 4) || b_vectorizes(g, 4) ? 4 : a_vectorizes(g, 2) || b_vectorizes(g, 2) ? 2 : 1;
      // A tile far larger than the matrix only idles: try the next smaller one.
      const bool oversized = p.tile_m >= 2 * g.m && p.tile_n >= 2 * g.n && tiles.tile_m > 16;
      if (!oversized && valid(g, p, *this, device)) {
        best = p, found = true;
        break;
      }
      best = p;
    }
    if (!found) return table().write(best);  // Plan::create names the failing constraint
    const int64_t groups = ceil_div(g.m, best.tile_m) * ceil_div(g.n, best.tile_n) * g.batch;
    const int64_t target = 4 * std::max(1, device.compute_units);
    for (int64_t split = 2; split <= 64; split *= 2) {
      if (groups * split > target || ceil_div(g.k, split) < 4 * best.tile_k) break;
      Params p = best;
      p.split_k = split;
      if (!valid(g, p, *this, device)) break;
      best = p;
    }
    return table().write(best);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo& device) const override {
    const GemmProblem& g = problem.gemm();
    const Params p = table().read(config);
    const int64_t slice = p.split_k > 1 ? slice_k(g, p.split_k, p.tile_k) : g.k;
    KernelRecipe recipe;
    recipe.source.file = "gemm/gemm_family.cl";
    auto& d = recipe.source.defines;
    auto s = [](int64_t v) { return std::to_string(v); };
    d = {{"GEMM_M", s(g.m)},
         {"GEMM_N", s(g.n)},
         {"K_TOTAL", s(g.k)},
         {"SLICE_K", s(slice)},
         {"SPLIT_K", s(p.split_k)},
         {"BATCH", s(g.batch)},
         {"A_TRANS", s(g.trans_a)},
         {"B_TRANS", s(g.trans_b)},
         {"LDA", s(g.ld_a())},
         {"LDB", s(g.ld_b())},
         {"LDC", s(g.ld_c())},
         {"STRIDE_A", s(g.batch_stride_a())},
         {"STRIDE_B", s(g.batch_stride_b())},
         {"STRIDE_C", s(g.batch_stride_c())},
         {"A_VECTOR", s(a_vectorizes(g, p.vector_width) ? p.vector_width : 1)},
         {"B_VECTOR", s(b_vectorizes(g, p.vector_width) ? p.vector_width : 1)},
         // Partials are written, never added to; the reduction adds into C when the problem accumulates.
         {"ACCUMULATE", s(g.accumulate && p.split_k == 1)},
         {"REDUCE_ACCUMULATE", s(g.accumulate)}};
    table().add_defines(p, d);  // the tiles, and SPLIT_K again (the same value)

    constexpr int a = 0, b = 1, c = 2;  // Problem::operand order
    const ArgSource zero = ArgSource::fixed(int32_t{0});
    LaunchStep main{"gemm",
                    {ArgSource::of_operand(a), ArgSource::of_operand(b),
                     p.split_k > 1 ? ArgSource::workspace() : ArgSource::of_operand(c), zero, zero},
                    gemm::launch_geometry(g.m, g.n, g.batch * p.split_k, p)};
    recipe.steps.push_back(std::move(main));
    if (p.split_k > 1) {
      recipe.workspace_bytes = gemm::split_k_workspace_bytes(g, p.split_k);
      const size_t local = std::min<size_t>(256, std::max<size_t>(1, device.max_work_group_size));
      LaunchStep reduce;
      reduce.kernel = "gemm_splitk_reduce";
      reduce.args = {ArgSource::workspace(), ArgSource::of_operand(c)};
      reduce.geometry.dims = 1;
      reduce.geometry.local = {local, 1, 1};
      reduce.geometry.global = {static_cast<size_t>(ceil_div(g.batch * g.m * g.n, static_cast<int64_t>(local))) * local, 1, 1};
      recipe.steps.push_back(std::move(reduce));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_gemm() { return std::make_unique<GemmFamily>(); }

}  // namespace convtune
