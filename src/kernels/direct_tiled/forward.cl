// direct_tiled forward (seed 000): each work-item computes TILE_K x TILE_P x TILE_Q outputs of y, the work-group's
// input tile with its filter halo staged in local memory per chunk of input channels; bias, ReLU and a 2x2
// max-pool are fused so the pre-pool tensor never reaches global memory.
#include "direct_tiled/direct_tiled_common.h"

// Tile sizes count outputs of y as written (pooled outputs when POOL is 2, as in seed 000's h_tile/w_tile):
// with pooling a work-item computes a (2*TILE_P) x (2*TILE_Q) pre-pool tile and writes TILE_P x TILE_Q maxima.
#ifndef TILE_K
#define TILE_K 1  // output channels per work-item
#endif
#ifndef TILE_P
#define TILE_P 2  // output rows per work-item
#endif
#ifndef TILE_Q
#define TILE_Q 8  // output columns per work-item
#endif
#ifndef THREADS_K
#define THREADS_K 16  // work-group extent along output channels (local axis 2)
#endif
#ifndef THREADS_P
#define THREADS_P 2  // work-group extent along rows (local axis 1)
#endif
#ifndef THREADS_Q
#define THREADS_Q 2  // work-group extent along columns (local axis 0)
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1  // 1: stage the input tile + halo in local memory; 0: read x from global memory
#endif
#ifndef CHUNK_C
#define CHUNK_C 4  // input channels staged per local-memory fill
#endif
#ifndef VECTOR_WIDTH
#define VECTOR_WIDTH 1  // floats per global load/store along columns, where the row length allows it
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0  // add bias[k]
#endif
#ifndef APPLY_RELU
#define APPLY_RELU 0  // max(0, .) after the bias
#endif
#ifndef POOL
#define POOL 1  // 2: 2x2 max-pool with stride 2 after ReLU (y is P/2 x Q/2, floor)
#endif

#define OUT_P (P / POOL)
#define OUT_Q (Q / POOL)
#define PRE_P (TILE_P * POOL)  // pre-pool rows a work-item computes
#define PRE_Q (TILE_Q * POOL)
#define BLOCK_K (TILE_K * THREADS_K)
#define BLOCK_P (PRE_P * THREADS_P)
#define BLOCK_Q (PRE_Q * THREADS_Q)
#define Q_BLOCKS CEIL_DIV(OUT_Q, TILE_Q * THREADS_Q)
#define K_BLOCKS CEIL_DIV(K_PER_GROUP, BLOCK_K)  // per group: a work-group never spans two groups
#define THREADS (THREADS_K * THREADS_P * THREADS_Q)
#define FILTER_SIZE (R * S)

// A vector never straddles a row end only when the row length is a multiple of the width.
#if VECTOR_WIDTH > 1 && W % VECTOR_WIDTH == 0
#define LOAD_WIDTH VECTOR_WIDTH
#else
#define LOAD_WIDTH 1
#endif
#if VECTOR_WIDTH > 1 && OUT_Q % VECTOR_WIDTH == 0 && TILE_Q % VECTOR_WIDTH == 0
#define STORE_WIDTH VECTOR_WIDTH
#else
#define STORE_WIDTH 1
#endif

// The staged input region of one channel: the block's pre-pool outputs plus the filter halo. Its first column is
// aligned down to LOAD_WIDTH (so vector loads stay aligned and wholly inside or outside the row), hence the slack.
#define IN_TILE_H ((BLOCK_P - 1) * STRIDE_H + (R - 1) * DILATION_H + 1)
#define IN_TILE_W ((BLOCK_Q - 1) * STRIDE_W + (S - 1) * DILATION_W + 1)
#define LOCAL_ROW ROUND_UP(IN_TILE_W + LOAD_WIDTH - 1, LOAD_WIDTH)
#define LOCAL_VECTORS_PER_ROW (LOCAL_ROW / LOAD_WIDTH)
// Input columns one work-item's PRE_Q outputs read across the S taps of a filter row.
#define ROW_SPAN ((PRE_Q - 1) * STRIDE_W + (S - 1) * DILATION_W + 1)

#if APPLY_RELU
#define ACTIVATE(v) ((v) > 0.0f ? (v) : 0.0f)
#else
#define ACTIVATE(v) (v)
#endif
#define MAX2(a, b) ((a) > (b) ? (a) : (b))

KERNEL void direct_tiled_forward(GLOBAL const float* RESTRICT x, GLOBAL const float* RESTRICT w,
                                 GLOBAL float* RESTRICT y
#if HAS_BIAS
                                 , GLOBAL const float* RESTRICT bias
#endif
) {
  const int tq = LOCAL_ID(0), tp = LOCAL_ID(1), tk = LOCAL_ID(2);
  const int n = (int)(GROUP_ID(0) / Q_BLOCKS);
  const int q_block = (int)(GROUP_ID(0) % Q_BLOCKS);
  const int p_block = (int)GROUP_ID(1);
  const int g = (int)(GROUP_ID(2) / K_BLOCKS);
  const int k_block = (int)(GROUP_ID(2) % K_BLOCKS);
  const int p0 = p_block * BLOCK_P + tp * PRE_P;  // first pre-pool row of this work-item
  const int q0 = q_block * BLOCK_Q + tq * PRE_Q;
  const int k0 = k_block * BLOCK_K + tk * TILE_K;  // first output channel, within group g

  float acc[TILE_K][PRE_P][PRE_Q];
  PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
    PRAGMA_UNROLL for (int i = 0; i < PRE_P; ++i)
      PRAGMA_UNROLL for (int j = 0; j < PRE_Q; ++j) acc[kk][i][j] = 0.0f;

  // Channels past the group's end are clamped so no read leaves w; their results are never stored.
  int w_row[TILE_K];
  PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
    w_row[kk] = (g * K_PER_GROUP + MIN_INT(k0 + kk, K_PER_GROUP - 1)) * C_PER_GROUP * FILTER_SIZE;
  GLOBAL const float* x_n = x + (n * C + g * C_PER_GROUP) * H * W;

#if USE_LOCAL
  LOCAL_ARRAY float tile[CHUNK_C * IN_TILE_H * LOCAL_ROW];
  const int h_first = p_block * BLOCK_P * STRIDE_H - PAD_H;
  const int w_start = q_block * BLOCK_Q * STRIDE_W - PAD_W;
  const int w_first = ALIGN_DOWN(w_start, LOAD_WIDTH);
  const int lid = tq + THREADS_Q * (tp + THREADS_P * tk);
  // This work-item's first input of the staged tile.
  const int my_origin = (tp * PRE_P * STRIDE_H) * LOCAL_ROW + (w_start - w_first) + tq * PRE_Q * STRIDE_W;
  for (int c0 = 0; c0 < C_PER_GROUP; c0 += CHUNK_C) {
    BARRIER();  // everyone is done reading the previous chunk
    // Flat index over the chunk, so any work-group shape fills any tile; consecutive work-items read
    // consecutive columns (coalesced).
    for (int e = lid; e < CHUNK_C * IN_TILE_H * LOCAL_VECTORS_PER_ROW; e += THREADS) {
      const int col = (e % LOCAL_VECTORS_PER_ROW) * LOAD_WIDTH;
      const int row = (e / LOCAL_VECTORS_PER_ROW) % IN_TILE_H;
      const int cc = e / (LOCAL_VECTORS_PER_ROW * IN_TILE_H);
      const int h = h_first + row, wc = w_first + col;
      const bool inside = c0 + cc < C_PER_GROUP && h >= 0 && h < H && wc >= 0 && wc < W;
      const int src = ((c0 + cc) * H + h) * W + wc;
      LOCAL float* dst = tile + (cc * IN_TILE_H + row) * LOCAL_ROW + col;
#if LOAD_WIDTH == 4
      const vec4 v = inside ? VLOAD4(x_n, src) : MAKE_VEC4(0.0f);
      dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
#elif LOAD_WIDTH == 2
      const vec2 v = inside ? VLOAD2(x_n, src) : MAKE_VEC2(0.0f);
      dst[0] = v.x; dst[1] = v.y;
#else
      dst[0] = inside ? x_n[src] : 0.0f;
#endif
    }
    BARRIER();
    for (int cc = 0; cc < CHUNK_C; ++cc) {
#if C_PER_GROUP % CHUNK_C != 0
      if (c0 + cc >= C_PER_GROUP) break;
#endif
      const int c = c0 + cc;
      LOCAL const float* x_c = tile + cc * IN_TILE_H * LOCAL_ROW + my_origin;
#else  // without local memory the same body below runs over every channel, reading x directly
  for (int c = 0; c < C_PER_GROUP; ++c) {
    GLOBAL const float* x_c = x_n + c * H * W;
#endif
      // Per filter row: its weights, then per output row the input segment that all S taps of the PRE_Q
      // outputs read, loaded once into registers (S times fewer loads than one per tap at stride 1).
      FILTER_ROW_UNROLL for (int r = 0; r < R; ++r) {
        float wv[TILE_K][S];
        PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
          FILTER_COL_UNROLL for (int s = 0; s < S; ++s) wv[kk][s] = w[w_row[kk] + c * FILTER_SIZE + r * S + s];
        PRAGMA_UNROLL for (int i = 0; i < PRE_P; ++i) {
          float xr[ROW_SPAN];
#if USE_LOCAL
          LOCAL const float* row = x_c + (i * STRIDE_H + r * DILATION_H) * LOCAL_ROW;
          PRAGMA_UNROLL for (int u = 0; u < ROW_SPAN; ++u) xr[u] = row[u];
#else
          const int h = (p0 + i) * STRIDE_H - PAD_H + r * DILATION_H;
          const bool row_inside = h >= 0 && h < H;
          PRAGMA_UNROLL for (int u = 0; u < ROW_SPAN; ++u) {
            const int wc = q0 * STRIDE_W - PAD_W + u;
            xr[u] = row_inside && wc >= 0 && wc < W ? x_c[h * W + wc] : 0.0f;
          }
#endif
          FILTER_COL_UNROLL for (int s = 0; s < S; ++s)
            PRAGMA_UNROLL for (int j = 0; j < PRE_Q; ++j)
              PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk)
                acc[kk][i][j] = FMA(xr[j * STRIDE_W + s * DILATION_W], wv[kk][s], acc[kk][i][j]);
        }
      }
    }
#if USE_LOCAL
  }
#endif

  // Epilogue: bias, ReLU and pooling in registers; only y's own elements are written.
  const int op0 = p0 / POOL, oq0 = q0 / POOL;
  PRAGMA_UNROLL for (int kk = 0; kk < TILE_K; ++kk) {
    if (k0 + kk >= K_PER_GROUP) continue;
    const int k = g * K_PER_GROUP + k0 + kk;
#if HAS_BIAS
    const float b = bias[k];
#else
    const float b = 0.0f;
#endif
    GLOBAL float* y_k = y + (n * K + k) * OUT_P * OUT_Q;
    PRAGMA_UNROLL for (int i = 0; i < TILE_P; ++i) {
      if (op0 + i >= OUT_P) continue;
      float out[TILE_Q];
      PRAGMA_UNROLL for (int j = 0; j < TILE_Q; ++j) {
#if POOL == 2
        const float v00 = ACTIVATE(acc[kk][2 * i][2 * j] + b), v01 = ACTIVATE(acc[kk][2 * i][2 * j + 1] + b);
        const float v10 = ACTIVATE(acc[kk][2 * i + 1][2 * j] + b), v11 = ACTIVATE(acc[kk][2 * i + 1][2 * j + 1] + b);
        out[j] = MAX2(MAX2(v00, v01), MAX2(v10, v11));
#else
        out[j] = ACTIVATE(acc[kk][i][j] + b);
#endif
      }
      GLOBAL float* y_row = y_k + (op0 + i) * OUT_Q + oq0;
      PRAGMA_UNROLL for (int j = 0; j < TILE_Q; j += STORE_WIDTH) {
        if (oq0 + j >= OUT_Q) continue;  // with STORE_WIDTH > 1, OUT_Q % STORE_WIDTH == 0 keeps the vector inside
#if STORE_WIDTH == 4
        VSTORE4(MAKE_FLOAT4(out[j], out[j + 1], out[j + 2], out[j + 3]), y_row, j);
#elif STORE_WIDTH == 2
        VSTORE2(MAKE_FLOAT2(out[j], out[j + 1]), y_row, j);
#else
        y_row[j] = out[j];
#endif
      }
    }
  }
}
