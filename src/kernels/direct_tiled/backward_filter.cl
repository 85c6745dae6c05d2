// direct_tiled backward-filter: each work-item computes a TILE_K x TILE_CRS tile of dw (the buffer named w, one
// row of C_PER_GROUP*R*S taps per output channel), reducing over the N*P*Q output positions. SPLIT_NPQ > 1 splits
// that reduction over work-groups: each writes its partial tile to workspace0 and direct_tiled_sum_splits adds them.
#ifndef UNROLL
#define UNROLL 1  // 1: unroll the loop over the positions of a chunk; 0: keep it a loop
#endif
#include "direct_tiled/direct_tiled_common.h"

#ifndef TILE_K
#define TILE_K 4  // output channels of dw per work-item
#endif
#ifndef TILE_CRS
#define TILE_CRS 4  // filter taps (c, r, s flattened) of dw per work-item
#endif
#ifndef THREADS_K
#define THREADS_K 8  // work-group extent along output channels (local axis 1)
#endif
#ifndef THREADS_CRS
#define THREADS_CRS 16  // work-group extent along filter taps (local axis 0)
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1  // 1: stage dy and the x patches of a chunk of positions in local memory
#endif
#ifndef CHUNK_NPQ
#define CHUNK_NPQ 16  // output positions staged per local-memory fill (per unrolled step without it)
#endif
#ifndef SPLIT_NPQ
#define SPLIT_NPQ 1  // work-groups sharing one dw tile's reduction (partials in workspace0)
#endif
#ifndef VECTOR_WIDTH
#define VECTOR_WIDTH 1  // floats per global dy load / dw store, where the row length allows it
#endif

#define CRS (C_PER_GROUP * R * S)
#define PQ (P * Q)
#define NPQ (N * PQ)
#define BLOCK_K (TILE_K * THREADS_K)
#define BLOCK_CRS (TILE_CRS * THREADS_CRS)
#define K_BLOCKS CEIL_DIV(K_PER_GROUP, BLOCK_K)  // per group: a work-group never spans two groups
#define THREADS (THREADS_K * THREADS_CRS)
#define DW_ELEMENTS (K * CRS)
// Positions per split, a whole number of chunks so every vector of positions lies in one slice.
#define SLICE ROUND_UP(CEIL_DIV(NPQ, SPLIT_NPQ), CHUNK_NPQ)

#if USE_LOCAL && VECTOR_WIDTH > 1 && PQ % VECTOR_WIDTH == 0
#define LOAD_WIDTH VECTOR_WIDTH
#else
#define LOAD_WIDTH 1
#endif
#if VECTOR_WIDTH > 1 && CRS % VECTOR_WIDTH == 0 && TILE_CRS % VECTOR_WIDTH == 0
#define STORE_WIDTH VECTOR_WIDTH
#else
#define STORE_WIDTH 1
#endif
#if UNROLL
#define CHUNK_UNROLL PRAGMA_UNROLL
#else
#define CHUNK_UNROLL PRAGMA_NO_UNROLL
#endif

KERNEL void direct_tiled_backward_filter(GLOBAL const float* RESTRICT x, GLOBAL const float* RESTRICT y,
                                         GLOBAL float* RESTRICT out) {
  const int tc = LOCAL_ID(0), tk = LOCAL_ID(1);
  const int crs_block = (int)GROUP_ID(0);
  const int g = (int)(GROUP_ID(1) / K_BLOCKS);
  const int k_block = (int)(GROUP_ID(1) % K_BLOCKS);
  const int split = (int)GROUP_ID(2);
  const int crs0 = crs_block * BLOCK_CRS + tc * TILE_CRS;
  const int k0 = k_block * BLOCK_K + tk * TILE_K;  // within group g
  const int j_begin = split * SLICE;
  const int j_end = MIN_INT(j_begin + SLICE, NPQ);

  float acc[TILE_K][TILE_CRS];
  PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
    PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; ++i) acc[kk][i] = 0.0f;

#if USE_LOCAL
  // Position-major, so a work-item's TILE_K (TILE_CRS) values of one position are adjacent.
  LOCAL_ARRAY float dy_tile[CHUNK_NPQ * BLOCK_K];
  LOCAL_ARRAY float x_tile[CHUNK_NPQ * BLOCK_CRS];
  const int lid = tc + THREADS_CRS * tk;
  const int k_base = k_block * BLOCK_K, crs_base = crs_block * BLOCK_CRS;
  for (int j0 = j_begin; j0 < j_end; j0 += CHUNK_NPQ) {
    BARRIER();  // everyone is done reading the previous chunk
    for (int e = lid; e < BLOCK_K * (CHUNK_NPQ / LOAD_WIDTH); e += THREADS) {
      const int jj = (e % (CHUNK_NPQ / LOAD_WIDTH)) * LOAD_WIDTH;
      const int kk = e / (CHUNK_NPQ / LOAD_WIDTH);
      const int j = j0 + jj;
      // j_end and j are multiples of LOAD_WIDTH, and PQ too, so a vector lies in one image, wholly in or out.
      const bool inside = k_base + kk < K_PER_GROUP && j < j_end;
      const int src = ((j / PQ) * K + g * K_PER_GROUP + k_base + kk) * PQ + j % PQ;
#if LOAD_WIDTH == 4
      const vec4 v = inside ? VLOAD4(y, src) : MAKE_VEC4(0.0f);
      dy_tile[jj * BLOCK_K + kk] = v.x;
      dy_tile[(jj + 1) * BLOCK_K + kk] = v.y;
      dy_tile[(jj + 2) * BLOCK_K + kk] = v.z;
      dy_tile[(jj + 3) * BLOCK_K + kk] = v.w;
#elif LOAD_WIDTH == 2
      const vec2 v = inside ? VLOAD2(y, src) : MAKE_VEC2(0.0f);
      dy_tile[jj * BLOCK_K + kk] = v.x;
      dy_tile[(jj + 1) * BLOCK_K + kk] = v.y;
#else
      dy_tile[jj * BLOCK_K + kk] = inside ? y[src] : 0.0f;
#endif
    }
    // The x patch element of tap crs at position j (im2col on the fly, never stored globally).
    for (int e = lid; e < BLOCK_CRS * CHUNK_NPQ; e += THREADS) {
      const int jj = e % CHUNK_NPQ;
      const int ci = e / CHUNK_NPQ;
      const int j = j0 + jj, crs = crs_base + ci;
      const int c = crs / (R * S), r = (crs / S) % R, s = crs % S;
      const int n = j / PQ, p = (j / Q) % P, q = j % Q;
      const int h = p * STRIDE_H - PAD_H + r * DILATION_H, wc = q * STRIDE_W - PAD_W + s * DILATION_W;
      const bool inside = crs < CRS && j < j_end && h >= 0 && h < H && wc >= 0 && wc < W;
      x_tile[jj * BLOCK_CRS + ci] = inside ? x[((n * C + g * C_PER_GROUP + c) * H + h) * W + wc] : 0.0f;
    }
    BARRIER();
    CHUNK_UNROLL for (int jj = 0; jj < CHUNK_NPQ; ++jj) {
      float a[TILE_K], b[TILE_CRS];
      PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk) a[kk] = dy_tile[jj * BLOCK_K + tk * TILE_K + kk];
      PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; ++i) b[i] = x_tile[jj * BLOCK_CRS + tc * TILE_CRS + i];
      PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
        PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; ++i) acc[kk][i] = FMA(a[kk], b[i], acc[kk][i]);
    }
  }
#else
  // Per-tap offsets, clamped past the end of the filter (those results are never stored).
  int x_off[TILE_CRS], h_off[TILE_CRS], w_off[TILE_CRS];
  PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; ++i) {
    const int crs = MIN_INT(crs0 + i, CRS - 1);
    const int c = crs / (R * S), r = (crs / S) % R, s = crs % S;
    x_off[i] = (g * C_PER_GROUP + c) * H * W;
    h_off[i] = r * DILATION_H - PAD_H;
    w_off[i] = s * DILATION_W - PAD_W;
  }
  int dy_off[TILE_K];
  PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
    dy_off[kk] = (g * K_PER_GROUP + MIN_INT(k0 + kk, K_PER_GROUP - 1)) * PQ;
  // Chunks of CHUNK_NPQ positions give CHUNK_UNROLL a loop of known trip count.
  for (int j0 = j_begin; j0 < j_end; j0 += CHUNK_NPQ) {
    CHUNK_UNROLL for (int jj = 0; jj < CHUNK_NPQ; ++jj) {
      const int j = j0 + jj;
      if (j >= j_end) break;
      const int n = j / PQ, pq = j % PQ, p = pq / Q, q = pq % Q;
      float a[TILE_K], b[TILE_CRS];
      PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk) a[kk] = y[n * K * PQ + dy_off[kk] + pq];
      PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; ++i) {
        const int h = p * STRIDE_H + h_off[i], wc = q * STRIDE_W + w_off[i];
        b[i] = h >= 0 && h < H && wc >= 0 && wc < W ? x[n * C * H * W + x_off[i] + h * W + wc] : 0.0f;
      }
      PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
        PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; ++i) acc[kk][i] = FMA(a[kk], b[i], acc[kk][i]);
    }
  }
#endif

#if SPLIT_NPQ > 1
  GLOBAL float* dst = out + split * DW_ELEMENTS;
#else
  GLOBAL float* dst = out;
#endif
  PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk) {
    if (k0 + kk >= K_PER_GROUP) continue;
    GLOBAL float* dst_k = dst + (g * K_PER_GROUP + k0 + kk) * CRS + crs0;
    PRAGMA_UNROLL for (int i = 0; i < TILE_CRS; i += STORE_WIDTH) {
      if (crs0 + i >= CRS) continue;  // with STORE_WIDTH > 1, CRS % STORE_WIDTH == 0 keeps the vector inside
#if STORE_WIDTH == 4
      VSTORE4(MAKE_FLOAT4(acc[kk][i], acc[kk][i + 1], acc[kk][i + 2], acc[kk][i + 3]), dst_k, i);
#elif STORE_WIDTH == 2
      VSTORE2(MAKE_FLOAT2(acc[kk][i], acc[kk][i + 1]), dst_k, i);
#else
      dst_k[i] = acc[kk][i];
#endif
    }
  }
}

#if SPLIT_NPQ > 1
// dw = the sum of the SPLIT_NPQ partial filters in workspace0; every element of dw is written once.
KERNEL void direct_tiled_sum_splits(GLOBAL const float* RESTRICT partial, GLOBAL float* RESTRICT dw) {
  const long i = GLOBAL_ID(0);
  if (i >= DW_ELEMENTS) return;
  float sum = 0.0f;
  for (int z = 0; z < SPLIT_NPQ; ++z) sum += partial[z * DW_ELEMENTS + i];
  dw[i] = sum;
}
#endif
