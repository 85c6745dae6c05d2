// direct_tiled backward-data: seed 000's structure turned onto dx. Each work-item gathers a TILE_C x TILE_H x
// TILE_W tile of dx (the buffer named x) from dy (y) and w; the stride and dilation divisibility is tested in the
// gather, so no zero-inserted copy of dy is ever made. The work-group's dy tile + halo is staged in local memory.
#include "direct_tiled/direct_tiled_common.h"

#ifndef TILE_C
#define TILE_C 1  // input channels of dx per work-item
#endif
#ifndef TILE_H
#define TILE_H 2  // rows of dx per work-item
#endif
#ifndef TILE_W
#define TILE_W 8  // columns of dx per work-item
#endif
#ifndef THREADS_C
#define THREADS_C 16  // work-group extent along channels (local axis 2)
#endif
#ifndef THREADS_H
#define THREADS_H 2  // work-group extent along rows (local axis 1)
#endif
#ifndef THREADS_W
#define THREADS_W 2  // work-group extent along columns (local axis 0)
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1  // 1: stage the dy tile + halo in local memory; 0: read dy from global memory
#endif
#ifndef CHUNK_K
#define CHUNK_K 4  // output channels of dy staged per local-memory fill
#endif
#ifndef VECTOR_WIDTH
#define VECTOR_WIDTH 1  // floats per global load/store along columns, where the row length allows it
#endif

#define BLOCK_C (TILE_C * THREADS_C)
#define BLOCK_H (TILE_H * THREADS_H)
#define BLOCK_W (TILE_W * THREADS_W)
#define W_BLOCKS CEIL_DIV(W, BLOCK_W)
#define C_BLOCKS CEIL_DIV(C_PER_GROUP, BLOCK_C)  // per group: a work-group never spans two groups
#define THREADS (THREADS_C * THREADS_H * THREADS_W)
#define FILTER_SIZE (R * S)

#if VECTOR_WIDTH > 1 && Q % VECTOR_WIDTH == 0
#define LOAD_WIDTH VECTOR_WIDTH
#else
#define LOAD_WIDTH 1
#endif
#if VECTOR_WIDTH > 1 && W % VECTOR_WIDTH == 0 && TILE_W % VECTOR_WIDTH == 0
#define STORE_WIDTH VECTOR_WIDTH
#else
#define STORE_WIDTH 1
#endif

// dx rows h of a block gather dy rows p = (h + PAD_H - r*DILATION_H) / STRIDE_H: BLOCK_H + (R-1)*DILATION_H
// consecutive numerators hold at most this many multiples of the stride.
#define DY_TILE_H CEIL_DIV(BLOCK_H + (R - 1) * DILATION_H, STRIDE_H)
#define DY_TILE_W CEIL_DIV(BLOCK_W + (S - 1) * DILATION_W, STRIDE_W)
#define LOCAL_ROW ROUND_UP(DY_TILE_W + LOAD_WIDTH - 1, LOAD_WIDTH)
#define LOCAL_VECTORS_PER_ROW (LOCAL_ROW / LOAD_WIDTH)

KERNEL void direct_tiled_backward_data(GLOBAL const float* RESTRICT y, GLOBAL const float* RESTRICT w,
                                       GLOBAL float* RESTRICT x) {
  const int tw = LOCAL_ID(0), th = LOCAL_ID(1), tc = LOCAL_ID(2);
  const int n = (int)(GROUP_ID(0) / W_BLOCKS);
  const int w_block = (int)(GROUP_ID(0) % W_BLOCKS);
  const int h_block = (int)GROUP_ID(1);
  const int g = (int)(GROUP_ID(2) / C_BLOCKS);
  const int c_block = (int)(GROUP_ID(2) % C_BLOCKS);
  const int h0 = h_block * BLOCK_H + th * TILE_H;
  const int w0 = w_block * BLOCK_W + tw * TILE_W;
  const int c0 = c_block * BLOCK_C + tc * TILE_C;  // first channel within group g

  float acc[TILE_C][TILE_H][TILE_W];
  PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc)
    PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i)
      PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j) acc[cc][i][j] = 0.0f;

  // Offsets of this work-item's channels inside a filter; clamped past the group's end (never stored).
  int w_col[TILE_C];
  PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc) w_col[cc] = MIN_INT(c0 + cc, C_PER_GROUP - 1) * FILTER_SIZE;
  GLOBAL const float* w_g = w + g * K_PER_GROUP * C_PER_GROUP * FILTER_SIZE;
  GLOBAL const float* dy_n = y + (n * K + g * K_PER_GROUP) * P * Q;

#if USE_LOCAL
  LOCAL_ARRAY float tile[CHUNK_K * DY_TILE_H * LOCAL_ROW];
  const int p_first = CEIL_DIV_SIGNED(h_block * BLOCK_H + PAD_H - (R - 1) * DILATION_H, STRIDE_H);
  const int q_start = CEIL_DIV_SIGNED(w_block * BLOCK_W + PAD_W - (S - 1) * DILATION_W, STRIDE_W);
  const int q_first = ALIGN_DOWN(q_start, LOAD_WIDTH);
  const int lid = tw + THREADS_W * (th + THREADS_H * tc);
  for (int k0 = 0; k0 < K_PER_GROUP; k0 += CHUNK_K) {
    BARRIER();  // everyone is done reading the previous chunk
    for (int e = lid; e < CHUNK_K * DY_TILE_H * LOCAL_VECTORS_PER_ROW; e += THREADS) {
      const int col = (e % LOCAL_VECTORS_PER_ROW) * LOAD_WIDTH;
      const int row = (e / LOCAL_VECTORS_PER_ROW) % DY_TILE_H;
      const int kk = e / (LOCAL_VECTORS_PER_ROW * DY_TILE_H);
      const int p = p_first + row, q = q_first + col;
      const bool inside = k0 + kk < K_PER_GROUP && p >= 0 && p < P && q >= 0 && q < Q;
      const int src = ((k0 + kk) * P + p) * Q + q;
      LOCAL float* dst = tile + (kk * DY_TILE_H + row) * LOCAL_ROW + col;
#if LOAD_WIDTH == 4
      const vec4 v = inside ? VLOAD4(dy_n, src) : MAKE_VEC4(0.0f);
      dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
#elif LOAD_WIDTH == 2
      const vec2 v = inside ? VLOAD2(dy_n, src) : MAKE_VEC2(0.0f);
      dst[0] = v.x; dst[1] = v.y;
#else
      dst[0] = inside ? dy_n[src] : 0.0f;
#endif
    }
    BARRIER();
    for (int kk = 0; kk < CHUNK_K; ++kk) {
#if K_PER_GROUP % CHUNK_K != 0
      if (k0 + kk >= K_PER_GROUP) break;
#endif
      LOCAL const float* t = tile + kk * DY_TILE_H * LOCAL_ROW;
      GLOBAL const float* w_k = w_g + (k0 + kk) * C_PER_GROUP * FILTER_SIZE;
      FILTER_ROW_UNROLL for (int r = 0; r < R; ++r) {
        FILTER_COL_UNROLL for (int s = 0; s < S; ++s) {
          float wv[TILE_C];
          PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc) wv[cc] = w_k[w_col[cc] + r * S + s];
          PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
            const int th_num = h0 + i + PAD_H - r * DILATION_H;
            if (th_num % STRIDE_H != 0) continue;  // this tap of row h0+i meets no dy row
            LOCAL const float* t_row = t + (th_num / STRIDE_H - p_first) * LOCAL_ROW;
            PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j) {
              const int tw_num = w0 + j + PAD_W - s * DILATION_W;
              if (tw_num % STRIDE_W != 0) continue;
              const float dv = t_row[tw_num / STRIDE_W - q_first];
              PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc) acc[cc][i][j] = FMA(dv, wv[cc], acc[cc][i][j]);
            }
          }
        }
      }
    }
  }
#else
  for (int k = 0; k < K_PER_GROUP; ++k) {
    GLOBAL const float* dy_k = dy_n + k * P * Q;
    GLOBAL const float* w_k = w_g + k * C_PER_GROUP * FILTER_SIZE;
    FILTER_ROW_UNROLL for (int r = 0; r < R; ++r) {
      FILTER_COL_UNROLL for (int s = 0; s < S; ++s) {
        float wv[TILE_C];
        PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc) wv[cc] = w_k[w_col[cc] + r * S + s];
        PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
          const int th_num = h0 + i + PAD_H - r * DILATION_H;
          const int p = th_num / STRIDE_H;
          if (th_num % STRIDE_H != 0 || p < 0 || p >= P) continue;
          PRAGMA_UNROLL for (int j = 0; j < TILE_W; ++j) {
            const int tw_num = w0 + j + PAD_W - s * DILATION_W;
            const int q = tw_num / STRIDE_W;
            if (tw_num % STRIDE_W != 0 || q < 0 || q >= Q) continue;
            const float dv = dy_k[p * Q + q];
            PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc) acc[cc][i][j] = FMA(dv, wv[cc], acc[cc][i][j]);
          }
        }
      }
    }
  }
#endif

  PRAGMA_UNROLL for (int cc = 0; cc < TILE_C; ++cc) {
    if (c0 + cc >= C_PER_GROUP) continue;
    GLOBAL float* dx_c = x + (n * C + g * C_PER_GROUP + c0 + cc) * H * W;
    PRAGMA_UNROLL for (int i = 0; i < TILE_H; ++i) {
      if (h0 + i >= H) continue;
      GLOBAL float* dx_row = dx_c + (h0 + i) * W + w0;
      PRAGMA_UNROLL for (int j = 0; j < TILE_W; j += STORE_WIDTH) {
        if (w0 + j >= W) continue;  // with STORE_WIDTH > 1, W % STORE_WIDTH == 0 keeps the vector inside
#if STORE_WIDTH == 4
        VSTORE4(MAKE_FLOAT4(acc[cc][i][j], acc[cc][i][j + 1], acc[cc][i][j + 2], acc[cc][i][j + 3]), dx_row, j);
#elif STORE_WIDTH == 2
        VSTORE2(MAKE_FLOAT2(acc[cc][i][j], acc[cc][i][j + 1]), dx_row, j);
#else
        dx_row[j] = acc[cc][i][j];
#endif
      }
    }
  }
}
