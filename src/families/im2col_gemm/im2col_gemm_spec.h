// The im2col_gemm family's shared figures: the column workspace and its cap, the GEMM shapes per direction,
// and the recipe builder that the family (im2col_gemm_spec.cpp) and its tests use.
#pragma once

#include <cstdint>

#include "convtune/extension/kernel_family.h"
#include "src/families/gemm/gemm_tiles.h"

namespace convtune::im2col_gemm {

// The GEMM's tiles (the gemm family's, same names) plus the unroll's chunk of images and work-group size.
struct Params : gemm::TileParams {
  int64_t batch_chunk = 0, unroll_threads = 0;
};
const ParameterTable<Params>& parameter_table();

// The constraint that keeps the column buffer within the workspace limit (workspace_limit in convtune/backend.h);
// Plan::create names it when it rejects a config.
inline constexpr const char* kWorkspaceConstraint = "column workspace within the workspace limit";

// Bytes of the column buffer holding `batch_chunk` images: C*R*S x batch_chunk*P*Q floats.
uint64_t column_bytes(const ConvProblem& problem, int64_t batch_chunk);

// The GEMM of one group and one chunk of `chunk_images` images: C (m x n) = A (m x k) * B (k x n).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};
GemmShape gemm_shape(const ConvProblem& problem, int64_t chunk_images);

// Program + per-chunk launches for a configuration the family's constraints accept.
KernelRecipe make_recipe(const ConvProblem& problem, const Params& params);

}  // namespace convtune::im2col_gemm
