// FFT tiling (the fft family): stride-1 convolutions as pointwise products in the frequency domain of T x T tiles.
// Each tile's real 2-D DFT (T x (T/2 + 1) complex bins, Hermitian symmetry dropping the rest) is taken by direct
// DFTs along rows then columns in local memory; per bin, the complex products summed over channels are one real
// GEMM of twice the size (gemm.cl, batched over groups x bins); the inverse DFT keeps the outputs that did not wrap.
//   forward / backward-data: Y(bin) = W'(bin) X(bin), W' = conj(DFT(filter)) (correlation), as the real block
//     [[Wr, -Wi], [Wi, Wr]] (2 OUT x 2 IN) times [Xr; Xi] (2 IN x tiles) = [Yr; Yi];
//   backward-filter: per bin [DYr; DYi] (2K x tiles) times [Xr; Xi]^T (tiles x 2C); the filter output transform
//     forms X conj(DY) = (rr + ii) + i (ri - ir) from the four blocks and inverts it.
// With GAUSS, three real GEMMs per bin instead (Gauss's product, 3/4 of the multiplications, on planes of the
// channels' own size): forward and backward-data Wr Xr, Wi Xi, (Wr + Wi)(Xr + Xi) give Yr = P0 - P1 and Yi = P2 - P0
// - P1; backward-filter DYr Xr, DYi Xi, (DYr - DYi)(Xr + Xi) give Re = P0 + P1 and Im = P2 - P0 + P1.
// Host side: src/families/fft/fft_plan.cpp (layout, twiddles FFT_COS/FFT_SIN, launches).
#include "common/compat.h"

#ifndef FFT_T  // defaults only so the file compiles on its own (tests pass every define)
#define N 1
#define C 4
#define H 8
#define W 8
#define K 4
#define R 3
#define S 3
#define P 8
#define Q 8
#define PAD_H 1
#define PAD_W 1
#define GROUPS 1
#define C_PER_GROUP 4
#define K_PER_GROUP 4
#define DIRECTION 0
#define FFT_T 8
#define FFT_H2 5
#define TILE_OH 6
#define TILE_OW 6
#define TILES_Y 2
#define TILES_X 2
#define BATCH_CHUNK 1
#define TRANSFORM_TILES 4
#define V_OFFSET 0
#define M_OFFSET 0
#define FFT_COS 1.f, 0.70710678f, 0.f, -0.70710678f, -1.f, -0.70710678f, 0.f, 0.70710678f
#define FFT_SIN 0.f, 0.70710678f, 1.f, 0.70710678f, 0.f, -0.70710678f, -1.f, -0.70710678f
#endif

#ifndef GAUSS
#define GAUSS 0
#endif
// Planes of a transformed operand: re and im, and with GAUSS their sum (x) or difference (dy) for Gauss's product.
#define PLANES (GAUSS ? 3 : 2)
#ifndef SPLIT
#define SPLIT 1  // backward-filter: slices of the tiles whose GEMMs run side by side (each its own copy of M)
#endif
#ifndef DFT_UNROLL
#define DFT_UNROLL 1
#endif
// The DFT loops, unrolled on GPUs (every twiddle index a compile-time constant: zeros and ones fold away). CPU devices
// (PoCL) take them rolled: same arithmetic, and their compiler spends seconds per kernel on the unrolled T = 32
// transforms, which made the conformance runs on CI several minutes longer.
#if DFT_UNROLL
#define DFT_LOOP PRAGMA_UNROLL
#else
#define DFT_LOOP PRAGMA_NO_UNROLL
#endif
#define TG TRANSFORM_TILES  // tiles one transform work-group takes; its threads are TG x FFT_T, tile fastest
#define TILES ((BATCH_CHUNK * TILES_Y * TILES_X + SPLIT - 1) / SPLIT * SPLIT)
#define BINS (FFT_T * FFT_H2)  // bin (u, v) at u * FFT_H2 + v: u over the columns' T, v over the rows' T/2 + 1
#define INV_AREA (1.0f / (float)(FFT_T * FFT_T))

// acc += c * x, where c is an entry of a twiddle table indexed by a compile-time constant (the loops around are
// unrolled): zeros drop out at compile time instead of costing an FMA each.
#define TW_FMA(table, index, x, acc)                 \
  do {                                               \
    const float tw_ = table[(index) % FFT_T];        \
    if (tw_ != 0.0f) (acc) = FMA(tw_, (x), (acc));   \
  } while (0)

// The data side, the same in every direction: which tensor is cut into T x T tiles (TILE_OH x TILE_OW apart).
#if DIRECTION == 1
#define IN_CH K_PER_GROUP
#define IN_TOTAL K
#define IN_H P
#define IN_W Q
#define PADH (R - 1 - PAD_H)  // may be negative (pad > R-1): the tiles then start inside dy
#define PADW (S - 1 - PAD_W)
#else
#define IN_CH C_PER_GROUP
#define IN_TOTAL C
#define IN_H H
#define IN_W W
#define PADH PAD_H
#define PADW PAD_W
#endif

// The column DFTs split by RADIX (4 where T allows, else 2), Cooley-Tukey's first step: RADIX sub-DFTs of length
// SUB = T / RADIX over the inputs y = RADIX j + r, then X[u] = sum_r e^{SGN 2 pi i r u / T} S_r[u mod SUB]. On T = 32
// that is 1,536 FMAs a column against 4,096 for the direct sum (measured on the H200: the direct output transform of
// alex2 took as long as its GEMM).
#if FFT_T % 4 == 0
#define RADIX 4
#else
#define RADIX 2
#endif
#define SUB (FFT_T / RADIX)

// X[u] = sum_{y < IN_LEN} (ar + i ai)[y] e^{SGN 2 pi i u y / T} for u < OUT_LEN, each handed to STORE(u, re, im) as
// it is formed; SGN is -1 (forward) or 1 (inverse). kCos and kSin must be in scope.
#define CDFT(IN_LEN, ar, ai, OUT_LEN, SGN, STORE)                                                    \
  do {                                                                                               \
    float sr_[RADIX][SUB], si_[RADIX][SUB];                                                          \
    DFT_LOOP                                                                                         \
    for (int r_ = 0; r_ < RADIX; ++r_)                                                               \
      DFT_LOOP                                                                                       \
      for (int k_ = 0; k_ < SUB; ++k_) {                                                             \
        float re_ = 0.0f, im_ = 0.0f; /* (a + i b)(cos + SGN i sin) */                               \
        DFT_LOOP                                                                                     \
        for (int j_ = 0; j_ < SUB; ++j_) {                                                           \
          const int y_ = RADIX * j_ + r_;                                                            \
          if (y_ < (IN_LEN)) {                                                                       \
            TW_FMA(kCos, RADIX * j_ * k_, (ar)[y_], re_);                                            \
            TW_FMA(kSin, RADIX * j_ * k_, -(SGN) * (ai)[y_], re_);                                   \
            TW_FMA(kCos, RADIX * j_ * k_, (ai)[y_], im_);                                            \
            TW_FMA(kSin, RADIX * j_ * k_, (SGN) * (ar)[y_], im_);                                    \
          }                                                                                          \
        }                                                                                            \
        sr_[r_][k_] = re_, si_[r_][k_] = im_;                                                        \
      }                                                                                              \
    DFT_LOOP                                                                                         \
    for (int u_ = 0; u_ < (OUT_LEN); ++u_) {                                                         \
      float re_ = 0.0f, im_ = 0.0f;                                                                  \
      DFT_LOOP                                                                                       \
      for (int r_ = 0; r_ < RADIX; ++r_) {                                                           \
        TW_FMA(kCos, r_ * u_, sr_[r_][u_ % SUB], re_);                                               \
        TW_FMA(kSin, r_ * u_, -(SGN) * si_[r_][u_ % SUB], re_);                                      \
        TW_FMA(kCos, r_ * u_, si_[r_][u_ % SUB], im_);                                               \
        TW_FMA(kSin, r_ * u_, (SGN) * sr_[r_][u_ % SUB], im_);                                       \
      }                                                                                              \
      STORE(u_, re_, im_);                                                                           \
    }                                                                                                \
  } while (0)

// The forward 2-D DFT of one tile per (tl) column of the work-group, into `out` (re at out[bin * BIN_STRIDE], im
// IM_OFFSET further, and with GAUSS re + THIRD * im IM_OFFSET further again). The tile is plane[(y0 + y) * plane_w + x0 + x] for y < ROWS, x < COLS, zero outside the plane
// and beyond ROWS x COLS (all of it when !load); stored when `store`. lane: the thread's row (first stage) and
// column bin (second). Every thread of the work-group must reach it (barrier).
#define FFT_FORWARD_TILE(ROWS, COLS, plane, plane_h, plane_w, y0, x0, load, store, out, BIN_STRIDE, IM_OFFSET, THIRD) \
  do {                                                                                                            \
    const float kCos[FFT_T] = {FFT_COS};                                                                          \
    const float kSin[FFT_T] = {FFT_SIN};                                                                          \
    if (lane < (ROWS)) {                                                                                          \
      const int y_ = (y0) + lane;                                                                                 \
      const bool row_in_ = (load) && y_ >= 0 && y_ < (plane_h);                                                   \
      float d_[COLS];                                                                                             \
      DFT_LOOP                                                                                               \
      for (int x = 0; x < (COLS); ++x) {                                                                          \
        const int xx_ = (x0) + x;                                                                                 \
        d_[x] = row_in_ && xx_ >= 0 && xx_ < (plane_w) ? (plane)[(long)y_ * (plane_w) + xx_] : 0.0f;              \
      }                                                                                                           \
      DFT_LOOP                                                                                               \
      for (int v = 0; v < FFT_H2; ++v) {                                                                          \
        float re_ = 0.0f, im_ = 0.0f;                                                                             \
        DFT_LOOP                                                                                             \
        for (int x = 0; x < (COLS); ++x) {                                                                        \
          TW_FMA(kCos, v * x, d_[x], re_);                                                                        \
          TW_FMA(kSin, v * x, -d_[x], im_);                                                                       \
        }                                                                                                         \
        s_re[(lane * FFT_H2 + v) * TG + tl] = re_;                                                                \
        s_im[(lane * FFT_H2 + v) * TG + tl] = im_;                                                                \
      }                                                                                                           \
    }                                                                                                             \
    BARRIER();                                                                                                    \
    if (lane < FFT_H2 && (store)) {                                                                               \
      GLOBAL float* out_ = (out);                                                                                 \
      const long bin_stride_ = (BIN_STRIDE), im_offset_ = (IM_OFFSET);                                           \
      const float third_ = (THIRD);                                                                               \
      float ar_[ROWS], ai_[ROWS];                                                                                 \
      DFT_LOOP                                                                                               \
      for (int y = 0; y < (ROWS); ++y) {                                                                          \
        ar_[y] = s_re[(y * FFT_H2 + lane) * TG + tl];                                                             \
        ai_[y] = s_im[(y * FFT_H2 + lane) * TG + tl];                                                             \
      }                                                                                                           \
      CDFT(ROWS, ar_, ai_, FFT_T, -1, FFT_STORE_BIN);                                                             \
    }                                                                                                             \
  } while (0)

// FFT_FORWARD_TILE's store of bin (u, lane).
#define FFT_STORE_BIN(u, re, im)                                                          \
  do {                                                                                    \
    out_[(long)((u) * FFT_H2 + lane) * bin_stride_] = (re);                               \
    out_[(long)((u) * FFT_H2 + lane) * bin_stride_ + im_offset_] = (im);                  \
    if (GAUSS) out_[(long)((u) * FFT_H2 + lane) * bin_stride_ + 2 * im_offset_] = FMA(third_, (im), (re)); \
  } while (0)

// The transform kernels' work-group: TG tiles x FFT_T lanes, tile fastest (coalesced stores over the tiles).
#define TRANSFORM_ITEM_SETUP(ITEMS)                    \
  const int tl = LOCAL_ID(0) % TG;                     \
  const int lane = LOCAL_ID(0) / TG;                   \
  const long item = GROUP_ID(0) * TG + tl;             \
  const bool item_in = item < (long)(ITEMS);           \
  LOCAL_ARRAY float s_buf[2 * FFT_T * FFT_H2 * TG];   \
  LOCAL float* s_re = s_buf;                           \
  LOCAL float* s_im = s_buf + FFT_T * FFT_H2 * TG

// ---- V[g][bin][re/im][ch][t] = DFT of every (group, channel, tile of the chunk); padding and images past the
// chunk's count read as zero (backward-filter sums over every tile, so they must be numbers).
KERNEL void fft_input_transform(GLOBAL const float* RESTRICT in, GLOBAL float* RESTRICT workspace, const int image0,
                                const int count) {
  TRANSFORM_ITEM_SETUP(GROUPS * IN_CH * TILES);
  const long it = item_in ? item : 0;
  const int t = (int)(it % TILES), ch = (int)((it / TILES) % IN_CH), g = (int)(it / ((long)TILES * IN_CH));
  const int n = t / (TILES_Y * TILES_X), ty = (t / TILES_X) % TILES_Y, tx = t % TILES_X;
  const bool image_inside = item_in && n < count;
  GLOBAL const float* plane = in + ((long)(image0 + (image_inside ? n : 0)) * IN_TOTAL + (long)g * IN_CH + ch) * IN_H * IN_W;
  GLOBAL float* dst = workspace + V_OFFSET + (long)g * BINS * PLANES * IN_CH * TILES + (long)ch * TILES + t;
  // Tiles past the chunk's images are transformed as zeros (written, since backward-filter reads them).
  FFT_FORWARD_TILE(FFT_T, FFT_T, plane, IN_H, IN_W, ty * TILE_OH - PADH, tx * TILE_OW - PADW, image_inside, item_in,
                   dst, (long)PLANES * IN_CH * TILES, (long)IN_CH * TILES, 1.0f);
}

#if DIRECTION != 2
// ======== forward and backward-data
#if DIRECTION == 0
#define OUT_CH K_PER_GROUP
#define OUT_TOTAL K
#define OUT_H P
#define OUT_W Q
// w is K x C/groups x R x S: output channel oc of the group, input channel ic.
#define FILTER_TAP(g, oc, ic, i, j) (((((g) * OUT_CH + (oc)) * IN_CH + (ic)) * R + (i)) * S + (j))
#else
#define OUT_CH C_PER_GROUP
#define OUT_TOTAL C
#define OUT_H H
#define OUT_W W
// The same w read as K/groups x C/groups per group, rotated: dx is the correlation of dy with the flipped filter.
#define FILTER_TAP(g, oc, ic, i, j) (((((g) * IN_CH + (ic)) * OUT_CH + (oc)) * R + (R - 1 - (i))) * S + (S - 1 - (j)))
#endif

// ---- U[g][bin] = [[Wr, -Wi], [Wi, Wr]] (2 OUT_CH x 2 IN_CH) with W' = conj(DFT(w zero-padded to T x T)), for
// every (column bin v, group, output channel, input channel): a thread per column of bins, channel pairs fastest.
KERNEL void fft_filter_transform(GLOBAL const float* RESTRICT w, GLOBAL float* RESTRICT workspace) {
  const long id = GLOBAL_ID(0);
  const long pairs = (long)GROUPS * OUT_CH * IN_CH;
  if (id >= pairs * FFT_H2) return;
  const int v = (int)(id / pairs);
  const int ic = (int)(id % IN_CH), oc = (int)((id / IN_CH) % OUT_CH), g = (int)((id % pairs) / ((long)IN_CH * OUT_CH));
  const float kCos[FFT_T] = {FFT_COS};
  const float kSin[FFT_T] = {FFT_SIN};
  float rr[R], ri[R];  // sum_j w[i][j] e^{+2 pi i v j / T}
  DFT_LOOP
  for (int i = 0; i < R; ++i) {
    float re = 0.0f, im = 0.0f;
    DFT_LOOP
    for (int j = 0; j < S; ++j) {
      const float tap = w[FILTER_TAP(g, oc, ic, i, j)];
      const int k = (v * j) % FFT_T;
      re = FMA(kCos[k], tap, re);
      im = FMA(kSin[k], tap, im);
    }
    rr[i] = re, ri[i] = im;
  }
#if GAUSS
  const long plane_size = (long)OUT_CH * IN_CH;  // U[g][bin][plane][oc][ic]: Wr, Wi, Wr + Wi
  GLOBAL float* u0 = workspace + (long)g * BINS * 3 * plane_size + (long)oc * IN_CH + ic;
#else
  const long row = 2L * IN_CH;  // U's row pitch
  GLOBAL float* u0 = workspace + (long)g * BINS * 2 * OUT_CH * row + (long)oc * row + ic;
#endif
  DFT_LOOP
  for (int u = 0; u < FFT_T; ++u) {
    float re = 0.0f, im = 0.0f;  // sum_i (rr + i ri)(cos + i sin)
    DFT_LOOP
    for (int i = 0; i < R; ++i) {
      TW_FMA(kCos, u * i, rr[i], re);
      TW_FMA(kSin, u * i, -ri[i], re);
      TW_FMA(kCos, u * i, ri[i], im);
      TW_FMA(kSin, u * i, rr[i], im);
    }
#if GAUSS
    GLOBAL float* dst = u0 + (long)(u * FFT_H2 + v) * 3 * plane_size;
    dst[0] = re;
    dst[plane_size] = im;
    dst[2 * plane_size] = re + im;
#else
    GLOBAL float* dst = u0 + (long)(u * FFT_H2 + v) * 2 * OUT_CH * row;
    dst[0] = re;
    dst[IN_CH] = -im;
    dst[OUT_CH * row] = im;
    dst[OUT_CH * row + IN_CH] = re;
#endif
  }
}

// ---- M = U V: per group and bin, (2 OUT_CH x 2 IN_CH) times (2 IN_CH x TILES), one batched GEMM (work-group axis
// 2 runs over groups x bins). A, B and C are all the workspace, at the offsets of U, V and M.
// With GAUSS: (OUT_CH x IN_CH) times (IN_CH x TILES) per group, bin and plane (axis 2 runs over all three).
#if GAUSS
#define GEMM_M OUT_CH
#define GEMM_K IN_CH
#define A_BASE ((long)group * OUT_CH * IN_CH)
#define B_BASE (V_OFFSET + (long)group * IN_CH * TILES)
#define C_BASE (M_OFFSET + (long)group * OUT_CH * TILES)
#else
#define GEMM_M (2 * OUT_CH)
#define GEMM_K (2 * IN_CH)
#define A_BASE ((long)group * 4 * OUT_CH * IN_CH)
#define B_BASE (V_OFFSET + (long)group * 2 * IN_CH * TILES)
#define C_BASE (M_OFFSET + (long)group * 2 * OUT_CH * TILES)
#endif
#define GEMM_N TILES
#define A_TRANS 0
#define B_TRANS 0
#define ACCUMULATE 0
#define A_LD GEMM_K
#define A_SEG 0
#define A_SEG_STRIDE 0
#define B_LD TILES
#define B_SEG 0
#define B_SEG_STRIDE 0
#define C_LD TILES
#define C_SEG 0
#define C_SEG_STRIDE 0

// The forward epilogue, fused into the output transform: bias per output channel and ReLU.
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef HAS_RELU
#define HAS_RELU 0
#endif

// fft_output_transform's store of the first stage's row a, column bin lane.
#define FFT_STORE_COLUMN(a, re, im)                     \
  do {                                                  \
    s_re[((a) * FFT_H2 + lane) * TG + tl] = (re);       \
    s_im[((a) * FFT_H2 + lane) * TG + tl] = (im);       \
  } while (0)

// ---- y = the first TILE_OH x TILE_OW of IDFT(M) for every (group, output channel, tile): columns (u -> a) in the
// first stage, the half-spectrum rows (v -> b, Hermitian) in the second.
KERNEL void fft_output_transform(GLOBAL const float* RESTRICT workspace, GLOBAL float* RESTRICT out, const int image0,
                                 const int count
#if HAS_BIAS
                                 , GLOBAL const float* RESTRICT bias
#endif
) {
  TRANSFORM_ITEM_SETUP(GROUPS * OUT_CH * TILES);
  const float kCos[FFT_T] = {FFT_COS};
  const float kSin[FFT_T] = {FFT_SIN};
  const long it = item_in ? item : 0;
  const int t = (int)(it % TILES), oc = (int)((it / TILES) % OUT_CH), g = (int)(it / ((long)TILES * OUT_CH));
  const int n = t / (TILES_Y * TILES_X), ty = (t / TILES_X) % TILES_Y, tx = t % TILES_X;
  const bool active = item_in && n < count;
  if (lane < FFT_H2 && active) {
    GLOBAL const float* m = workspace + M_OFFSET + (long)g * BINS * PLANES * OUT_CH * TILES + (long)oc * TILES + t;
    const long bin_stride = (long)PLANES * OUT_CH * TILES, plane = (long)OUT_CH * TILES;
    float yr[FFT_T], yi[FFT_T];
    DFT_LOOP
    for (int u = 0; u < FFT_T; ++u) {
      GLOBAL const float* b = m + (long)(u * FFT_H2 + lane) * bin_stride;
#if GAUSS
      const float p0 = b[0], p1 = b[plane];
      yr[u] = p0 - p1, yi[u] = b[2 * plane] - p0 - p1;
#else
      yr[u] = b[0], yi[u] = b[plane];
#endif
    }
    CDFT(FFT_T, yr, yi, TILE_OH, 1, FFT_STORE_COLUMN);
  }
  BARRIER();
  // Second stage: each (tile, row a) thread forms its row of outputs into local memory (the first stage's values
  // read first), and the work-group then writes every tile's rows with consecutive work-items on consecutive
  // columns. Written straight from the row threads, a warp's stores went to 32 rows of 8 images each: the H200 took
  // as long for this transform as for the GEMM on alex2.
  const bool row_active = lane < TILE_OH && active;
  float zr[FFT_H2], zi[FFT_H2];
  if (row_active) {
    DFT_LOOP
    for (int v = 0; v < FFT_H2; ++v) {
      // Bins 1 .. T/2-1 stand for their mirror images too (Hermitian): twice the weight; 0 and T/2 once.
      const float weight = (v == 0 || 2 * v == FFT_T ? 1.0f : 2.0f) * INV_AREA;
      zr[v] = weight * s_re[(lane * FFT_H2 + v) * TG + tl];
      zi[v] = weight * s_im[(lane * FFT_H2 + v) * TG + tl];
    }
  }
  BARRIER();
  if (row_active) {
#if HAS_BIAS
    const float shift = bias[g * OUT_CH + oc];
#else
    const float shift = 0.0f;
#endif
    LOCAL float* staged = s_buf + (tl * TILE_OH + lane) * TILE_OW;
    DFT_LOOP
    for (int b = 0; b < TILE_OW; ++b) {
      float sum = shift;  // Re sum_v z (cos + i sin)
      DFT_LOOP
      for (int v = 0; v < FFT_H2; ++v) {
        TW_FMA(kCos, v * b, zr[v], sum);
        TW_FMA(kSin, v * b, -zi[v], sum);
      }
#if HAS_RELU
      sum = fmax(sum, 0.0f);
#endif
      staged[b] = sum;
    }
  }
  BARRIER();
  PRAGMA_NO_UNROLL
  for (int i = LOCAL_ID(0); i < TG * TILE_OH * TILE_OW; i += TG * FFT_T) {
    const int b = i % TILE_OW, a = (i / TILE_OW) % TILE_OH, tile = i / (TILE_OW * TILE_OH);
    const long it2 = GROUP_ID(0) * TG + tile;
    if (it2 >= (long)GROUPS * OUT_CH * TILES) continue;
    const int t2 = (int)(it2 % TILES), oc2 = (int)((it2 / TILES) % OUT_CH), g2 = (int)(it2 / ((long)TILES * OUT_CH));
    const int n2 = t2 / (TILES_Y * TILES_X), y = ((t2 / TILES_X) % TILES_Y) * TILE_OH + a, x = (t2 % TILES_X) * TILE_OW + b;
    if (n2 < count && y < OUT_H && x < OUT_W)
      out[((long)(image0 + n2) * OUT_TOTAL + (long)g2 * OUT_CH + oc2) * OUT_H * OUT_W + (long)y * OUT_W + x] = s_buf[i];
  }
}

#else
// ======== backward-filter: per bin, the dy tiles' DFTs against the x tiles' (both T x T, dy zero beyond its
// TILE_OH x TILE_OW); the filter gradient is the first R x S of the correlation's inverse.

// ---- U[g][bin][re/im][k][t] = DFT of every (group, output channel k, tile) of dy; outside dy and past the chunk:
// zero.
KERNEL void fft_gradient_transform(GLOBAL const float* RESTRICT dy, GLOBAL float* RESTRICT workspace,
                                   const int image0, const int count) {
  TRANSFORM_ITEM_SETUP(GROUPS * K_PER_GROUP * TILES);
  const long it = item_in ? item : 0;
  const int t = (int)(it % TILES), k = (int)((it / TILES) % K_PER_GROUP), g = (int)(it / ((long)TILES * K_PER_GROUP));
  const int n = t / (TILES_Y * TILES_X), ty = (t / TILES_X) % TILES_Y, tx = t % TILES_X;
  const bool image_inside = item_in && n < count;
  GLOBAL const float* plane = dy + ((long)(image0 + (image_inside ? n : 0)) * K + (long)g * K_PER_GROUP + k) * P * Q;
  GLOBAL float* dst = workspace + (long)g * BINS * PLANES * K_PER_GROUP * TILES + (long)k * TILES + t;
  FFT_FORWARD_TILE(TILE_OH, TILE_OW, plane, P, Q, ty * TILE_OH, tx * TILE_OW, image_inside, item_in, dst,
                   (long)PLANES * K_PER_GROUP * TILES, (long)K_PER_GROUP * TILES, -1.0f);
}

#define M_BIN ((long)(GAUSS ? 3 : 4) * K_PER_GROUP * C_PER_GROUP)  // floats of one bin's M
#define M_COPY ((long)GROUPS * BINS * M_BIN)                           // floats of one slice's M

#ifndef FFT_CHUNKS
#define FFT_CHUNKS 1
#endif
// ---- M is cleared once before the first chunk where there are several: every chunk's GEMM adds into it (a single
// chunk's GEMM writes M instead).
KERNEL void fft_zero(GLOBAL float* RESTRICT workspace) {
  const long id = GLOBAL_ID(0);
  if (id < SPLIT * M_COPY) workspace[M_OFFSET + id] = 0.0f;
}

// ---- M += U V^T: per slice, group and bin, (2K/groups x TILES/SPLIT) times (TILES/SPLIT x 2C/groups), the V
// tiles stored channel-major (B_TRANS). Work-group axis 2 runs over slices x groups x bins; each slice adds into its
// own copy of M, which the filter output transform sums.
// With GAUSS: (K/groups x TILES/SPLIT) times (TILES/SPLIT x C/groups) per slice, group, bin and plane; axis 2's
// index within a slice is then (group x bin) x 3 + plane, as the planes are stored.
#define SLICE (group / (GROUPS * BINS * (GAUSS ? 3 : 1)))
#define GROUP_BIN (group % (GROUPS * BINS * (GAUSS ? 3 : 1)))
#if GAUSS
#define GEMM_M K_PER_GROUP
#define GEMM_N C_PER_GROUP
#else
#define GEMM_M (2 * K_PER_GROUP)
#define GEMM_N (2 * C_PER_GROUP)
#endif
#define GEMM_K (TILES / SPLIT)
#define A_TRANS 0
#define B_TRANS 1
#define ACCUMULATE (FFT_CHUNKS > 1)
#define A_LD TILES
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE ((long)GROUP_BIN * GEMM_M * TILES + (long)SLICE * GEMM_K)
#define B_LD TILES
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE (V_OFFSET + (long)GROUP_BIN * GEMM_N * TILES + (long)SLICE * GEMM_K)
#define C_LD GEMM_N
#define C_SEG 0
#define C_SEG_STRIDE 0
#define C_BASE (M_OFFSET + SLICE * M_COPY + (long)GROUP_BIN * GEMM_M * GEMM_N)

// ---- dw = the first R x S of IDFT(X conj(DY)) for every (group, k, c), the slices' M summed: X conj(DY) =
// (rr + ii) + i (ri - ir) from the four blocks of M (rows DY re/im, columns X re/im).
KERNEL void fft_filter_output_transform(GLOBAL const float* RESTRICT workspace, GLOBAL float* RESTRICT dw) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)GROUPS * K_PER_GROUP * C_PER_GROUP) return;
  const int c = (int)(id % C_PER_GROUP), k = (int)((id / C_PER_GROUP) % K_PER_GROUP);
  const int g = (int)(id / ((long)C_PER_GROUP * K_PER_GROUP));
  const float kCos[FFT_T] = {FFT_COS};
  const float kSin[FFT_T] = {FFT_SIN};
#if GAUSS
  const long plane = (long)K_PER_GROUP * C_PER_GROUP;  // M[g][bin][plane][k][c]
  GLOBAL const float* m = workspace + M_OFFSET + (long)g * BINS * M_BIN + (long)k * C_PER_GROUP + c;
#else
  const long row = 2L * C_PER_GROUP;  // M[g][bin][re/im of dy][k][re/im of x][c]
  GLOBAL const float* m = workspace + M_OFFSET + (long)g * BINS * M_BIN + (long)k * row + c;
  const long im_rows = (long)K_PER_GROUP * row;
#endif
  float taps[R][S];
  DFT_LOOP
  for (int i = 0; i < R; ++i)
    DFT_LOOP
    for (int j = 0; j < S; ++j) taps[i][j] = 0.0f;
  PRAGMA_NO_UNROLL
  for (int v = 0; v < FFT_H2; ++v) {
    float cr[FFT_T], ci[FFT_T];
    DFT_LOOP
    for (int u = 0; u < FFT_T; ++u) {
      GLOBAL const float* b = m + (long)(u * FFT_H2 + v) * M_BIN;
#if GAUSS
      float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f;
      for (int slice = 0; slice < SPLIT; ++slice)
        p0 += b[slice * M_COPY], p1 += b[slice * M_COPY + plane], p2 += b[slice * M_COPY + 2 * plane];
      cr[u] = p0 + p1, ci[u] = p2 - p0 + p1;
#else
      float rr = 0.0f, ri = 0.0f, ir = 0.0f, ii = 0.0f;
      for (int slice = 0; slice < SPLIT; ++slice) {
        rr += b[slice * M_COPY], ri += b[slice * M_COPY + C_PER_GROUP];
        ir += b[slice * M_COPY + im_rows], ii += b[slice * M_COPY + im_rows + C_PER_GROUP];
      }
      cr[u] = rr + ii, ci[u] = ri - ir;
#endif
    }
    const float weight = (v == 0 || 2 * v == FFT_T ? 1.0f : 2.0f) * INV_AREA;
    DFT_LOOP
    for (int i = 0; i < R; ++i) {
      float zr = 0.0f, zi = 0.0f;  // sum_u (cr + i ci)(cos + i sin)
      DFT_LOOP
      for (int u = 0; u < FFT_T; ++u) {
        TW_FMA(kCos, u * i, cr[u], zr);
        TW_FMA(kSin, u * i, -ci[u], zr);
        TW_FMA(kCos, u * i, ci[u], zi);
        TW_FMA(kSin, u * i, cr[u], zi);
      }
      zr *= weight, zi *= weight;
      DFT_LOOP
      for (int j = 0; j < S; ++j) {
        const int e = (v * j) % FFT_T;
        taps[i][j] = FMA(kCos[e], zr, FMA(-kSin[e], zi, taps[i][j]));
      }
    }
  }
  GLOBAL float* out = dw + (((long)g * K_PER_GROUP + k) * C_PER_GROUP + c) * R * S;
  DFT_LOOP
  for (int i = 0; i < R; ++i)
    DFT_LOOP
    for (int j = 0; j < S; ++j) out[i * S + j] = taps[i][j];
}
#endif

// The GEMM of either branch, with the layout macros it defined (the source is included once: the include expander
// takes each file once per program).
#include "gemm/gemm.cl"
