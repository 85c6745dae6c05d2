// The gemm_tc family: batched, strided row-major C = op(A) op(B) (or C += ...) on TF32 tensor cores
// (tc_common.h), the reduction optionally split into SPLIT_K slices of SLICE_K whose partial products
// tc_splitk_reduce sums. Defines come from src/families/gemm_tc/gemm_tc_family.cpp; work-group axis 2 runs over
// batch items x slices, as in gemm/gemm_family.cl.
//
// Tiles are copied global -> shared memory by cp.async, A_VECTOR (B_VECTOR) floats at a time along the operand's
// contiguous dimension: 4 where the host found every row start, row length and batch stride a multiple of 4.
// Every shape and parameter is a define from the family (the file does not compile alone).
#include "tensor_core/tc_common.h"

// Copies an OUTER x INNER tile (INNER contiguous in global and shared memory) whose first outer_valid rows and
// inner_valid columns lie inside the matrix, from src (leading dimension ld) to dst (row pitch `pitch`), VEC
// floats per copy; what lies outside is zero-filled.
#define TC_COPY_TILE(dst, pitch, src, ld, OUTER, INNER, VEC, outer_valid, inner_valid)                  \
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

KERNEL TC_ATTRIBUTES void gemm_tc(const GLOBAL float* RESTRICT a, const GLOBAL float* RESTRICT b,
                                  GLOBAL float* RESTRICT c) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * TILE_N;
  const int m0 = (int)GROUP_ID(1) * TILE_M;
  const int group = (int)GROUP_ID(2);
  const int batch_item = group / SPLIT_K, slice = group % SPLIT_K;
  // This slice's reduction: SLICE_K elements (a whole number of tiles), the last one shorter.
  const int k_begin = slice * SLICE_K;
  const int k_length = K_TOTAL - k_begin < SLICE_K ? K_TOTAL - k_begin : SLICE_K;
  const int ntiles = (k_length + TILE_K - 1) / TILE_K;
  const int m_valid = GEMM_M - m0 < TILE_M ? GEMM_M - m0 : TILE_M;
  const int n_valid = GEMM_N - n0 < TILE_N ? GEMM_N - n0 : TILE_N;
  const GLOBAL float* a_batch = a + (long)batch_item * STRIDE_A;
  const GLOBAL float* b_batch = b + (long)batch_item * STRIDE_B;

  // Tile `tile` of op(A) (rows m0.., reduction k) and op(B) (reduction k, columns n0..) into as, bs.
#if A_TRANS
#define TC_LOAD_A(as, k, k_valid) \
  TC_COPY_TILE(as, TC_A_PITCH, a_batch + (long)(k) * LDA + m0, LDA, TILE_K, TILE_M, A_VECTOR, k_valid, m_valid)
#else
#define TC_LOAD_A(as, k, k_valid) \
  TC_COPY_TILE(as, TC_A_PITCH, a_batch + (long)m0 * LDA + (k), LDA, TILE_M, TILE_K, A_VECTOR, m_valid, k_valid)
#endif
#if B_TRANS
#define TC_LOAD_B(bs, k, k_valid) \
  TC_COPY_TILE(bs, TC_B_PITCH, b_batch + (long)n0 * LDB + (k), LDB, TILE_N, TILE_K, B_VECTOR, n_valid, k_valid)
#else
#define TC_LOAD_B(bs, k, k_valid) \
  TC_COPY_TILE(bs, TC_B_PITCH, b_batch + (long)(k) * LDB + n0, LDB, TILE_K, TILE_N, B_VECTOR, k_valid, n_valid)
#endif
#define TC_LOAD_STAGE(as, bs, tile)                                                        \
  {                                                                                        \
    const int k_ = k_begin + (tile) * TILE_K;                                              \
    const int k_valid_ = k_begin + k_length - k_ < TILE_K ? k_begin + k_length - k_ : TILE_K; \
    TC_LOAD_A(as, k_, k_valid_);                                                           \
    TC_LOAD_B(bs, k_, k_valid_);                                                           \
  }

#include "tensor_core/tc_mainloop.h"

#if SPLIT_K > 1
  // Partials packed GEMM_M x GEMM_N in the workspace, slice-major ([slice][batch item]) as tc_splitk_reduce reads
  // them.
  GLOBAL float* out = c + ((long)slice * BATCH + batch_item) * GEMM_M * GEMM_N;
#define TC_OUT_LD GEMM_N
#else
  GLOBAL float* out = c + (long)batch_item * STRIDE_C;
#define TC_OUT_LD LDC
#endif
  TC_UNROLL
  for (int i = 0; i < TC_MI; ++i)
    TC_UNROLL
    for (int j = 0; j < TC_NI; ++j)
      TC_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + TC_ACC_ROW(i, r), n = n0 + TC_ACC_COL(j, r);
        if (m < GEMM_M && n < GEMM_N) {
          GLOBAL float* p = out + (long)m * TC_OUT_LD + n;
#if ACCUMULATE && SPLIT_K == 1
          *p += acc[i][j][r];
#else
          *p = acc[i][j][r];
#endif
        }
      }
}

#define TC_REDUCE_ELEMENTS ((long)BATCH * GEMM_M * GEMM_N)
#define TC_REDUCE_ARGS GLOBAL float* RESTRICT c
#if REDUCE_ACCUMULATE
#define TC_REDUCE_STORE(i, sum) c[(i) / (GEMM_M * GEMM_N) * STRIDE_C + (i) % (GEMM_M * GEMM_N) / GEMM_N * LDC + (i) % GEMM_N] += (sum)
#else
#define TC_REDUCE_STORE(i, sum) c[(i) / (GEMM_M * GEMM_N) * STRIDE_C + (i) % (GEMM_M * GEMM_N) / GEMM_N * LDC + (i) % GEMM_N] = (sum)
#endif
#include "tensor_core/tc_splitk_reduce.h"
