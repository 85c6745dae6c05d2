// The gemm_wgmma family: batched, strided matrix products C = A B^T (A not transposed, B transposed: both
// K-contiguous) on Hopper's warpgroup tensor-core MMA (kernels/tensor_core/gemm_wgmma.cu): BF16 and FP16 matrices,
// and FP32 matrices in tf32 math, FP32 accumulation, split-K for small outputs; CUDA on compute capability 9.0.
// Other transpositions and unaligned shapes stay with gemm_tc.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm/gemm_tiles.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

using wgmma::Params;

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t = wgmma::make_table(
      {1, 2, 4, 8, 16}, "slices of the reduction computed by separate blocks and summed by a second kernel (fills "
                        "the GPU when the output has few tiles)");
  return t;
}

using wgmma::ceil_div;

class GemmWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "gemm_wgmma"; }
  std::string description() const override {
    return "GEMM C = A B^T on Hopper's warpgroup MMA (wgmma, sm_90a): BF16/FP16 matrices and FP32 in tf32 math, "
           "FP32 accumulation, 128-byte-swizzled shared-memory stages filled by cp.async; A and B K-contiguous";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Gemm; }
  bool uses_tensor_cores() const override { return true; }

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!problem.is_gemm()) return "computes matrix products, not convolutions";
    if (std::string why = wgmma::unsupported_reason(name(), problem, device); !why.empty()) return why;
    if (epilogue.any()) return fmt::format("no fused epilogue ({}) is implemented", to_string(epilogue));
    const GemmProblem& g = problem.gemm();
    if (g.trans_a || !g.trans_b) {
      return fmt::format("{} reads A and B along the reduction (trans_a=0, trans_b=1), not trans_a={}, trans_b={}",
                         name(), g.trans_a, g.trans_b);
    }
    const int64_t chunk = wgmma::chunk_elements(g.type);
    if (!gemm::a_vectorizes(g, chunk) || !gemm::b_vectorizes(g, chunk)) {
      return fmt::format("{} copies 16 bytes at a time: K, lda, ldb and the batch strides must be multiples of {} "
                         "({} elements)", name(), chunk, to_string(g.type));
    }
    if (g.batch > wgmma::kMaxGridAxis) return fmt::format("batch={} exceeds {}", g.batch, wgmma::kMaxGridAxis);
    return {};
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const GemmProblem g = problem.gemm();
    const ParameterTable<Params>& t = table();
    const int64_t tile_k = wgmma::tile_k(g.type);
    std::vector<Constraint> list = wgmma::tile_constraints(t);
    list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&Params::wg_m}, [g](const Params& p, const X&) {
      return ceil_div(g.m, p.block_m()) <= wgmma::kMaxGridAxis;
    }));
    list.push_back(t.constraint("each split-K slice gets at least one reduction tile", {&Params::split_k},
                                [g, tile_k](const Params& p, const X&) {
                                  return (p.split_k - 1) * gemm::slice_length(g.k, p.split_k, tile_k) < g.k;
                                }));
    const std::vector<Constraint> split_k = gemm::split_k_bounds(t, g);
    list.insert(list.end(), split_k.begin(), split_k.end());
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const GemmProblem& g = problem.gemm();
    Params p = wgmma::default_tiles(g.m, g.n);
    auto valid = [&](const Params& q) { return config_problem(*this, table().write(q), problem, device).empty(); };
    while (!valid(p) && p.stages > 3) --p.stages;
    // Split the reduction while the blocks do not fill the multiprocessors twice and each slice keeps 4 tiles.
    const int64_t blocks = ceil_div(g.m, p.block_m()) * ceil_div(g.n, p.block_n) * g.batch;
    return table().write(wgmma::split_to_fill(p, blocks, g.k, g.type, 16, 4, device, valid));
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo&) const override {
    const GemmProblem& g = problem.gemm();
    const Params p = table().read(config);
    const int64_t slice = p.split_k > 1 ? gemm::slice_length(g.k, p.split_k, wgmma::tile_k(g.type)) : g.k;
    KernelRecipe recipe;
    recipe.source.file = "tensor_core/gemm_wgmma.cu";
    auto s = [](int64_t v) { return std::to_string(v); };
    recipe.source.defines = {{"GEMM_M", s(g.m)},
                             {"GEMM_N", s(g.n)},
                             {"K_TOTAL", s(g.k)},
                             {"SLICE_K", s(slice)},
                             {"BATCH", s(g.batch)},
                             {"LDA", s(g.ld_a())},
                             {"LDB", s(g.ld_b())},
                             {"LDC", s(g.ld_c())},
                             {"STRIDE_A", s(g.batch_stride_a())},
                             {"STRIDE_B", s(g.batch_stride_b())},
                             {"STRIDE_C", s(g.batch_stride_c())},
                             {"ACCUMULATE", s(g.accumulate)}};
    wgmma::add_defines(table(), p, g.type, recipe);
    constexpr int a = 0, b = 1, c = 2;  // Problem::operand order
    recipe.steps.push_back({"gemm_wgmma",
                            {ArgSource::of_operand(a), ArgSource::of_operand(b),
                             p.split_k > 1 ? ArgSource::workspace() : ArgSource::of_operand(c)},
                            wgmma::main_geometry(g.m, g.n, g.batch * p.split_k, p)});
    if (p.split_k > 1) {
      recipe.workspace_bytes = gemm::split_k_workspace_bytes(g, p.split_k);
      LaunchStep reduce;
      reduce.kernel = "wgmma_splitk_reduce";
      reduce.args = {ArgSource::workspace(), ArgSource::of_operand(c)};
      reduce.geometry.dims = 1;
      reduce.geometry.global = {static_cast<size_t>(ceil_div(g.batch * g.m * g.n, 256) * 256), 1, 1};
      reduce.geometry.local = {256, 1, 1};
      recipe.steps.push_back(std::move(reduce));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_gemm_wgmma() { return std::make_unique<GemmWgmmaFamily>(); }

}  // namespace convtune
