// The gemm_wgmma family: batched, strided row-major C = A B^T (or C += ...) with A (M x K) and B (N x K) both
// K-contiguous, on Hopper's wgmma (wgmma.h, wg_mainloop.h): BF16, FP16 or TF32 (FP32 storage) operands, FP32
// accumulators, C in the operands' type. SPLIT_K > 1 writes FP32 partials (slice-major) that wgmma_splitk_reduce sums in
// order and rounds once. Grid: x N-tiles, y M-tiles, z batch items x slices. Defines from
// src/families/gemm_wgmma/gemm_wgmma_family.cpp; every leading dimension, batch stride and K is a multiple of
// WG_CHUNK (the family's support rule), so every 16-byte copy is aligned and whole.
#include "tensor_core/wgmma.h"

KERNEL __launch_bounds__(WG_THREADS, 1) void gemm_wgmma(const wg_elem* RESTRICT a, const wg_elem* RESTRICT b,
#if SPLIT_K > 1
                                                       float* RESTRICT c
#else
                                                       wg_elem* RESTRICT c
#endif
) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int z = (int)GROUP_ID(2);
  const int batch_item = z / SPLIT_K, slice = z % SPLIT_K;
  const int k_begin = slice * SLICE_K;  // SLICE_K: a multiple of WG_TILE_K
  const int k_length = K_TOTAL - k_begin < SLICE_K ? K_TOTAL - k_begin : SLICE_K;
  const int ntiles = (k_length + WG_TILE_K - 1) / WG_TILE_K;
  const wg_elem* a_rows = a + (long)batch_item * STRIDE_A + (long)m0 * LDA + k_begin;
  const wg_elem* b_rows = b + (long)batch_item * STRIDE_B + (long)n0 * LDB + k_begin;

  // Tile `tile`: A rows m0.., B rows n0.., reduction columns k_begin + tile * WG_TILE_K: 8 chunks of 16 bytes a row.
#define WG_LOAD(stage, tile)                                                                    \
  {                                                                                             \
    const int kt_ = (tile) * WG_TILE_K;                                                         \
    PRAGMA_UNROLL for (int e = 0; e < (WG_BLOCK_M * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {    \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, ch = idx & 7;                       \
      if ((WG_BLOCK_M * 8) % WG_THREADS == 0 || row < WG_BLOCK_M) {                             \
        const int k_ = kt_ + ch * WG_CHUNK;                                                     \
        const bool ok = m0 + row < GEMM_M && k_ < k_length;                                     \
        wg_copy16((stage) + wg_swizzle(row, ch), a_rows + (ok ? (long)row * LDA + k_ : 0), ok); \
      }                                                                                         \
    }                                                                                           \
    PRAGMA_UNROLL for (int e = 0; e < (BLOCK_N * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {       \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, ch = idx & 7;                       \
      if ((BLOCK_N * 8) % WG_THREADS == 0 || row < BLOCK_N) {                                   \
        const int k_ = kt_ + ch * WG_CHUNK;                                                     \
        const bool ok = n0 + row < GEMM_N && k_ < k_length;                                     \
        wg_copy16((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, ch),                             \
                  b_rows + (ok ? (long)row * LDB + k_ : 0), ok);                                \
      }                                                                                         \
    }                                                                                           \
  }

#include "tensor_core/wg_mainloop.h"

  PRAGMA_UNROLL
  for (int j = 0; j < BLOCK_N / 8; ++j) {
    PRAGMA_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int m = m0 + WG_ACC_ROW(r), n = n0 + WG_ACC_COL(j, r);
      if (m < GEMM_M && n < GEMM_N) {
#if SPLIT_K > 1
        c[((long)slice * BATCH + batch_item) * GEMM_M * GEMM_N + (long)m * GEMM_N + n] = acc[4 * j + r];
#else
        wg_elem* p = c + (long)batch_item * STRIDE_C + (long)m * LDC + n;
#if ACCUMULATE
        *p = WG_FROM_FLOAT(wg_to_float(*p) + acc[4 * j + r]);
#else
        *p = WG_FROM_FLOAT(acc[4 * j + r]);
#endif
#endif
      }
    }
  }
}

#if SPLIT_K > 1
// The slices' FP32 partials summed in order (deterministic), added to C where accumulating, rounded once.
KERNEL void wgmma_splitk_reduce(const float* RESTRICT partial, wg_elem* RESTRICT c) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)BATCH * GEMM_M * GEMM_N) return;
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(long)s * BATCH * GEMM_M * GEMM_N + i];
  wg_elem* p = c + i / (GEMM_M * GEMM_N) * STRIDE_C + i % (GEMM_M * GEMM_N) / GEMM_N * LDC + i % GEMM_N;
#if ACCUMULATE
  sum += wg_to_float(*p);
#endif
  *p = WG_FROM_FLOAT(sum);
}
#endif
