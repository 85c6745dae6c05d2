// The gemm family: for every batch item b, C_b = op(A_b) * op(B_b) (or C_b += ...), row-major matrices with
// leading dimensions and batch strides, the reduction optionally split into SPLIT_K slices of SLICE_K whose
// partial products gemm_splitk_reduce sums. The layout macros gemm/gemm.cl reads are derived here from the host's
// numeric defines (src/families/gemm/gemm_family.cpp); work-group axis 2 runs over batch items x slices.
#include "common/compat.h"

#ifndef GEMM_M  // defaults only let the file compile alone
#define GEMM_M 64
#define GEMM_N 64
#define K_TOTAL 64
#define SLICE_K 32
#define SPLIT_K 2
#define BATCH 2
#define A_TRANS 0
#define B_TRANS 0
#define LDA 64
#define LDB 64
#define LDC 64
#define STRIDE_A 4096
#define STRIDE_B 4096
#define STRIDE_C 4096
#define A_VECTOR 1
#define B_VECTOR 1
#define ACCUMULATE 0
#define REDUCE_ACCUMULATE 0
#endif

#define BATCH_ITEM (group / SPLIT_K)
#define SLICE (group % SPLIT_K)
// The last slice may be shorter; every slice starts inside the reduction (the family's constraints).
#define GEMM_K (K_TOTAL - SLICE * SLICE_K < SLICE_K ? K_TOTAL - SLICE * SLICE_K : SLICE_K)

#define A_LD LDA
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE (BATCH_ITEM * STRIDE_A + SLICE * SLICE_K * (A_TRANS ? LDA : 1))
#define B_LD LDB
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE (BATCH_ITEM * STRIDE_B + SLICE * SLICE_K * (B_TRANS ? 1 : LDB))
#define C_SEG 0
#define C_SEG_STRIDE 0
#if SPLIT_K > 1
// Partials of every (batch item, slice) packed GEMM_M x GEMM_N in the workspace.
#define C_LD GEMM_N
#define C_BASE (group * GEMM_M * GEMM_N)
#else
#define C_LD LDC
#define C_BASE (BATCH_ITEM * STRIDE_C)
#endif

#include "gemm/gemm.cl"

#if SPLIT_K > 1
// One work-item per element of C: the sum of its SPLIT_K partials, in slice order (deterministic).
KERNEL void gemm_splitk_reduce(GLOBAL const float* RESTRICT partials, GLOBAL float* RESTRICT c) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)BATCH * GEMM_M * GEMM_N) return;
  const int b = (int)(i / (GEMM_M * GEMM_N)), mn = (int)(i % (GEMM_M * GEMM_N));
  const int m = mn / GEMM_N, n = mn % GEMM_N;
  GLOBAL const float* p = partials + (long)b * SPLIT_K * GEMM_M * GEMM_N + mn;
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += p[(long)s * GEMM_M * GEMM_N];
  GLOBAL float* out = c + (long)b * STRIDE_C + (long)m * LDC + n;
#if REDUCE_ACCUMULATE
  *out += sum;
#else
  *out = sum;
#endif
}
#endif
