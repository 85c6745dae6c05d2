// The col2im_wgmma family: backward-data convolutions as a GEMM into columns on Hopper's wgmma (wgmma.h,
// wg_mainloop.h), then a gather of the columns into dx (col2im), in chunks of IMAGES images:
//   col[g][(c,r,s)][(n,p,q)] = sum over k of  A[(n,p,q)][k] = dyt (dy channels-last)  x  B[(c,r,s)][k] = wt
//   dx[n][c][h][w]           = sum over the taps (r,s) that reach (h,w) from a grid point (p,q) of col
// Every product is computed once: a strided layer's masked implicit GEMM would multiply zeros at all but one in
// STRIDE_H x STRIDE_W taps, and a layer of few input channels (alex1's 3) fills a GEMM of C/groups columns poorly
// where C/groups*R*S columns fill it well. The columns are FP32 (the sum over taps rounds once, into dx).
// Workspace (byte offsets): WS_DY dyt[(n,p,q)][group][KP] (each group's K/groups channels padded to KP, a multiple of
// the 16-byte chunk), WS_W wt[g][(c,r,s)][KP], WS_COL col of one chunk: [g][(c,r,s)][CHUNK_ROWS] FP32.
// 3xTF32 (SPLIT3=1, FP32 tensors in FP32-accurate math): the copies of dy and the filters write each element's TF32
// big part and, WS_LO_SHIFT elements later, its TF32 residual; the GEMM multiplies them on wg_mainloop_split3.h.
// Channels-last problems (LAYOUT_NHWC=1) copy dy and the filters from their channels-last layouts, keep the columns
// row-major (col[row][g][(c,r,s)], so the gather's neighbouring channels read neighbouring columns) and gather into a
// channels-last dx. Shapes and parameters are defines (problem_defines plus the family's); the file does not compile
// alone.
#include "tensor_core/wgmma.h"

#ifndef LAYOUT_NHWC
#define LAYOUT_NHWC 0
#endif

#ifndef SPLIT3
#define SPLIT3 0
#endif
#if SPLIT3
#if ELEM != 2
#error "3xTF32 splits FP32 tensors"
#endif
// x rounded to the nearest TF32 value (ties away from zero), as FP32 bits with the low 13 bits clear.
DEVICE_FN float ci_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}
// One element into the workspace: its big part at idx, its residual WS_LO_SHIFT elements later.
#define CI_STORE(base, idx, value)                        \
  {                                                       \
    const float v_ = (value), hi_ = ci_tf32(v_);          \
    (base)[idx] = hi_;                                    \
    (base)[(idx) + WS_LO_SHIFT] = ci_tf32(v_ - hi_);      \
  }
// A 16-byte chunk of the big parts into the stage, and the residuals' chunk into the stage's other half.
#define CI_COPY(dst, src, ok)                                   \
  {                                                             \
    wg_copy16(dst, src, ok);                                    \
    wg_copy16((dst) + WG_STAGE_BYTES, (src) + WS_LO_SHIFT, ok); \
  }
#else
#define CI_STORE(base, idx, value) (base)[idx] = (value)
#define CI_COPY(dst, src, ok) wg_copy16(dst, src, ok)
#endif

#define CI_CRS (C_PER_GROUP * R * S)  // GEMM columns per group
#define CI_PQ (P * Q)
#define CI_GKP (GROUPS * KP)          // one dy pixel's channels in dyt

// A tile: WG_BLOCK_M rows x 8 chunks; thread tid takes chunk tid % 8 of rows tid / 8 + i * WG_THREADS / 8.
#define CI_A_ITEMS (WG_BLOCK_M * 8 / WG_THREADS)
#define CI_A_ROW(i) ((tid >> 3) + (i) * (WG_THREADS / 8))

// One chunk's GEMM: rows row0 .. row0 + rows - 1 of dyt (rows <= CHUNK_ROWS), every group (grid axis 2).
KERNEL __launch_bounds__(WG_THREADS, 1) void col2im_wgmma_gemm(unsigned char* RESTRICT ws, int row0, int rows) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int g = (int)GROUP_ID(2);
  const int ntiles = (KP + WG_TILE_K - 1) / WG_TILE_K;
  const wg_elem* a_rows = (const wg_elem*)(ws + WS_DY) + (long)row0 * CI_GKP + g * KP;
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_W) + ((long)g * CI_CRS + n0) * KP;
  const int ch = tid & 7;

#define WG_LOAD(stage, tile)                                                                      \
  {                                                                                               \
    const int k_ = (tile) * WG_TILE_K + ch * WG_CHUNK;                                            \
    PRAGMA_UNROLL for (int i = 0; i < CI_A_ITEMS; ++i) {                                          \
      const int m_ = m0 + CI_A_ROW(i);                                                            \
      const bool ok_ = m_ < rows && k_ < KP;                                                      \
      CI_COPY((stage) + wg_swizzle(CI_A_ROW(i), ch), a_rows + (ok_ ? (long)m_ * CI_GKP + k_ : 0), ok_); \
    }                                                                                             \
    PRAGMA_UNROLL for (int e = 0; e < (BLOCK_N * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {         \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, bch = idx & 7;                        \
      if ((BLOCK_N * 8) % WG_THREADS == 0 || row < BLOCK_N) {                                     \
        const int kb_ = (tile) * WG_TILE_K + bch * WG_CHUNK;                                      \
        const bool ok = n0 + row < CI_CRS && kb_ < KP;                                            \
        CI_COPY((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, bch), b_rows + (ok ? (long)row * KP + kb_ : 0), ok); \
      }                                                                                           \
    }                                                                                             \
  }

#if SPLIT3
#include "tensor_core/wg_mainloop_split3.h"
#else
#include "tensor_core/wg_mainloop.h"
#endif

  // ---- epilogue: col[g][(c,r,s)][row] (a warp's stores run along rows) ----
#if LAYOUT_NHWC
  float* col = (float*)(ws + WS_COL) + (long)g * CI_CRS;
#define CI_COL_AT(n, mm) ((long)(mm) * (GROUPS * CI_CRS) + (n))
#else
  float* col = (float*)(ws + WS_COL) + (long)g * CI_CRS * CHUNK_ROWS;
#define CI_COL_AT(n, mm) ((long)(n) * CHUNK_ROWS + (mm))
#endif
  PRAGMA_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int mm = m0 + WG_ACC_ROW(r);
    if (mm >= rows) continue;
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, r);
      if (n < CI_CRS) col[CI_COL_AT(n, mm)] = acc[4 * j + r];
    }
  }
}

// dx of images n0 .. n0 + images - 1 from the chunk's columns: a work-item per dx element, the taps that reach it from
// a grid point: rows r with (h + PAD_H - r DILATION_H) a multiple of STRIDE_H (every STRIDE_H-th tap without
// dilation), likewise columns.
KERNEL void col2im_wgmma_gather(const unsigned char* RESTRICT ws, wg_elem* RESTRICT dx, int n0, int images) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)images * C * H * W) return;
#if LAYOUT_NHWC
  // Work-items in dx's channels-last order, so the stores run along channels.
  const int cc = (int)(idx % C), w = (int)(idx / C % W), h = (int)(idx / ((long)C * W) % H);
  const int nl = (int)(idx / ((long)C * H * W));
#else
  const int w = (int)(idx % W), h = (int)(idx / W % H);
  const int cc = (int)(idx / ((long)H * W) % C), nl = (int)(idx / ((long)C * H * W));
#endif
  const int g = cc / C_PER_GROUP, c = cc % C_PER_GROUP;
#if LAYOUT_NHWC
  // Row-major columns: this image's first row, this channel's taps.
  const float* col = (const float*)(ws + WS_COL) + (long)nl * CI_PQ * (GROUPS * CI_CRS) + (long)g * CI_CRS + (long)c * R * S;
#define CI_TAP(tap, row) col[(long)(row) * (GROUPS * CI_CRS) + (tap)]
#else
  const float* col = (const float*)(ws + WS_COL) + ((long)g * CI_CRS + (long)c * R * S) * CHUNK_ROWS + (long)nl * CI_PQ;
#define CI_TAP(tap, row) col[(long)(tap) * CHUNK_ROWS + (row)]
#endif
  const int r_first = DILATION_H == 1 ? (h + PAD_H) % STRIDE_H : 0, r_step = DILATION_H == 1 ? STRIDE_H : 1;
  const int s_first = DILATION_W == 1 ? (w + PAD_W) % STRIDE_W : 0, s_step = DILATION_W == 1 ? STRIDE_W : 1;
  float sum = 0.0f;
  for (int r = r_first; r < R; r += r_step) {
    const int ph = h + PAD_H - r * DILATION_H;
    if (ph < 0) break;  // and for every later r
    if (ph % STRIDE_H != 0 || ph / STRIDE_H >= P) continue;
    for (int s = s_first; s < S; s += s_step) {
      const int qw = w + PAD_W - s * DILATION_W;
      if (qw < 0) break;
      if (qw % STRIDE_W != 0 || qw / STRIDE_W >= Q) continue;
      sum += CI_TAP(r * S + s, (ph / STRIDE_H) * Q + qw / STRIDE_W);
    }
  }
#if LAYOUT_NHWC
  dx[(((long)(n0 + nl) * H + h) * W + w) * C + cc] = WG_FROM_FLOAT(sum);
#else
  dx[((long)(n0 + nl) * C + cc) * (H * W) + h * W + w] = WG_FROM_FLOAT(sum);
#endif
}

#if LAYOUT_NHWC
// dy channels-last ([n][pixel][group * K/groups + k]) into the workspace as dyt[n][pixel][group][KP], channels past
// K/groups zero: a 32 x 32 tile of (padded channel, pixel) a block of 32 x 8 threads, reads and writes along channels.
// Grid: x channel tiles, y pixel tiles, z images.
KERNEL void col2im_wgmma_dy(const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws) {
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const int c0 = (int)GROUP_ID(0) * 32, pix0 = (int)GROUP_ID(1) * 32, img = (int)GROUP_ID(2);
  wg_elem* dst = (wg_elem*)(ws + WS_DY) + (long)img * CI_PQ * CI_GKP;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int pix = pix0 + ty + 8 * i, cc = c0 + tx;
    const int grp = cc / KP, k = cc % KP;
    if (pix >= CI_PQ || cc >= CI_GKP) continue;
    const wg_elem value =
        k < K_PER_GROUP ? dy[((long)img * CI_PQ + pix) * K + grp * K_PER_GROUP + k] : (wg_elem)0;
    CI_STORE(dst, (long)pix * CI_GKP + cc, value);
  }
}
#else
// dy ([n][group * K/groups + k][pixel]) into the workspace as dyt[n][pixel][group][KP], channels past K/groups zero:
// a 32 x 32 tile of (padded channel, pixel) a block of 32 x 8 threads through shared memory, reads along pixels,
// writes along channels. Grid: x channel tiles, y pixel tiles, z images.
KERNEL void col2im_wgmma_dy(const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws) {
  __shared__ wg_elem tile[32][33];
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const int c0 = (int)GROUP_ID(0) * 32, pix0 = (int)GROUP_ID(1) * 32, img = (int)GROUP_ID(2);
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int cc = c0 + ty + 8 * i, pix = pix0 + tx;
    const int grp = cc / KP, k = cc % KP;
    wg_elem value = (wg_elem)0;
    if (cc < CI_GKP && k < K_PER_GROUP && pix < CI_PQ)
      value = dy[((long)img * K + grp * K_PER_GROUP + k) * CI_PQ + pix];
    tile[ty + 8 * i][tx] = value;
  }
  BARRIER();
  wg_elem* dst = (wg_elem*)(ws + WS_DY) + (long)img * CI_PQ * CI_GKP;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int pix = pix0 + ty + 8 * i, cc = c0 + tx;
    if (pix < CI_PQ && cc < CI_GKP) CI_STORE(dst, (long)pix * CI_GKP + cc, tile[tx][ty + 8 * i]);
  }
}
#endif

// wt[g][(c,r,s)][KP] = w[g K/G + k][c][r][s] (channels-last: w[g K/G + k][r][s][c]), channels past K/groups zero.
KERNEL void col2im_wgmma_weights(const wg_elem* RESTRICT w, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)GROUPS * CI_CRS * KP) return;
  const int k = (int)(idx % KP);
  const long row = idx / KP;
  const int g = (int)(row / CI_CRS), crs = (int)(row % CI_CRS);
#if LAYOUT_NHWC
  const long from = ((long)(g * K_PER_GROUP + k) * (R * S) + crs % (R * S)) * C_PER_GROUP + crs / (R * S);
#else
  const long from = (long)(g * K_PER_GROUP + k) * CI_CRS + crs;
#endif
  CI_STORE((wg_elem*)(ws + WS_W), idx, k < K_PER_GROUP ? w[from] : (wg_elem)0);
}
