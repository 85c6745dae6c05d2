// depthwise backward-data: dx (the buffer named x) is itself a depthwise convolution of dy (y) with the flipped
// filter, summed over the MULTIPLIER output channels of each input channel. Each work-item gathers TILE_H x TILE_W
// of one channel of dx; stride and dilation are handled in the gather (dy row p meets dx row h only where
// h + PAD_H - r*DILATION_H is a multiple of STRIDE_H), so no zero-inserted dy is made and nothing is added atomically.
#include "depthwise/spatial_tiles.h"

#define W_BLOCKS CEIL_DIV(W, BLOCK_W)
#define H_BLOCKS CEIL_DIV(H, BLOCK_H)
#define C_BLOCKS CEIL_DIV(C, THREADS_C)
// dx rows of a block gather at most this many consecutive dy rows (as in direct_tiled's backward-data).
#define DY_TILE_H CEIL_DIV(BLOCK_H + (R - 1) * DILATION_H, STRIDE_H)
#define DY_TILE_W CEIL_DIV(BLOCK_W + (S - 1) * DILATION_W, STRIDE_W)
// At stride 1 along columns the TILE_W outputs of a filter row read one contiguous dy segment, kept in registers.
#define ROW_SPAN (TILE_W + (S - 1) * DILATION_W)

KERNEL void depthwise_backward_data(GLOBAL const float* RESTRICT y, GLOBAL const float* RESTRICT w,
                                    GLOBAL float* RESTRICT x) {
  const int tw = LOCAL_ID(0), th = LOCAL_ID(1), tc = LOCAL_ID(2);
  long block = GROUP_ID(0);  // one flat grid axis, columns fastest (see forward.cl)
  const int w_block = (int)(block % W_BLOCKS);
  block /= W_BLOCKS;
  const int h_block = (int)(block % H_BLOCKS);
  block /= H_BLOCKS;
  const int c_block = (int)(block % C_BLOCKS);
  const int n = (int)(block / C_BLOCKS);
  const int c_mine = c_block * THREADS_C + tc;
  const int c = MIN_INT(c_mine, C - 1);  // clamped past the end: computed, never stored
  const int h0 = h_block * BLOCK_H + th * TILE_H;
  const int w0 = w_block * BLOCK_W + tw * TILE_W;

  float acc[TILE_H][TILE_W];
  PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i)
    PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j) acc[i][j] = 0.0f;

#if USE_LOCAL
  LOCAL_ARRAY float window[THREADS_C * DY_TILE_H * DY_TILE_W];
  const int p_first = CEIL_DIV_SIGNED(h_block * BLOCK_H + PAD_H - (R - 1) * DILATION_H, STRIDE_H);
  const int q_first = CEIL_DIV_SIGNED(w_block * BLOCK_W + PAD_W - (S - 1) * DILATION_W, STRIDE_W);
  const int lid = tw + THREADS_W * (th + THREADS_H * tc);
  LOCAL const float* dy_mine = window + tc * DY_TILE_H * DY_TILE_W;
#endif

  for (int m = 0; m < MULTIPLIER; ++m) {
    const int k = c * MULTIPLIER + m;
    GLOBAL const float* w_k = w + k * FILTER_SIZE;
#if USE_LOCAL
    BARRIER();  // everyone is done reading the previous output channel's window
    for (int e = lid; e < THREADS_C * DY_TILE_H * DY_TILE_W; e += THREADS) {
      const int col = e % DY_TILE_W;
      const int row = (e / DY_TILE_W) % DY_TILE_H;
      const int c_e = c_block * THREADS_C + e / (DY_TILE_W * DY_TILE_H);
      const int p = p_first + row, q = q_first + col;
      const bool inside = c_e < C && p >= 0 && p < P && q >= 0 && q < Q;
      window[e] = inside ? y[((n * K + c_e * MULTIPLIER + m) * P + p) * Q + q] : 0.0f;
    }
    BARRIER();
#else
    GLOBAL const float* dy_k = y + (n * K + k) * P * Q;
#endif
    FILTER_ROW_UNROLL for (int r = 0; r < R; ++r) {
      float wv[S];
      FILTER_COL_UNROLL for (int s = 0; s < S; ++s) wv[s] = w_k[r * S + s];
      PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
        const int p_num = h0 + i + PAD_H - r * DILATION_H;
        if (p_num % STRIDE_H != 0) continue;  // this filter row meets no dy row for dx row h0+i
        const int p = p_num / STRIDE_H;       // exact, so a negative p is right too (and out of range)
#if STRIDE_W == 1
        // dx column w0+j, tap s reads dy column w0+j+PAD_W-s*DILATION_W = q_low + j + (S-1-s)*DILATION_W.
        const int q_low = w0 + PAD_W - (S - 1) * DILATION_W;
        float dr[ROW_SPAN];
#if USE_LOCAL
        LOCAL const float* row = dy_mine + (p - p_first) * DY_TILE_W + (q_low - q_first);
        PRAGMA_UNROLL for (int u = 0; u < ROW_SPAN; ++u) dr[u] = row[u];
#else
        const bool row_inside = p >= 0 && p < P;
        PRAGMA_UNROLL for (int u = 0; u < ROW_SPAN; ++u) {
          const int q = q_low + u;
          dr[u] = row_inside && q >= 0 && q < Q ? dy_k[p * Q + q] : 0.0f;
        }
#endif
        FILTER_COL_UNROLL for (int s = 0; s < S; ++s)
          PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j)
            acc[i][j] = FMA(dr[j + (S - 1 - s) * DILATION_W], wv[s], acc[i][j]);
#else
#if !USE_LOCAL
        if (p < 0 || p >= P) continue;
#endif
        FILTER_COL_UNROLL for (int s = 0; s < S; ++s) {
          PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j) {
            const int q_num = w0 + j + PAD_W - s * DILATION_W;
            if (q_num % STRIDE_W != 0) continue;
            const int q = q_num / STRIDE_W;
#if USE_LOCAL
            const float dv = dy_mine[(p - p_first) * DY_TILE_W + q - q_first];
#else
            const float dv = q >= 0 && q < Q ? dy_k[p * Q + q] : 0.0f;
#endif
            acc[i][j] = FMA(dv, wv[s], acc[i][j]);
          }
        }
#endif
      }
    }
  }

  if (c_mine >= C) return;
  GLOBAL float* dx_c = x + (n * C + c) * H * W;
  PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
    if (h0 + i >= H) continue;
    PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j)
      if (w0 + j < W) dx_c[(h0 + i) * W + w0 + j] = acc[i][j];
  }
}
