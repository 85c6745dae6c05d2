// The gemm_tc family's 16-bit kernel: batched, strided row-major C = op(A) op(B) (or C += ...) with A, B and C in
// BF16 or FP16 (ELEM_BF16), on tensor cores with FP32 accumulation (tc16_common.h, tc16_mainloop.h); the reduction
// optionally split into SPLIT_K slices of SLICE_K whose FP32 partial products tc_splitk_reduce sums and rounds. The
// defines come from src/families/gemm_tc/gemm_tc_family.cpp; work-group axis 2 runs over batch items x slices.
//
// Each operand's tile is copied A_VECTOR (B_VECTOR) elements at a time along its contiguous dimension: 8 (16-byte
// cp.async) or 2 (4-byte cp.async) where the host found every row start, row length and batch stride a multiple of
// it, else one element at a time through registers.
#include "tensor_core/tc16_common.h"

#define TC16_COPIES(OUTER, INNER, VEC) (((OUTER) * (INNER) / (VEC) + TC_THREADS - 1) / TC_THREADS)

// Starts the copies of an OUTER x INNER tile (INNER contiguous in global and shared memory) whose first outer_valid
// rows and inner_valid columns lie inside the matrix, from src (leading dimension ld) to dst (row pitch `pitch`):
// VEC > 1 by cp.async, VEC == 1 into regs[] (zero outside the matrix).
#define TC16_FETCH_TILE(dst, pitch, src, ld, OUTER, INNER, VEC, outer_valid, inner_valid, regs)         \
  {                                                                                                    \
    TC_UNROLL for (int e = 0; e < TC16_COPIES(OUTER, INNER, VEC); ++e) {                               \
      const int idx = tid + e * TC_THREADS;                                                            \
      if (((OUTER) * (INNER) / (VEC)) % TC_THREADS == 0 || idx < (OUTER) * (INNER) / (VEC)) {          \
        const int o = idx / ((INNER) / (VEC)), in = idx % ((INNER) / (VEC)) * (VEC);                   \
        const bool ok = o < (outer_valid) && in < (inner_valid);                                       \
        const GLOBAL tc_h16* s_ = (src) + (ok ? (long)o * (ld) + in : 0);                              \
        if ((VEC) > 1) tc16_copy_bytes((dst) + o * (pitch) + in, s_, ok, (VEC));                       \
        else regs[(VEC) > 1 ? 0 : e] = ok ? *s_ : (tc_h16)0;                                           \
      }                                                                                                \
    }                                                                                                  \
  }
// Stores regs[] where TC16_FETCH_TILE would have copied them (VEC == 1 only).
#define TC16_PUT_TILE(dst, pitch, OUTER, INNER, regs)                                                  \
  {                                                                                                    \
    TC_UNROLL for (int e = 0; e < TC16_COPIES(OUTER, INNER, 1); ++e) {                                 \
      const int idx = tid + e * TC_THREADS;                                                            \
      if (((OUTER) * (INNER)) % TC_THREADS == 0 || idx < (OUTER) * (INNER))                            \
        (dst)[idx / (INNER) * (pitch) + idx % (INNER)] = regs[e];                                      \
    }                                                                                                  \
  }

KERNEL TC_ATTRIBUTES void gemm_tc16(const GLOBAL tc_h16* RESTRICT a, const GLOBAL tc_h16* RESTRICT b,
#if SPLIT_K > 1
                                    GLOBAL float* RESTRICT c
#else
                                    GLOBAL tc_h16* RESTRICT c
#endif
) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * TILE_N;
  const int m0 = (int)GROUP_ID(1) * TILE_M;
  const int group = (int)GROUP_ID(2);
  const int batch_item = group / SPLIT_K, slice = group % SPLIT_K;
  const int k_begin = slice * SLICE_K;
  const int k_length = K_TOTAL - k_begin < SLICE_K ? K_TOTAL - k_begin : SLICE_K;
  const int ntiles = (k_length + TILE_K - 1) / TILE_K;
  const int m_valid = GEMM_M - m0 < TILE_M ? GEMM_M - m0 : TILE_M;
  const int n_valid = GEMM_N - n0 < TILE_N ? GEMM_N - n0 : TILE_N;
  const GLOBAL tc_h16* a_batch = a + (long)batch_item * STRIDE_A;
  const GLOBAL tc_h16* b_batch = b + (long)batch_item * STRIDE_B;
  // Registers of the element-wise copies (one per element a thread copies; unused where the operand vectorises).
  tc_h16 regs_a[A_VECTOR == 1 ? TC16_COPIES(TILE_M, TILE_K, 1) : 1];
  tc_h16 regs_b[B_VECTOR == 1 ? TC16_COPIES(TILE_N, TILE_K, 1) : 1];
  (void)regs_a, (void)regs_b;

#if A_TRANS
#define TC_FETCH_A(as, k, k_valid) \
  TC16_FETCH_TILE(as, TC_A_PITCH, a_batch + (long)(k) * LDA + m0, LDA, TILE_K, TILE_M, A_VECTOR, k_valid, m_valid, regs_a)
#define TC_PUT_A(as) TC16_PUT_TILE(as, TC_A_PITCH, TILE_K, TILE_M, regs_a)
#else
#define TC_FETCH_A(as, k, k_valid) \
  TC16_FETCH_TILE(as, TC_A_PITCH, a_batch + (long)m0 * LDA + (k), LDA, TILE_M, TILE_K, A_VECTOR, m_valid, k_valid, regs_a)
#define TC_PUT_A(as) TC16_PUT_TILE(as, TC_A_PITCH, TILE_M, TILE_K, regs_a)
#endif
#if B_TRANS
#define TC_FETCH_B(bs, k, k_valid) \
  TC16_FETCH_TILE(bs, TC_B_PITCH, b_batch + (long)n0 * LDB + (k), LDB, TILE_N, TILE_K, B_VECTOR, n_valid, k_valid, regs_b)
#define TC_PUT_B(bs) TC16_PUT_TILE(bs, TC_B_PITCH, TILE_N, TILE_K, regs_b)
#else
#define TC_FETCH_B(bs, k, k_valid) \
  TC16_FETCH_TILE(bs, TC_B_PITCH, b_batch + (long)(k) * LDB + n0, LDB, TILE_K, TILE_N, B_VECTOR, k_valid, n_valid, regs_b)
#define TC_PUT_B(bs) TC16_PUT_TILE(bs, TC_B_PITCH, TILE_K, TILE_N, regs_b)
#endif
#define TC_FETCH(as, bs, tile)                                                                  \
  {                                                                                             \
    const int k_ = k_begin + (tile) * TILE_K;                                                   \
    const int k_valid_ = k_begin + k_length - k_ < TILE_K ? k_begin + k_length - k_ : TILE_K;   \
    TC_FETCH_A(as, k_, k_valid_);                                                               \
    TC_FETCH_B(bs, k_, k_valid_);                                                               \
  }
#if A_VECTOR == 1 && B_VECTOR == 1
#define TC_PUT(as, bs) { TC_PUT_A(as); TC_PUT_B(bs); }
#elif A_VECTOR == 1
#define TC_PUT(as, bs) TC_PUT_A(as)
#elif B_VECTOR == 1
#define TC_PUT(as, bs) TC_PUT_B(bs)
#else
#define TC_PUT(as, bs)
#endif

#include "tensor_core/tc16_mainloop.h"

#if SPLIT_K > 1
  // FP32 partials packed GEMM_M x GEMM_N in the workspace, slice-major ([slice][batch item]).
  GLOBAL float* out = c + ((long)slice * BATCH + batch_item) * GEMM_M * GEMM_N;
#define TC_OUT_LD GEMM_N
#else
  GLOBAL tc_h16* out = c + (long)batch_item * STRIDE_C;
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
#if SPLIT_K > 1
          out[(long)m * TC_OUT_LD + n] = acc[i][j][r];
#elif ACCUMULATE
          GLOBAL tc_h16* p = out + (long)m * TC_OUT_LD + n;
          *p = tc16_from_float(tc16_to_float(*p) + acc[i][j][r]);
#else
          out[(long)m * TC_OUT_LD + n] = tc16_from_float(acc[i][j][r]);
#endif
        }
      }
}

#if SPLIT_K > 1
// The slices' FP32 partials summed in order (deterministic), added to C's value where accumulating, rounded once.
KERNEL void tc_splitk_reduce(const GLOBAL float* RESTRICT partial, GLOBAL tc_h16* RESTRICT c) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)BATCH * GEMM_M * GEMM_N) return;
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(long)s * BATCH * GEMM_M * GEMM_N + i];
  GLOBAL tc_h16* p = c + i / (GEMM_M * GEMM_N) * STRIDE_C + i % (GEMM_M * GEMM_N) / GEMM_N * LDC + i % GEMM_N;
#if REDUCE_ACCUMULATE
  sum += tc16_to_float(*p);
#endif
  *p = tc16_from_float(sum);
}
#endif
