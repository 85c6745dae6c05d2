// A batched GEMM inside one buffer (the workspace) on TF32 tensor cores, for the families that transform their
// operands there first (fft_tc): the gemm_tc main loop (tc_mainloop.h) over the blocks the including file's layout
// macros describe, as gemm.cl reads them: A_BASE, B_BASE, C_BASE (offsets into the workspace, functions of `group`,
// work-group axis 2), GEMM_M, GEMM_N, GEMM_K, A_LD, B_LD, C_LD, B_TRANS and ACCUMULATE. A is stored row-major
// GEMM_M x GEMM_K (A_TRANS 0: K-contiguous tiles); B is GEMM_K x GEMM_N row-major, or GEMM_N x GEMM_K with B_TRANS.
// A_VECTOR and B_VECTOR are 4 where the host found the rows' lengths and pitches multiples of 4 (16-byte copies),
// else 1. The kernel is named TC_WORKSPACE_GEMM_NAME. Include after tc_common.h and the layout macros.
#if A_TRANS
#error "the workspace GEMM reads A untransposed (K-contiguous A tiles)"
#endif

// An OUTER x INNER tile (INNER contiguous in global and shared memory) whose first outer_valid rows and inner_valid
// columns lie inside the matrix, from src (leading dimension ld) to dst (row pitch `pitch`), VEC (1 or 4) floats per
// copy, zero-filled outside (gemm_tc.cl's TC_COPY_TILE, which cannot be included from that kernel file).
#define TCW_COPY_TILE(dst, pitch, src, ld, OUTER, INNER, VEC, outer_valid, inner_valid)               \
  {                                                                                                    \
    TC_UNROLL for (int e = 0; e < ((OUTER) * (INNER) / (VEC) + TC_THREADS - 1) / TC_THREADS; ++e) { \
      const int idx = tid + e * TC_THREADS;                                                            \
      if (((OUTER) * (INNER) / (VEC)) % TC_THREADS == 0 || idx < (OUTER) * (INNER) / (VEC)) {          \
        const int o = idx / ((INNER) / (VEC)), in = idx % ((INNER) / (VEC)) * (VEC);                   \
        const bool ok = o < (outer_valid) && in < (inner_valid);                                       \
        LOCAL float* d_ = (dst) + o * (pitch) + in;                                                    \
        const GLOBAL float* s_ = (src) + (ok ? (long)o * (ld) + in : 0);                               \
        if ((VEC) == 4) tc_copy16(d_, s_, ok);                                                         \
        else tc_copy4(d_, s_, ok);                                                                     \
      }                                                                                                \
    }                                                                                                  \
  }

KERNEL TC_ATTRIBUTES void TC_WORKSPACE_GEMM_NAME(GLOBAL float* RESTRICT workspace) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * TILE_N;
  const int m0 = (int)GROUP_ID(1) * TILE_M;
  const int group = (int)GROUP_ID(2);  // read by the layout macros A_BASE, B_BASE, C_BASE
  const int ntiles = (GEMM_K + TILE_K - 1) / TILE_K;
  const int m_valid = GEMM_M - m0 < TILE_M ? GEMM_M - m0 : TILE_M;
  const int n_valid = GEMM_N - n0 < TILE_N ? GEMM_N - n0 : TILE_N;
  const GLOBAL float* a = workspace + A_BASE;
  const GLOBAL float* b = workspace + B_BASE;

#define TC_LOAD_A(as, k, k_valid) \
  TCW_COPY_TILE(as, TC_A_PITCH, a + (long)m0 * A_LD + (k), A_LD, TILE_M, TILE_K, A_VECTOR, m_valid, k_valid)
#if B_TRANS
#define TC_LOAD_B(bs, k, k_valid) \
  TCW_COPY_TILE(bs, TC_B_PITCH, b + (long)n0 * B_LD + (k), B_LD, TILE_N, TILE_K, B_VECTOR, n_valid, k_valid)
#else
#define TC_LOAD_B(bs, k, k_valid) \
  TCW_COPY_TILE(bs, TC_B_PITCH, b + (long)(k) * B_LD + n0, B_LD, TILE_K, TILE_N, B_VECTOR, k_valid, n_valid)
#endif
#define TC_LOAD_STAGE(as, bs, tile)                                           \
  {                                                                           \
    const int k_ = (tile) * TILE_K;                                           \
    const int k_valid_ = GEMM_K - k_ < TILE_K ? GEMM_K - k_ : TILE_K;         \
    TC_LOAD_A(as, k_, k_valid_);                                              \
    TC_LOAD_B(bs, k_, k_valid_);                                              \
  }

#include "tensor_core/tc_mainloop.h"

  GLOBAL float* out = workspace + C_BASE;
  TC_UNROLL
  for (int i = 0; i < TC_MI; ++i)
    TC_UNROLL
    for (int j = 0; j < TC_NI; ++j)
      TC_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + TC_ACC_ROW(i, r), n = n0 + TC_ACC_COL(j, r);
        if (m < GEMM_M && n < GEMM_N) {
#if ACCUMULATE
          out[(long)m * C_LD + n] += acc[i][j][r];
#else
          out[(long)m * C_LD + n] = acc[i][j][r];
#endif
        }
      }
}
