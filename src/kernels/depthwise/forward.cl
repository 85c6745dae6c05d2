// depthwise forward: each work-item computes TILE_M output channels (of one input channel) x TILE_H rows x TILE_W
// columns of y; a work-group covers THREADS_C channel units x a block of rows and columns, its input windows staged
// in local memory when USE_LOCAL is set. Bias and ReLU are fused.
#include "depthwise/spatial_tiles.h"

#ifndef TILE_M
#define TILE_M 1  // output channels per work-item, all reading the same input channel
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0  // add bias[k]
#endif
#ifndef APPLY_RELU
#define APPLY_RELU 0  // max(0, .) after the bias
#endif

// A channel unit is one input channel and TILE_M of its MULTIPLIER output channels.
#define M_BLOCKS CEIL_DIV(MULTIPLIER, TILE_M)
#define UNITS (C * M_BLOCKS)
#define UNIT_BLOCKS CEIL_DIV(UNITS, THREADS_C)
#define Q_BLOCKS CEIL_DIV(Q, BLOCK_W)
#define P_BLOCKS CEIL_DIV(P, BLOCK_H)
// The input window of one channel unit's block, and the columns one work-item's TILE_W outputs read in a filter row.
#define IN_TILE_H ((BLOCK_H - 1) * STRIDE_H + (R - 1) * DILATION_H + 1)
#define IN_TILE_W ((BLOCK_W - 1) * STRIDE_W + (S - 1) * DILATION_W + 1)
#define ROW_SPAN ((TILE_W - 1) * STRIDE_W + (S - 1) * DILATION_W + 1)

#if APPLY_RELU
#define ACTIVATE(v) ((v) > 0.0f ? (v) : 0.0f)
#else
#define ACTIVATE(v) (v)
#endif

KERNEL void depthwise_forward(GLOBAL const float* RESTRICT x, GLOBAL const float* RESTRICT w,
                              GLOBAL float* RESTRICT y
#if HAS_BIAS
                              , GLOBAL const float* RESTRICT bias
#endif
) {
  const int tw = LOCAL_ID(0), th = LOCAL_ID(1), tc = LOCAL_ID(2);
  // One flat grid axis (CUDA's axis 0 takes 2^31-1 blocks): columns fastest, so the blocks of one channel run
  // together and its input plane stays in cache.
  long block = GROUP_ID(0);
  const int q_block = (int)(block % Q_BLOCKS);
  block /= Q_BLOCKS;
  const int p_block = (int)(block % P_BLOCKS);
  block /= P_BLOCKS;
  const int unit_block = (int)(block % UNIT_BLOCKS);
  const int n = (int)(block / UNIT_BLOCKS);
  const int unit = unit_block * THREADS_C + tc;
  // Units past the end compute on a clamped channel (every work-item reaches the barrier); nothing is stored.
  const int unit_read = MIN_INT(unit, UNITS - 1);
  const int c = unit_read / M_BLOCKS;
  const int m0 = (unit_read % M_BLOCKS) * TILE_M;
  const int p0 = p_block * BLOCK_H + th * TILE_H;
  const int q0 = q_block * BLOCK_W + tw * TILE_W;

  float acc[TILE_M][TILE_H][TILE_W];
  PRAGMA_UNROLL for (int mm = 0; mm < TILE_M; ++mm)
    PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i)
      PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j) acc[mm][i][j] = 0.0f;
  int w_base[TILE_M];  // channels past the multiplier are clamped so no read leaves w
  PRAGMA_UNROLL for (int mm = 0; mm < TILE_M; ++mm)
    w_base[mm] = (c * MULTIPLIER + MIN_INT(m0 + mm, MULTIPLIER - 1)) * FILTER_SIZE;

#if USE_LOCAL
  LOCAL_ARRAY float window[THREADS_C * IN_TILE_H * IN_TILE_W];
  {
    const int h_first = p_block * BLOCK_H * STRIDE_H - PAD_H;
    const int w_first = q_block * BLOCK_W * STRIDE_W - PAD_W;
    const int lid = tw + THREADS_W * (th + THREADS_H * tc);
    // Flat over the work-group's windows: consecutive work-items read consecutive columns (coalesced).
    for (int e = lid; e < THREADS_C * IN_TILE_H * IN_TILE_W; e += THREADS) {
      const int col = e % IN_TILE_W;
      const int row = (e / IN_TILE_W) % IN_TILE_H;
      const int unit_e = unit_block * THREADS_C + e / (IN_TILE_W * IN_TILE_H);
      const int h = h_first + row, wc = w_first + col;
      const bool inside = unit_e < UNITS && h >= 0 && h < H && wc >= 0 && wc < W;
      window[e] = inside ? x[((n * C + unit_e / M_BLOCKS) * H + h) * W + wc] : 0.0f;
    }
  }
  BARRIER();
  LOCAL const float* x_mine =
      window + (tc * IN_TILE_H + th * TILE_H * STRIDE_H) * IN_TILE_W + tw * TILE_W * STRIDE_W;
#else
  GLOBAL const float* x_c = x + (n * C + c) * H * W;
#endif

  // Per filter row: its weights, then per output row the input segment all S taps of the TILE_W outputs read,
  // loaded once into registers.
  FILTER_ROW_UNROLL for (int r = 0; r < R; ++r) {
    float wv[TILE_M][S];
    PRAGMA_UNROLL for (int mm = 0; mm < TILE_M; ++mm)
      FILTER_COL_UNROLL for (int s = 0; s < S; ++s) wv[mm][s] = w[w_base[mm] + r * S + s];
    PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
      float xr[ROW_SPAN];
#if USE_LOCAL
      LOCAL const float* row = x_mine + (i * STRIDE_H + r * DILATION_H) * IN_TILE_W;
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
        PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j)
          PRAGMA_UNROLL for (int mm = 0; mm < TILE_M; ++mm)
            acc[mm][i][j] = FMA(xr[j * STRIDE_W + s * DILATION_W], wv[mm][s], acc[mm][i][j]);
    }
  }

  if (unit >= UNITS) return;
  PRAGMA_UNROLL for (int mm = 0; mm < TILE_M; ++mm) {
    if (m0 + mm >= MULTIPLIER) continue;
    const int k = c * MULTIPLIER + m0 + mm;
#if HAS_BIAS
    const float b = bias[k];
#else
    const float b = 0.0f;
#endif
    GLOBAL float* y_k = y + (n * K + k) * P * Q;
    PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
      if (p0 + i >= P) continue;
      PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j)
        if (q0 + j < Q) y_k[(p0 + i) * Q + q0 + j] = ACTIVATE(acc[mm][i][j] + b);
    }
  }
}
