// The implicit_gemm_shifted_wgmma family: backward-filter convolutions as implicit GEMMs on Hopper's wgmma (wgmma.h,
// wg_mainloop.h) where both operands reach shared memory by 16-byte cp.async copies, none through registers:
//   dw[k][(c,r,s)] = sum over (n,p,q) of  A[(c,r,s)][(n,p,q)] = xs[s][n][c][p STRIDE + r DILATION - PAD][q]
//                                       x B[k][(n,p,q)]       = dyr[k][n][p][q]
// Both copies pad each output row to QP columns (a multiple of the 16-byte chunk, zeros past Q), so the reduction
// (n, p, q < QP) never puts a row boundary inside a chunk:
//   xs  (wgs_shift_x):  S copies of x, copy s holding x[n][c][h][q STRIDE + s DILATION - PAD] at column q: the tap's
//                       column shift and the stride are in the copy, so a chunk of A is 8 (bf16) consecutive q of one
//                       input row, aligned; its row index p STRIDE + r DILATION - PAD is checked (zero-filled off the
//                       image), rows past the reduction too.
//   dyr (wgs_dy_rows):  dy as [k][(n,p,q)], B's rows K-contiguous like a GEMM's.
// SPLIT_K slices of the reduction write FP32 partials in dw's layout, summed in order by wgs_filter_reduce; one slice
// writes dw directly. Channels-last problems (LAYOUT_NHWC=1) make the same copies from x and dy channels-last, through
// shared-memory tiles that read along channels and write along columns, and write dw as (K, R, S, C/groups). Shapes
// and parameters are defines (problem_defines plus the family's: QP, WS_X, WS_DY, WS_PARTIAL); the file does not
// compile alone.
#include "tensor_core/wgmma.h"

#ifndef LAYOUT_NHWC
#define LAYOUT_NHWC 0
#endif

#define SH_CRS (C_PER_GROUP * R * S)  // rows of A (and of dw) per group
#define SH_RED (N * P * QP)           // the reduction, a multiple of WG_CHUNK
#define SH_ROW (H * QP)               // one channel of one shifted copy
#define SH_IMAGE (C * SH_ROW)         // one image of one shifted copy
#define SH_SLAB (N * SH_IMAGE)        // one shifted copy
#define SH_OUTSIDE (-(1 << 29))       // a row past M: every row check fails

// A tile: WG_BLOCK_M rows x 8 chunks; thread tid takes chunk tid % 8 of rows tid / 8 + i * WG_THREADS / 8, so all of
// its chunks of a tile sit at one reduction position (n, p, q0): decoded once a tile.
#define SH_A_ITEMS (WG_BLOCK_M * 8 / WG_THREADS)
#define SH_A_ROW(i) ((tid >> 3) + (i) * (WG_THREADS / 8))

KERNEL __launch_bounds__(WG_THREADS, 1) void implicit_gemm_shifted_wgmma(wg_elem* RESTRICT dw,
                                                                          const unsigned char* RESTRICT ws) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int g = (int)GROUP_ID(2) % GROUPS, slice = (int)GROUP_ID(2) / GROUPS;
  const wg_elem* xs = (const wg_elem*)(ws + WS_X);
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_DY) + ((long)g * K_PER_GROUP + n0) * SH_RED;
  const int ch = tid & 7;

  // This block's reduction range: all of it, or one split-K slice of whole tiles.
  const int red_tiles = (SH_RED + WG_TILE_K - 1) / WG_TILE_K;
  const int tiles_per_slice = (red_tiles + SPLIT_K - 1) / SPLIT_K;
  const int tile_begin = slice * tiles_per_slice < red_tiles ? slice * tiles_per_slice : red_tiles;
  const int ntiles = red_tiles - tile_begin < tiles_per_slice ? red_tiles - tile_begin : tiles_per_slice;

  // This thread's A rows (c, r, s): the offset of their copy, channel and tap row, and the tap's row displacement.
  int a_off[SH_A_ITEMS], a_dr[SH_A_ITEMS];
  PRAGMA_UNROLL
  for (int i = 0; i < SH_A_ITEMS; ++i) {
    const int m = m0 + SH_A_ROW(i);
    a_off[i] = 0, a_dr[i] = SH_OUTSIDE;
    if (m < SH_CRS) {
      const int c = m / (R * S), rs = m % (R * S), r = rs / S, s = rs % S;
      a_dr[i] = r * DILATION_H;
      a_off[i] = s * SH_SLAB + (g * C_PER_GROUP + c) * SH_ROW + a_dr[i] * QP;
    }
  }

  // Reduction tile `tile` (of this slice): the chunk's position (n, p, q0), then each of this thread's rows at it;
  // B's rows like a GEMM's.
#define WG_LOAD(stage, tile)                                                                      \
  {                                                                                               \
    const int kk_ = (tile_begin + (tile)) * WG_TILE_K + ch * WG_CHUNK;                            \
    const int np_ = kk_ / QP, q0_ = kk_ % QP;                                                     \
    const int img_ = np_ / P, h0_ = (np_ % P) * STRIDE_H - PAD_H;                                 \
    const int base_ = img_ * SH_IMAGE + h0_ * QP + q0_;                                           \
    PRAGMA_UNROLL for (int i = 0; i < SH_A_ITEMS; ++i) {                                          \
      const bool ok_ = kk_ < SH_RED && (unsigned)(h0_ + a_dr[i]) < (unsigned)H;                   \
      wg_copy16((stage) + wg_swizzle(SH_A_ROW(i), ch), xs + (ok_ ? a_off[i] + base_ : 0), ok_);   \
    }                                                                                             \
    PRAGMA_UNROLL for (int e = 0; e < (BLOCK_N * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {         \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, bch = idx & 7;                        \
      if ((BLOCK_N * 8) % WG_THREADS == 0 || row < BLOCK_N) {                                     \
        const int k_ = (tile_begin + (tile)) * WG_TILE_K + bch * WG_CHUNK;                        \
        const bool ok = n0 + row < K_PER_GROUP && k_ < SH_RED;                                    \
        wg_copy16((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, bch),                              \
                  b_rows + (ok ? (long)row * SH_RED + k_ : 0), ok);                               \
      }                                                                                           \
    }                                                                                             \
  }

#include "tensor_core/wg_mainloop.h"

  // ---- epilogue: rows (c,r,s), columns k; dw's layout [g K/G + k][(c,r,s)] (a warp's stores run along rows) ----
  PRAGMA_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int mm = m0 + WG_ACC_ROW(r);
    if (mm >= SH_CRS) continue;
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, r);
      if (n >= K_PER_GROUP) continue;
#if LAYOUT_NHWC
      // Row mm is (c, r, s); dw channels-last holds it at ((k R + r) S + s) C/groups + c.
      const long at = ((long)(g * K_PER_GROUP + n) * (R * S) + mm % (R * S)) * C_PER_GROUP + mm / (R * S);
#else
      const long at = (long)(g * K_PER_GROUP + n) * SH_CRS + mm;
#endif
#if SPLIT_K == 1
      dw[at] = WG_FROM_FLOAT(acc[4 * j + r]);
#else
      ((float*)(ws + WS_PARTIAL))[(long)slice * K * SH_CRS + at] = acc[4 * j + r];
#endif
    }
  }
}

#if LAYOUT_NHWC
// xs[s][n][c][h][q] = x[n][h][q STRIDE_W + s DILATION_W - PAD_W][c] for q < Q where that column is inside the image,
// else 0. Work-group t (32 x 8 threads) of dimension 0 takes a 32 x 32 tile of (column q, channel c) of one input row
// (s, n, h): reads along channels, writes along columns through shared memory.
KERNEL void wgs_shift_x(const wg_elem* RESTRICT x, unsigned char* RESTRICT ws) {
  __shared__ wg_elem tile[32][33];
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const long c_tiles = (C + 31) / 32, q_tiles = (QP + 31) / 32;
  const long t = GROUP_ID(0);
  const long row = t / (c_tiles * q_tiles);  // (s, n, h)
  if (row >= (long)S * N * H) return;        // uniform per work-group
  const int c0 = (int)(t % c_tiles) * 32, q0 = (int)(t / c_tiles % q_tiles) * 32;
  const int s = (int)(row / ((long)N * H)), n = (int)(row / H % N), h = (int)(row % H);
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int q = q0 + ty + 8 * i, c = c0 + tx, col = q * STRIDE_W + s * DILATION_W - PAD_W;
    tile[ty + 8 * i][tx] = q < Q && c < C && (unsigned)col < (unsigned)W ? x[(((long)n * H + h) * W + col) * C + c]
                                                                         : (wg_elem)0;
  }
  BARRIER();
  wg_elem* dst = (wg_elem*)(ws + WS_X) + (long)s * SH_SLAB + (long)n * SH_IMAGE + (long)h * QP;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int c = c0 + ty + 8 * i, q = q0 + tx;
    if (c < C && q < QP) dst[(long)c * SH_ROW + q] = tile[tx][ty + 8 * i];
  }
}

// dyr[k][(n,p,q)] = dy[n][p][q][k] for q < Q, else 0: work-group t (32 x 8 threads) of dimension 0 takes a 32 x 32 tile
// of (column q, channel k) of one output row (n, p), read along channels and written along columns.
KERNEL void wgs_dy_rows(const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws) {
  __shared__ wg_elem tile[32][33];
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const long k_tiles = (K + 31) / 32, q_tiles = (QP + 31) / 32;
  const long t = GROUP_ID(0);
  const long np = t / (k_tiles * q_tiles);
  if (np >= (long)N * P) return;  // uniform per work-group
  const int k0 = (int)(t % k_tiles) * 32, q0 = (int)(t / k_tiles % q_tiles) * 32;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int q = q0 + ty + 8 * i, k = k0 + tx;
    tile[ty + 8 * i][tx] = q < Q && k < K ? dy[(np * Q + q) * K + k] : (wg_elem)0;
  }
  BARRIER();
  wg_elem* dst = (wg_elem*)(ws + WS_DY);
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int k = k0 + ty + 8 * i, q = q0 + tx;
    if (k < K && q < QP) dst[((long)k * N * P + np) * QP + q] = tile[tx][ty + 8 * i];
  }
}
#else
// xs[s][n][c][h][q] = x[n][c][h][q STRIDE_W + s DILATION_W - PAD_W] for q < Q where that column is inside the image,
// else 0: one 16-byte chunk of a row a work-item.
KERNEL void wgs_shift_x(const wg_elem* RESTRICT x, unsigned char* RESTRICT ws) {
  const long item = GLOBAL_ID(0);
  if (item >= (long)S * N * C * H * (QP / WG_CHUNK)) return;
  const int q0 = (int)(item % (QP / WG_CHUNK)) * WG_CHUNK;
  const long row = item / (QP / WG_CHUNK);  // (s, n, c, h)
  const int s = (int)(row / ((long)N * C * H));
  const wg_elem* src = x + (row % ((long)N * C * H)) * W;
  uint4 chunk;  // one 16-byte store
  wg_elem* values = (wg_elem*)&chunk;
  PRAGMA_UNROLL
  for (int e = 0; e < WG_CHUNK; ++e) {
    const int q = q0 + e, col = q * STRIDE_W + s * DILATION_W - PAD_W;
    values[e] = q < Q && (unsigned)col < (unsigned)W ? src[col] : (wg_elem)0;
  }
  *(uint4*)((wg_elem*)(ws + WS_X) + row * QP + q0) = chunk;
}

// dyr[k][(n,p,q)] = dy[n][k][p][q] for q < Q, else 0: one 16-byte chunk a work-item.
KERNEL void wgs_dy_rows(const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws) {
  const long item = GLOBAL_ID(0);
  if (item >= (long)K * N * P * (QP / WG_CHUNK)) return;
  const int q0 = (int)(item % (QP / WG_CHUNK)) * WG_CHUNK;
  const long row = item / (QP / WG_CHUNK);  // (k, n, p)
  const int k = (int)(row / ((long)N * P)), np = (int)(row % ((long)N * P));
  const wg_elem* src = dy + ((long)(np / P) * K + k) * (P * Q) + (np % P) * Q;
  uint4 chunk;
  wg_elem* values = (wg_elem*)&chunk;
  PRAGMA_UNROLL
  for (int e = 0; e < WG_CHUNK; ++e) values[e] = q0 + e < Q ? src[q0 + e] : (wg_elem)0;
  *(uint4*)((wg_elem*)(ws + WS_DY) + row * QP + q0) = chunk;
}
#endif

#if SPLIT_K > 1
// dw = the split-K slices' partials summed in order, rounded once.
KERNEL void wgs_filter_reduce(const unsigned char* RESTRICT ws, wg_elem* RESTRICT dw) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)K * SH_CRS) return;
  const float* partial = (const float*)(ws + WS_PARTIAL);
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(long)s * K * SH_CRS + idx];
  dw[idx] = WG_FROM_FLOAT(sum);
}
#endif
