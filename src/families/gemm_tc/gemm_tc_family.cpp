// The gemm_tc family: batched, strided matrix products (GemmProblem) on NVIDIA tensor cores: FP32 matrices in tf32 or
// 3xtf32 math (mma.sync m16n8k8 TF32, cp.async pipeline; kernels/tensor_core/gemm_tc.cl) and BF16 or FP16 matrices
// with FP32 accumulation (mma.sync m16n8k16, ldmatrix; kernels/tensor_core/gemm_tc16.cl), with split-K for small
// outputs. FP32 math stays with the gemm family.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm/gemm_tiles.h"
#include "src/families/gemm_tc/tc_tiles.h"

namespace convtune {

namespace {

using tensor_core::Params;

const ParameterTable<Params>& table(ElementType type) {
  static const char* const split = "slices of the reduction computed by separate blocks and summed by a second kernel "
                                   "(fills the GPU when the output has few tiles)";
  static const ParameterTable<Params> fp32 = tensor_core::make_table({1, 2, 4, 8, 16, 32}, split);
  static const ParameterTable<Params> narrow = tensor_core::make_table({1, 2, 4, 8, 16, 32}, split, ElementType::BF16);
  return type == ElementType::F32 ? fp32 : narrow;
}
const ParameterTable<Params>& table(const Problem& problem) { return table(problem.type()); }

// Elements per copy of a 16-bit operand: 8 (16 bytes) or 2 (4 bytes) where every row start, row length and batch
// stride keeps them aligned, else 1 (through registers).
int sixteen_bit_vector(bool (*vectorizes)(const GemmProblem&, int64_t), const GemmProblem& g) {
  return vectorizes(g, 8) ? 8 : vectorizes(g, 2) ? 2 : 1;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Each operand's tile keeps its global contiguous dimension: A is K-contiguous unless transposed, B only when.
tensor_core::TileLayout layout(const GemmProblem& g) { return {!g.trans_a, g.trans_b}; }

class GemmTcFamily final : public KernelFamily {
 public:
  std::string name() const override { return "gemm_tc"; }
  std::string description() const override {
    return "GEMM on tensor cores: FP32 matrices in tf32 or 3xtf32 math (mma.sync m16n8k8), BF16/FP16 matrices with FP32 "
           "accumulation (m16n8k16, ldmatrix); multi-stage cp.async pipeline, any transposition, leading dimensions "
           "and batch strides; split-K for small outputs; NVIDIA sm_80+";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Gemm; }
  bool uses_tensor_cores() const override { return true; }

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!problem.is_gemm()) return "computes matrix products, not convolutions";
    if (std::string why = tensor_core::unsupported_reason(name(), problem, device, true); !why.empty()) return why;
    if (epilogue.any()) return fmt::format("no fused epilogue ({}) is implemented", to_string(epilogue));
    const GemmProblem& g = problem.gemm();
    if (g.batch > tensor_core::kMaxGridAxis) {
      return fmt::format("batch={} exceeds {} (one block layer per batch item, CUDA grid axis 2)", g.batch,
                         tensor_core::kMaxGridAxis);
    }
    return {};
  }

  std::vector<Parameter> parameters(const Problem& problem) const override { return table(problem).parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const GemmProblem g = problem.gemm();
    const ParameterTable<Params>& t = table(problem);
    std::vector<Constraint> list = tensor_core::tile_constraints(t, layout(g), g.math, g.type);
    list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&Params::tile_m}, [g](const Params& p, const X&) {
      return ceil_div(g.m, p.tile_m) <= tensor_core::kMaxGridAxis;
    }));
    list.push_back(t.constraint("each split-K slice gets at least one reduction element",
                                {&Params::tile_k, &Params::split_k}, [g](const Params& p, const X&) {
                                  return (p.split_k - 1) * gemm::slice_length(g.k, p.split_k, p.tile_k) < g.k;
                                }));
    const std::vector<Constraint> split_k = gemm::split_k_bounds(t, g);
    list.insert(list.end(), split_k.begin(), split_k.end());
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const GemmProblem& g = problem.gemm();
    const ParameterTable<Params>& t = table(problem);
    auto valid = [&](const Params& p) { return config_problem(*this, t.write(p), problem, device).empty(); };
    const int64_t min_tile_k = g.type == ElementType::F32 ? 8 : 16;
    Params p = tensor_core::fit_default(tensor_core::default_tiles(g.m, g.n, g.k, g.type), valid, min_tile_k);
    const int64_t blocks = ceil_div(g.m, p.tile_m) * ceil_div(g.n, p.tile_n) * g.batch;
    p.split_k = tensor_core::default_split(blocks, g.k, p, device, 32, valid);
    return t.write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo& device) const override {
    const GemmProblem& g = problem.gemm();
    const Params p = table(problem).read(config);
    const tensor_core::TileLayout l = layout(g);
    const bool narrow = g.type != ElementType::F32;
    const int64_t slice = p.split_k > 1 ? gemm::slice_length(g.k, p.split_k, p.tile_k) : g.k;
    KernelRecipe recipe;
    recipe.source.file = narrow ? "tensor_core/gemm_tc16.cl" : "tensor_core/gemm_tc.cl";
    auto s = [](int64_t v) { return std::to_string(v); };
    recipe.source.defines = {{"GEMM_M", s(g.m)},
                             {"GEMM_N", s(g.n)},
                             {"K_TOTAL", s(g.k)},
                             {"SLICE_K", s(slice)},
                             {"BATCH", s(g.batch)},
                             {"A_TRANS", s(g.trans_a)},
                             {"B_TRANS", s(g.trans_b)},
                             {"LDA", s(g.ld_a())},
                             {"LDB", s(g.ld_b())},
                             {"LDC", s(g.ld_c())},
                             {"STRIDE_A", s(g.batch_stride_a())},
                             {"STRIDE_B", s(g.batch_stride_b())},
                             {"STRIDE_C", s(g.batch_stride_c())},
                             {"A_VECTOR", s(narrow ? sixteen_bit_vector(gemm::a_vectorizes, g)
                                                   : gemm::a_vectorizes(g, 4) ? 4 : 1)},
                             {"B_VECTOR", s(narrow ? sixteen_bit_vector(gemm::b_vectorizes, g)
                                                   : gemm::b_vectorizes(g, 4) ? 4 : 1)},
                             {"TC_A_KCONTIG", s(l.a_kcontig)},
                             {"TC_B_KCONTIG", s(l.b_kcontig)},
                             // Partials are written, never added to; the reduction adds into C when accumulating.
                             {"ACCUMULATE", s(g.accumulate && p.split_k == 1)},
                             {"REDUCE_ACCUMULATE", s(g.accumulate)}};
    tensor_core::add_defines(table(problem), p, g.math, recipe.source.defines, g.type);
    tensor_core::add_register_cap(recipe, p, device);

    constexpr int a = 0, b = 1, c = 2;  // Problem::operand order
    recipe.steps.push_back({narrow ? "gemm_tc16" : "gemm_tc",
                            {ArgSource::of_operand(a), ArgSource::of_operand(b),
                             p.split_k > 1 ? ArgSource::workspace() : ArgSource::of_operand(c)},
                            tensor_core::main_geometry(g.m, g.n, g.batch * p.split_k, p, l, g.type)});
    if (p.split_k > 1) {
      recipe.workspace_bytes = gemm::split_k_workspace_bytes(g, p.split_k);
      recipe.steps.push_back(tensor_core::splitk_reduce_step({ArgSource::workspace(), ArgSource::of_operand(c)},
                                                             g.batch * g.m * g.n, device));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_gemm_tc() { return std::make_unique<GemmTcFamily>(); }

}  // namespace convtune
