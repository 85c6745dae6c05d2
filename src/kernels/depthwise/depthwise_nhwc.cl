// The depthwise_nhwc family: channels-last depthwise convolutions (groups == C == K) in FP32, BF16 or FP16 storage with
// FP32 arithmetic, for OpenCL and CUDA alike. Channels are the contiguous axis, so a work-item takes VEC consecutive
// channels with one 16-byte access (VEC = 4 FP32 or 8 16-bit elements; VEC = 1 where C is not a multiple) and
// neighbouring work-items take neighbouring channel vectors: every access is coalesced, and the per-channel filter
// taps are the only scattered reads (a few KB, cached).
//   forward          y[n][p][q][c]   = sum over (r, s) of x[n][p SH - PH + r DH][q SW - PW + s DW][c] w[c][r][s]
//   backward-data    dx[n][h][w][c]  = sum over the taps that reach (h, w) from a grid point (p, q) of dy[n][p][q][c] w[c][r][s]
//   backward-filter  dw[c][r][s]     = sum over (n, p, q) of x at the tap times dy, in SPLIT slices of the N x P output
//                                      rows (FP32 partials in the workspace), summed in order by dwn_filter_reduce
// Forward and backward-data: a work-item computes TILE_Q consecutive output (or dx) columns of one row. Backward-filter:
// a work-item holds S x VEC sums of one tap row r for its slice. Shapes, ELEM (0 FP32, 1 BF16, 2 FP16), VEC, TILE_Q
// and SPLIT are defines; the launches are one-dimensional.
#include "common/compat.h"

#include "common/elements.h"  // ct_load_vec, ct_store_vec: VEC channels in one 16-byte access

#define DWN_CV (C / VEC)  // channel vectors per pixel

#if DIRECTION == 0 || DIRECTION == 1
#if DIRECTION == 0
#define DWN_OUT_H P  // the written tensor's rows and columns
#define DWN_OUT_W Q
#else
#define DWN_OUT_H H
#define DWN_OUT_W W
#endif
#define DWN_COL_TILES ((DWN_OUT_W + TILE_Q - 1) / TILE_Q)

// Forward (x, w -> y) and backward-data (w, dy -> dx): work-item i takes channel vector i % DWN_CV of column tile
// (i / DWN_CV) % DWN_COL_TILES of output row i / (DWN_CV * DWN_COL_TILES) (that is, (n, row)).
KERNEL void depthwise_nhwc(const GLOBAL ct_elem* RESTRICT in, const GLOBAL ct_elem* RESTRICT w,
                           GLOBAL ct_elem* RESTRICT out) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)N * DWN_OUT_H * DWN_COL_TILES * DWN_CV) return;
  const int c = (int)(i % DWN_CV) * VEC;
  const long rest = i / DWN_CV;
  const int col0 = (int)(rest % DWN_COL_TILES) * TILE_Q;
  const long row = rest / DWN_COL_TILES;  // n * DWN_OUT_H + output row
  const int n = (int)(row / DWN_OUT_H), orow = (int)(row % DWN_OUT_H);
  float acc[TILE_Q][VEC];
  PRAGMA_UNROLL for (int t = 0; t < TILE_Q; ++t) {
    PRAGMA_UNROLL for (int v = 0; v < VEC; ++v) acc[t][v] = 0.0f;
  }
  for (int r = 0; r < R; ++r) {
#if DIRECTION == 0
    const int ih = orow * STRIDE_H - PAD_H + r * DILATION_H;
    if ((unsigned)ih >= (unsigned)H) continue;
    const GLOBAL ct_elem* in_row = in + ((long)n * H + ih) * W * C + c;
#else
    const int ph = orow + PAD_H - r * DILATION_H;
    if (ph < 0 || ph % STRIDE_H != 0 || ph / STRIDE_H >= P) continue;
    const GLOBAL ct_elem* in_row = in + ((long)n * P + ph / STRIDE_H) * Q * C + c;
#endif
    for (int s = 0; s < S; ++s) {
      float wv[VEC];
      PRAGMA_UNROLL for (int v = 0; v < VEC; ++v) wv[v] = ct_to_float(w[(long)(c + v) * (R * S) + r * S + s]);
      PRAGMA_UNROLL for (int t = 0; t < TILE_Q; ++t) {
        const int ocol = col0 + t;
#if DIRECTION == 0
        const int iw = ocol * STRIDE_W - PAD_W + s * DILATION_W;
        if (ocol >= Q || (unsigned)iw >= (unsigned)W) continue;
#else
        const int qw = ocol + PAD_W - s * DILATION_W;
        if (ocol >= W || qw < 0 || qw % STRIDE_W != 0 || qw / STRIDE_W >= Q) continue;
        const int iw = qw / STRIDE_W;
#endif
        float xv[VEC];
        ct_load_vec(in_row + (long)iw * C, xv);
        PRAGMA_UNROLL for (int v = 0; v < VEC; ++v) acc[t][v] = FMA(xv[v], wv[v], acc[t][v]);
      }
    }
  }
  GLOBAL ct_elem* out_row = out + (row * DWN_OUT_W) * C + c;
  PRAGMA_UNROLL for (int t = 0; t < TILE_Q; ++t) {
    if (col0 + t < DWN_OUT_W) ct_store_vec(out_row + (long)(col0 + t) * C, acc[t]);
  }
}
#endif

#if DIRECTION == 2
#define DWN_ROWS ((long)N * P)  // output rows, split into SPLIT slices

// Backward-filter: work-item i takes channel vector i % DWN_CV, tap row (i / DWN_CV) % R and slice i / (DWN_CV * R)
// of the output rows, and writes its S x VEC partial sums to partial[slice][c][r][s].
KERNEL void depthwise_nhwc_filter(const GLOBAL ct_elem* RESTRICT x, const GLOBAL ct_elem* RESTRICT dy,
                                  GLOBAL float* RESTRICT partial) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)SPLIT * R * DWN_CV) return;
  const int c = (int)(i % DWN_CV) * VEC;
  const int r = (int)(i / DWN_CV % R), slice = (int)(i / ((long)DWN_CV * R));
  const long per = (DWN_ROWS + SPLIT - 1) / SPLIT, first = slice * per;
  const long last = first + per < DWN_ROWS ? first + per : DWN_ROWS;
  float acc[S][VEC];
  PRAGMA_UNROLL for (int s = 0; s < S; ++s) {
    PRAGMA_UNROLL for (int v = 0; v < VEC; ++v) acc[s][v] = 0.0f;
  }
  for (long row = first; row < last; ++row) {
    const int n = (int)(row / P), p = (int)(row % P);
    const int ih = p * STRIDE_H - PAD_H + r * DILATION_H;
    if ((unsigned)ih >= (unsigned)H) continue;
    const GLOBAL ct_elem* x_row = x + ((long)n * H + ih) * W * C + c;
    const GLOBAL ct_elem* dy_row = dy + row * Q * C + c;
    for (int q = 0; q < Q; ++q) {
      float dv[VEC];
      ct_load_vec(dy_row + (long)q * C, dv);
      PRAGMA_UNROLL for (int s = 0; s < S; ++s) {
        const int iw = q * STRIDE_W - PAD_W + s * DILATION_W;
        if ((unsigned)iw >= (unsigned)W) continue;
        float xv[VEC];
        ct_load_vec(x_row + (long)iw * C, xv);
        PRAGMA_UNROLL for (int v = 0; v < VEC; ++v) acc[s][v] = FMA(xv[v], dv[v], acc[s][v]);
      }
    }
  }
  GLOBAL float* out = partial + (long)slice * C * R * S;
  PRAGMA_UNROLL for (int v = 0; v < VEC; ++v) {
    PRAGMA_UNROLL for (int s = 0; s < S; ++s) out[(long)(c + v) * (R * S) + r * S + s] = acc[s][v];
  }
}

// dw[c][r][s] = the slices' partial sums, added in slice order (deterministic), rounded once.
KERNEL void dwn_filter_reduce(const GLOBAL float* RESTRICT partial, GLOBAL ct_elem* RESTRICT dw) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)C * R * S) return;
  float sum = 0.0f;
  for (int slice = 0; slice < SPLIT; ++slice) sum += partial[(long)slice * C * R * S + i];
  dw[i] = ct_from_float(sum);
}
#endif
