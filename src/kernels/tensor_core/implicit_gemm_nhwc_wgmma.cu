// The implicit_gemm_nhwc_wgmma family: forward and backward-data convolutions as implicit GEMMs on Hopper's wgmma
// (wgmma.h, wg_mainloop.h) over a channels-last copy of the gathered tensor, so that both operands reach shared
// memory by 16-byte cp.async copies like a plain GEMM's (gemm_wgmma.cu), none through registers:
//   forward         A[(n,p,q)][(r,s,c)] = xt at the tap's pixel      B[k][(r,s,c)] = w reordered (workspace)
//   backward-data   A[(n,h,w)][(r,s,k)] = dyt where the tap lands    B[c][(r,s,k)] = w reordered (workspace)
// xt / dyt: x or dy as [n][pixel][group][CP] with each group's channels padded to CP (a multiple of the 16-byte
// chunk), written by wgn_to_channels_last through a shared-memory tile. The reduction runs over taps, then channels,
// so a 16-byte chunk is CHUNK channels of one tap at one pixel: one bounds check and one copy (zero-filled off the
// image, between a strided backward-data's grid points and past the reduction). Forward fuses bias, a residual (y's
// shape and layout) and ReLU with an optional clamp (ReLU6).
// Strided backward-data (channels-last, PHASED=1) runs by phases: grid z holds GROUPS x STRIDE_H*STRIDE_W blocks
// layers, phase (a, b) computing the dx pixels (a + STRIDE_H i, b + STRIDE_W j) over the taps that reach them (r with
// a + PAD_H - r DILATION_H a multiple of STRIDE_H, likewise s), so every product is computed once and no chunk of A is
// a masked zero (masked, stride 2 would spend 3/4 of the MMAs on zeros).
// Channels-last problems (LAYOUT_NHWC=1) read and write x, w and y in their own layout: the gathered tensor is read in
// place where each group's channels are whole chunks (DIRECT_A: it is already xt / dyt, CP the group's channels), and
// so are the forward filters (DIRECT_B: w as (K, R, S, C/groups) is already wr); otherwise the copies read NHWC.
// Shapes and parameters are defines (problem_defines plus the family's); the file does not compile alone.
#include "tensor_core/wgmma.h"

#ifndef LAYOUT_NHWC
#define LAYOUT_NHWC 0
#endif
#ifndef DIRECT_A
#define DIRECT_A 0
#endif
#ifndef DIRECT_B
#define DIRECT_B 0
#endif
#ifndef PHASED
#define PHASED 0
#endif

#if DIRECTION == 0
#define CN_GATHERED C_PER_GROUP  // channels per group of the gathered tensor (x)
#define CN_ROWS_M (images * P * Q)
#define CN_COLS K_PER_GROUP
#define CN_IMAGE_H H  // the gathered tensor's pixels
#define CN_IMAGE_W W
#else
#define CN_GATHERED K_PER_GROUP
#if PHASED
#define CN_PHASE_H ((H + STRIDE_H - 1) / STRIDE_H)  // rows and columns of dx a phase holds at most
#define CN_PHASE_W ((W + STRIDE_W - 1) / STRIDE_W)
#define CN_ROWS_M (images * CN_PHASE_H * CN_PHASE_W)
#else
#define CN_ROWS_M (images * H * W)
#endif
#define CN_COLS C_PER_GROUP
#define CN_IMAGE_H P
#define CN_IMAGE_W Q
#endif
#define CN_GCP (GROUPS * CP)   // one pixel's channels in the channels-last copy
#define CN_RED (R * S * CP)    // the reduction: taps x padded channels (a multiple of WG_CHUNK)
#define CN_OUTSIDE (-(1 << 30))  // a row past M: every tap's check fails
// 16-bit channels-last output whose rows (and group offsets) are whole 16-byte chunks: staged through shared memory
// and stored a chunk at a time; an even number of elements: paired stores.
#if LAYOUT_NHWC && ELEM != 2 && (DIRECTION == 0 ? (K % 8 == 0 && K_PER_GROUP % 8 == 0) : (C % 8 == 0 && C_PER_GROUP % 8 == 0))
#define CN_STAGED 1
#define CN_PAIRED 0
#elif LAYOUT_NHWC && ELEM != 2 && (DIRECTION == 0 ? (K % 2 == 0 && K_PER_GROUP % 2 == 0) : (C % 2 == 0 && C_PER_GROUP % 2 == 0))
#define CN_STAGED 0
#define CN_PAIRED 1
#else
#define CN_STAGED 0
#define CN_PAIRED 0
#endif

#ifndef HAS_RESIDUAL
#define HAS_RESIDUAL 0
#endif
#ifndef HAS_RELU_MAX
#define HAS_RELU_MAX 0
#endif
// The forward epilogue's operands: the bias (K floats) and the residual (y's shape and layout), where fused.
#if DIRECTION == 0 && HAS_BIAS
#define CN_BIAS_ARG , const float* RESTRICT bias
#else
#define CN_BIAS_ARG
#endif
#if DIRECTION == 0 && HAS_RESIDUAL
#define CN_RESIDUAL_ARG , const wg_elem* RESTRICT residual
#else
#define CN_RESIDUAL_ARG
#endif

// The batch (`images`) is an argument, not a define: a new batch size reuses the compiled program.
#if LAYOUT_NHWC && DIRECTION == 0
#define CN_ARGS const wg_elem* RESTRICT x, const wg_elem* RESTRICT w, wg_elem* RESTRICT y, \
                const unsigned char* RESTRICT ws CN_BIAS_ARG CN_RESIDUAL_ARG, const int images
#elif LAYOUT_NHWC
#define CN_ARGS wg_elem* RESTRICT dx, const wg_elem* RESTRICT w, const wg_elem* RESTRICT dy, \
                const unsigned char* RESTRICT ws, const int images
#elif DIRECTION == 0
#define CN_ARGS const wg_elem* RESTRICT x, wg_elem* RESTRICT y, const unsigned char* RESTRICT ws CN_BIAS_ARG \
                CN_RESIDUAL_ARG, const int images
#else
#define CN_ARGS wg_elem* RESTRICT dx, const unsigned char* RESTRICT ws, const int images
#endif

// A tile: WG_BLOCK_M rows x 8 chunks; thread tid takes chunk tid % 8 of rows tid / 8 + i * WG_THREADS / 8 (eight
// threads read a row's 128 contiguous bytes when the tile's channels are one tap's).
#define CN_A_ITEMS (WG_BLOCK_M * 8 / WG_THREADS)
#define CN_A_ROW(i) ((tid >> 3) + (i) * (WG_THREADS / 8))

#if CN_PAIRED || CN_STAGED
// Two FP32 values rounded to the 16-bit type and packed, the first in the low half (the lower address).
DEVICE_FN unsigned cn_pack2(float lo, float hi) {
  unsigned packed;
#if ELEM == 1
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#endif
  return packed;
}
#endif

// The output pixel (row of y or dx) of GEMM row mm, or -1 past the rows (by phases: past the image).
DEVICE_FN int cn_out_pixel(int mm, int phase_h, int phase_w, int images) {
  if (mm >= CN_ROWS_M) return -1;
#if PHASED
  const int img = mm / (CN_PHASE_H * CN_PHASE_W), ij = mm % (CN_PHASE_H * CN_PHASE_W);
  const int h = phase_h + (ij / CN_PHASE_W) * STRIDE_H, w = phase_w + (ij % CN_PHASE_W) * STRIDE_W;
  return h < H && w < W ? (img * H + h) * W + w : -1;
#else
  (void)phase_h, (void)phase_w;
  return mm;
#endif
}

KERNEL __launch_bounds__(WG_THREADS, 1) void implicit_gemm_nhwc_wgmma(CN_ARGS) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
#if PHASED
  // Phase (phase_h, phase_w) and its taps: r = tap_r0 + i tap_dr for i < tap_nr (likewise s); its reduction runs over
  // those taps' padded channels.
  const int g = (int)GROUP_ID(2) % GROUPS, phase = (int)GROUP_ID(2) / GROUPS;
  const int phase_h = phase / STRIDE_W, phase_w = phase % STRIDE_W;
  int tap_r0 = 0, tap_nr = 0, tap_s0 = 0, tap_ns = 0, tap_dr = 1, tap_ds = 1;
  for (int r = R - 1; r >= 0; --r)
    if ((phase_h + PAD_H - r * DILATION_H) % STRIDE_H == 0) tap_r0 = r, ++tap_nr;
  for (int t = S - 1; t >= 0; --t)
    if ((phase_w + PAD_W - t * DILATION_W) % STRIDE_W == 0) tap_s0 = t, ++tap_ns;
  while ((tap_dr * DILATION_H) % STRIDE_H != 0) ++tap_dr;
  while ((tap_ds * DILATION_W) % STRIDE_W != 0) ++tap_ds;
  const int red = tap_nr * tap_ns * CP;
#else
  const int g = (int)GROUP_ID(2), phase_h = 0, phase_w = 0;
  const int red = CN_RED;
#endif
  const int ntiles = (red + WG_TILE_K - 1) / WG_TILE_K;
#if DIRECT_A && DIRECTION == 0
  const wg_elem* gathered = x;
#elif DIRECT_A
  const wg_elem* gathered = dy;
#else
  const wg_elem* gathered = (const wg_elem*)(ws + WS_T);
#endif
#if DIRECT_B
  const wg_elem* b_rows = w + ((long)g * CN_COLS + n0) * CN_RED;
#else
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_W) + ((long)g * CN_COLS + n0) * CN_RED;
#endif
  const int ch = tid & 7;

  // This thread's A rows: the pixel's offset in the copy (this group's channels) and its origin (u, v).
  int a_pixel[CN_A_ITEMS], a_u[CN_A_ITEMS], a_v[CN_A_ITEMS];
  PRAGMA_UNROLL
  for (int i = 0; i < CN_A_ITEMS; ++i) {
    const int m = m0 + CN_A_ROW(i);
    a_pixel[i] = 0, a_u[i] = CN_OUTSIDE, a_v[i] = CN_OUTSIDE;
    if (m < CN_ROWS_M) {
#if DIRECTION == 0
      // Forward: output pixel (p, q) reads input pixel (p STRIDE - PAD + r DILATION, ...).
      const int img = m / (P * Q), pq = m % (P * Q);
      a_u[i] = (pq / Q) * STRIDE_H - PAD_H, a_v[i] = (pq % Q) * STRIDE_W - PAD_W;
      a_pixel[i] = img * (H * W) * CN_GCP + g * CP;
#elif PHASED
      // Backward-data by phases: row m is dx pixel (phase_h + STRIDE_H i, phase_w + STRIDE_W j) of image img.
      const int img = m / (CN_PHASE_H * CN_PHASE_W), ij = m % (CN_PHASE_H * CN_PHASE_W);
      const int h = phase_h + (ij / CN_PHASE_W) * STRIDE_H, w = phase_w + (ij % CN_PHASE_W) * STRIDE_W;
      if (h < H && w < W) {
        a_u[i] = h + PAD_H, a_v[i] = w + PAD_W;
        a_pixel[i] = img * (P * Q) * CN_GCP + g * CP;
      }
#else
      // Backward-data: dx pixel (h, w) takes dy pixel ((h + PAD - r DILATION) / STRIDE, ...) where that divides.
      const int img = m / (H * W), hw = m % (H * W);
      a_u[i] = hw / W + PAD_H, a_v[i] = hw % W + PAD_W;
      a_pixel[i] = img * (P * Q) * CN_GCP + g * CP;
#endif
    }
  }

  // Reduction tile `tile`: this thread's chunk of each of its rows, then B's rows like a GEMM's.
#if DIRECTION == 0
#define CN_CHUNK_SOURCE(i, dr, ds, c, ok, src)                                                    \
  {                                                                                               \
    const int h_ = a_u[i] + (dr), w_ = a_v[i] + (ds);                                             \
    ok = ok && (unsigned)h_ < (unsigned)H && (unsigned)w_ < (unsigned)W;                          \
    src = ok ? a_pixel[i] + (h_ * W + w_) * CN_GCP + (c) : 0;                                     \
  }
#else
#define CN_CHUNK_SOURCE(i, dr, ds, c, ok, src)                                                    \
  {                                                                                               \
    const int ph_ = a_u[i] - (dr), qw_ = a_v[i] - (ds);                                           \
    ok = ok && ph_ >= 0 && qw_ >= 0 && ph_ % STRIDE_H == 0 && qw_ % STRIDE_W == 0 &&              \
         ph_ / STRIDE_H < P && qw_ / STRIDE_W < Q;                                                \
    src = ok ? a_pixel[i] + ((ph_ / STRIDE_H) * Q + qw_ / STRIDE_W) * CN_GCP + (c) : 0;           \
  }
#endif
#if PHASED
// Reduction index kk of this phase: its tap (r, s) and channel.
#define CN_TAP(kk, r, s, c)                                                                       \
  const int r = tap_r0 + ((kk) / CP / tap_ns) * tap_dr, s = tap_s0 + ((kk) / CP % tap_ns) * tap_ds; \
  const int c = (kk) % CP
// B's rows hold every tap: the phase's reduction index kk sits at (r S + s) CP + c in them.
#define CN_B_INDEX(kk) \
  ((tap_r0 + ((kk) / CP / tap_ns) * tap_dr) * S + tap_s0 + ((kk) / CP % tap_ns) * tap_ds) * CP + (kk) % CP
#else
#define CN_TAP(kk, r, s, c) const int r = (kk) / CP / S, s = (kk) / CP % S, c = (kk) % CP
#define CN_B_INDEX(kk) (kk)
#endif
#define WG_LOAD(stage, tile)                                                                      \
  {                                                                                               \
    const int kk_ = (tile) * WG_TILE_K + ch * WG_CHUNK;                                           \
    CN_TAP(kk_, r_, s_, c_);                                                                      \
    const int dr_ = r_ * DILATION_H, ds_ = s_ * DILATION_W;                                       \
    PRAGMA_UNROLL for (int i = 0; i < CN_A_ITEMS; ++i) {                                          \
      bool ok_ = kk_ < red;                                                                       \
      int src_;                                                                                   \
      CN_CHUNK_SOURCE(i, dr_, ds_, c_, ok_, src_);                                                \
      wg_copy16((stage) + wg_swizzle(CN_A_ROW(i), ch), gathered + src_, ok_);                     \
    }                                                                                             \
    PRAGMA_UNROLL for (int e = 0; e < (BLOCK_N * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {         \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, bch = idx & 7;                        \
      if ((BLOCK_N * 8) % WG_THREADS == 0 || row < BLOCK_N) {                                     \
        const int k_ = (tile) * WG_TILE_K + bch * WG_CHUNK;                                       \
        const bool ok = n0 + row < CN_COLS && k_ < red;                                           \
        wg_copy16((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, bch),                              \
                  b_rows + (ok ? (long)row * CN_RED + CN_B_INDEX(k_) : 0), ok);                   \
      }                                                                                           \
    }                                                                                             \
  }

#include "tensor_core/wg_mainloop.h"

  // ---- epilogue: rows are output pixels, columns channels (NCHW: a warp's stores run along pixels; NHWC: along
  // channels) ----
#if CN_STAGED
  // Channels-last in whole 16-byte chunks: the block's FP32 tile goes to shared memory (the stages are free once every
  // warpgroup's MMAs are done), then each thread takes 8 neighbouring channels of a row: one 16-byte load of the
  // residual, one 16-byte store, consecutive threads along the row, so a warp writes whole 128-byte lines. (The
  // accumulators' own layout gives each thread 2 of every 8 channels: 4-byte stores, half of each sector.)
#define CN_TILE_PITCH (BLOCK_N + 8)  // floats: the 8 rows of a warp's float2 stores fall on every bank twice
#if DIRECTION == 0
  wg_elem* out = y;
#define CN_OUT_PITCH K
#else
  wg_elem* out = dx;
#define CN_OUT_PITCH C
#endif
  float* tile = (float*)(wg_smem_raw + (wg_base - wg_shared_address(wg_smem_raw)));
  BARRIER();
  PRAGMA_UNROLL
  for (int j = 0; j < BLOCK_N / 8; ++j) {
    PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h)
      *(float2*)(tile + WG_ACC_ROW(2 * h) * CN_TILE_PITCH + WG_ACC_COL(j, 0)) =
          make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
  }
  BARRIER();
  PRAGMA_UNROLL
  for (int e = 0; e < BLOCK_N / 16; ++e) {
    const int idx = tid + e * WG_THREADS, row = idx / (BLOCK_N / 8), col = (idx % (BLOCK_N / 8)) * 8;
    const int pixel = cn_out_pixel(m0 + row, phase_h, phase_w, images), n = n0 + col;
    if (pixel < 0 || n >= CN_COLS) continue;
    const float4 lo = *(const float4*)(tile + row * CN_TILE_PITCH + col);
    const float4 hi = *(const float4*)(tile + row * CN_TILE_PITCH + col + 4);
    float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const long at = (long)pixel * CN_OUT_PITCH + g * CN_COLS + n;
#if DIRECTION == 0 && HAS_BIAS
    PRAGMA_UNROLL
    for (int i = 0; i < 8; ++i) v[i] += bias[g * K_PER_GROUP + n + i];
#endif
#if DIRECTION == 0 && HAS_RESIDUAL
    const uint4 rs = *(const uint4*)(residual + at);
    const unsigned rw[4] = {rs.x, rs.y, rs.z, rs.w};
    PRAGMA_UNROLL
    for (int i = 0; i < 4; ++i) {
      v[2 * i] += wg_to_float((unsigned short)(rw[i] & 0xFFFFu));
      v[2 * i + 1] += wg_to_float((unsigned short)(rw[i] >> 16));
    }
#endif
#if DIRECTION == 0 && HAS_RELU
    PRAGMA_UNROLL
    for (int i = 0; i < 8; ++i) {
      v[i] = v[i] > 0.0f ? v[i] : 0.0f;
#if HAS_RELU_MAX
      v[i] = v[i] < RELU_MAX ? v[i] : RELU_MAX;
#endif
    }
#endif
    *(uint4*)(out + at) = make_uint4(cn_pack2(v[0], v[1]), cn_pack2(v[2], v[3]), cn_pack2(v[4], v[5]),
                                     cn_pack2(v[6], v[7]));
  }
}
#elif CN_PAIRED
  // Channels-last with an even row pitch: a thread's two neighbouring columns (r and r + 1 of WG_ACC_COL) go out as
  // one 4-byte store, and the residual comes in as one 4-byte load, so a warp's accesses fill whole 32-byte sectors.
  PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int mm = cn_out_pixel(m0 + WG_ACC_ROW(2 * h), phase_h, phase_w, images);
    if (mm < 0) continue;
#if DIRECTION == 0
    wg_elem* out_row = y + (long)mm * K + g * K_PER_GROUP;
#else
    wg_elem* out_row = dx + (long)mm * C + g * C_PER_GROUP;
#endif
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, 0);  // even, and CN_COLS is even: n + 1 is a column too
      if (n >= CN_COLS) continue;
      float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
#if DIRECTION == 0 && HAS_BIAS
      v0 += bias[g * K_PER_GROUP + n];
      v1 += bias[g * K_PER_GROUP + n + 1];
#endif
#if DIRECTION == 0 && HAS_RESIDUAL
      const unsigned both = *(const unsigned*)(residual + (out_row - y) + n);
      v0 += wg_to_float((unsigned short)(both & 0xFFFFu));
      v1 += wg_to_float((unsigned short)(both >> 16));
#endif
#if DIRECTION == 0 && HAS_RELU
      v0 = v0 > 0.0f ? v0 : 0.0f;
      v1 = v1 > 0.0f ? v1 : 0.0f;
#if HAS_RELU_MAX
      v0 = v0 < RELU_MAX ? v0 : RELU_MAX;
      v1 = v1 < RELU_MAX ? v1 : RELU_MAX;
#endif
#endif
      *(unsigned*)(out_row + n) = cn_pack2(v0, v1);
    }
  }
}
#else
  PRAGMA_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int mm = cn_out_pixel(m0 + WG_ACC_ROW(r), phase_h, phase_w, images);
    if (mm < 0) continue;
#if LAYOUT_NHWC && DIRECTION == 0
    wg_elem* out_row = y + (long)mm * K + g * K_PER_GROUP;  // row mm is pixel (img, pq)
#define CN_OUT_STRIDE 1
#elif LAYOUT_NHWC
    wg_elem* out_row = dx + (long)mm * C + g * C_PER_GROUP;
#define CN_OUT_STRIDE 1
#elif DIRECTION == 0
    const int img = mm / (P * Q), pq = mm % (P * Q);
    wg_elem* out_row = y + ((long)img * K + g * K_PER_GROUP) * (P * Q) + pq;  // + n * PQ
#define CN_OUT_STRIDE (P * Q)
#else
    const int img = mm / (H * W), hw = mm % (H * W);
    wg_elem* out_row = dx + ((long)img * C + g * C_PER_GROUP) * (H * W) + hw;  // + n * HW
#define CN_OUT_STRIDE (H * W)
#endif
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, r);
      if (n >= CN_COLS) continue;
      float value = acc[4 * j + r];
#if DIRECTION == 0 && HAS_BIAS
      value += bias[g * K_PER_GROUP + n];
#endif
#if DIRECTION == 0 && HAS_RESIDUAL
      value += wg_to_float(residual[(out_row - y) + (long)n * CN_OUT_STRIDE]);
#endif
#if DIRECTION == 0 && HAS_RELU
      value = value > 0.0f ? value : 0.0f;
#if HAS_RELU_MAX
      value = value < RELU_MAX ? value : RELU_MAX;
#endif
#endif
      out_row[(long)n * CN_OUT_STRIDE] = WG_FROM_FLOAT(value);
    }
  }
}
#endif

#if LAYOUT_NHWC
// The gathered tensor, channels-last ([n][pixel][group * CN_GATHERED + c]), into the workspace as [n][pixel][group][CP]
// with each group's channels padded to CP (zeros): reads and writes both run along channels, a 32 x 32 tile of
// (padded channel, pixel) a block of 32 x 8 threads. Grid: x channel tiles, y pixel tiles, z images.
KERNEL void wgn_to_channels_last(const wg_elem* RESTRICT src, unsigned char* RESTRICT ws) {
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const int c0 = (int)GROUP_ID(0) * 32, pix0 = (int)GROUP_ID(1) * 32, img = (int)GROUP_ID(2);
  const int pixels = CN_IMAGE_H * CN_IMAGE_W;
  wg_elem* dst = (wg_elem*)(ws + WS_T) + (long)img * pixels * CN_GCP;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int pix = pix0 + ty + 8 * i, cc = c0 + tx;
    const int grp = cc / CP, c = cc % CP;
    if (pix >= pixels || cc >= CN_GCP) continue;
    dst[(long)pix * CN_GCP + cc] =
        c < CN_GATHERED ? src[((long)img * pixels + pix) * (GROUPS * CN_GATHERED) + grp * CN_GATHERED + c] : (wg_elem)0;
  }
}
#else
// The gathered tensor (x forward, dy backward-data: [n][group * CN_GATHERED + c][pixel]) into the workspace as
// [n][pixel][group][CP], channels past CN_GATHERED zero. A 32 x 32 tile of (padded channel, pixel) a block of 32 x 8
// threads through shared memory: reads run along pixels, writes along channels. Grid: x channel tiles, y pixel tiles,
// z images.
KERNEL void wgn_to_channels_last(const wg_elem* RESTRICT src, unsigned char* RESTRICT ws) {
  __shared__ wg_elem tile[32][33];
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const int c0 = (int)GROUP_ID(0) * 32, pix0 = (int)GROUP_ID(1) * 32, img = (int)GROUP_ID(2);
  const int pixels = CN_IMAGE_H * CN_IMAGE_W;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int cc = c0 + ty + 8 * i, pix = pix0 + tx;  // padded channel (group, c) and pixel
    const int grp = cc / CP, c = cc % CP;
    wg_elem value = (wg_elem)0;
    if (cc < CN_GCP && c < CN_GATHERED && pix < pixels)
      value = src[((long)img * (GROUPS * CN_GATHERED) + grp * CN_GATHERED + c) * pixels + pix];
    tile[ty + 8 * i][tx] = value;
  }
  BARRIER();
  wg_elem* dst = (wg_elem*)(ws + WS_T) + (long)img * pixels * CN_GCP;
  PRAGMA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int pix = pix0 + ty + 8 * i, cc = c0 + tx;
    if (pix < pixels && cc < CN_GCP) dst[(long)pix * CN_GCP + cc] = tile[tx][ty + 8 * i];
  }
}
#endif

// The filters as B rows: forward wr[g K/G + k][(r,s,c)] = w[g K/G + k][c][r][s], backward-data
// wr[g C/G + c][(r,s,k)] = w[g K/G + k][c][r][s]; channels past the group's zero. Channels-last filters are read as
// w[g K/G + k][r][s][c].
KERNEL void wgn_weights(const wg_elem* RESTRICT w, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)GROUPS * CN_COLS * CN_RED) return;
  const int red = (int)(idx % CN_RED), row = (int)(idx / CN_RED);
  const int grp = row / CN_COLS, col = row % CN_COLS;
  const int tap = red / CP, c = red % CP;
  wg_elem value = (wg_elem)0;
  if (c < CN_GATHERED) {
#if LAYOUT_NHWC && DIRECTION == 0
    value = w[((long)(grp * K_PER_GROUP + col) * (R * S) + tap) * C_PER_GROUP + c];
#elif LAYOUT_NHWC
    value = w[((long)(grp * K_PER_GROUP + c) * (R * S) + tap) * C_PER_GROUP + col];
#elif DIRECTION == 0
    value = w[((long)(grp * K_PER_GROUP + col) * C_PER_GROUP + c) * (R * S) + tap];
#else
    value = w[((long)(grp * K_PER_GROUP + c) * C_PER_GROUP + col) * (R * S) + tap];
#endif
  }
  ((wg_elem*)(ws + WS_W))[idx] = value;
}
