// implicit_gemm internals shared by its spec (parameters, constraints, defaults) and its recipe (launches):
// the typed parameters, the GEMM each direction becomes, and the sizes a configuration implies.
#pragma once

#include <cstdint>

#include "convtune/extension/kernel_family.h"
#include "src/families/parameter_table.h"

namespace convtune::implicit_gemm {

// Seed 004's M_BLK, N_BLK, K_BLK, M_DIM x N_DIM (work-group), plus local padding, vector width, unroll, split-K and
// the NVIDIA-only asynchronous copies and register cap. Names and meanings: parameter_table() below.
struct Params {
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  int64_t threads_m = 0, threads_n = 0;
  int64_t vector_width = 0, local_padding = 0, unroll_k = 0;
  int64_t async_copy = 0, max_registers = 0, split_k = 0;

  int64_t threads() const { return threads_m * threads_n; }
};
// The table for one problem (SPLIT_K's candidates depend on the direction).
const ParameterTable<Params>& parameter_table(const ConvProblem& problem);

// Per group: C[m][n] = sum over the reduction of A[m][k] * B[k][n].
struct GemmShape {
  int64_t m = 0;          // forward: K/groups; backward-data: C/groups; backward-filter: K/groups
  int64_t n = 0;          // forward: N*P*Q;    backward-data: N*H*W;    backward-filter: (C/groups)*R*S
  int64_t reduction = 0;  // forward: (C/groups)*R*S; backward-data: (K/groups)*R*S; backward-filter: N*P*Q
};
GemmShape gemm_shape(const ConvProblem& problem);

// Local memory of one work-group: two buffers (double buffering) of the A and B tiles, each row padded.
size_t local_bytes(const Params& params);

// Work-groups of one launch of the main kernel (N-tiles x M-tiles x groups x split-K slices).
int64_t work_groups(const ConvProblem& problem, const Params& params);

KernelRecipe make_recipe(const ConvProblem& problem, const Epilogue& epilogue, const Params& params,
                         const DeviceInfo& device);

}  // namespace convtune::implicit_gemm
