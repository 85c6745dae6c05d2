// implicit_gemm internals shared by its spec (parameters, constraints, defaults) and its recipe (launches):
// the GEMM each direction becomes, and the sizes a configuration implies.
#pragma once

#include <cstdint>

#include "convtune/kernel_family.h"

namespace convtune::implicit_gemm {

// Per group: C[m][n] = sum over the reduction of A[m][k] * B[k][n].
struct GemmShape {
  int64_t m = 0;          // forward: K/groups; backward-data: C/groups; backward-filter: K/groups
  int64_t n = 0;          // forward: N*P*Q;    backward-data: N*H*W;    backward-filter: (C/groups)*R*S
  int64_t reduction = 0;  // forward: (C/groups)*R*S; backward-data: (K/groups)*R*S; backward-filter: N*P*Q
};
GemmShape gemm_shape(const ConvProblem& problem);



// Local memory of one work-group: two buffers (double buffering) of the A and B tiles, each row padded.
size_t local_bytes(const Config& config);

// Work-groups of one launch of the main kernel (N-tiles x M-tiles x groups x split-K slices).
int64_t work_groups(const ConvProblem& problem, const Config& config);

KernelRecipe make_recipe(const ConvProblem& problem, const Epilogue& epilogue, const Config& config,
                         const DeviceInfo& device);

}  // namespace convtune::implicit_gemm
