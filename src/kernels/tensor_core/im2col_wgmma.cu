// The im2col_wgmma family: convolutions in all three directions as explicit GEMMs on Hopper's wgmma (wgmma.h,
// wg_mainloop.h), BF16/FP16 tensors or FP32 tensors in tf32 math. The operands are first laid out K-contiguous in the
// workspace by memory-bound gathers, so the GEMM copies nothing but whole 16-byte chunks:
//   forward         col[g][row = (n,p,q)][(c,r,s)] (im2col of x)         x  w[g][k][(c,r,s)]       -> y[n][k][p][q]
//   backward-data   col[g][row = (n,h,w)][(k,r,s)] (dy at the taps)      x  wt[g][c][(k,r,s)]      -> dx[n][c][h][w]
//   backward-filter xt[g][(c,r,s)][j = (n,p,q)] (x at the taps)          x  dyt[g][k][(n,p,q)]     -> dw[k][(c,r,s)]
// Rows of the big gathered matrix come in chunks of CHUNK_ROWS (forward, backward-data) or the reduction in chunks
// of CHUNK_ROWS positions (backward-filter), so the workspace stays within its limit; a chunk's steps take its first
// row (row0) and length (rows) as arguments. Reductions are zero-padded to RED_P (a multiple of WG_CHUNK). Backward-
// filter accumulates FP32 partials [slice][g][(c,r,s)][k] over the chunks (the first writes), which wg_filter_reduce
// sums over the split-K slices and stores as dw. Forward fuses bias and ReLU. Workspace regions start at the byte
// offsets WS_COL, WS_W (the transformed weights or dyt) and WS_PARTIAL.
// Shapes and parameters are defines (convtune/extension/kernel_family.h's problem_defines plus the family's); the file does not
// compile alone.
#include "tensor_core/wgmma.h"

#define CV_RS (R * S)
#define CV_HW (H * W)
#define CV_PQ (P * Q)
#define CV_CRS (C_PER_GROUP * CV_RS)
#define CV_KRS (K_PER_GROUP * CV_RS)
#if DIRECTION == 0
#define CV_ROWS_TOTAL (N * CV_PQ)  // GEMM M over all chunks
#define CV_COLS K_PER_GROUP        // GEMM N
#define CV_RED CV_CRS              // reduction (padded to RED_P)
#elif DIRECTION == 1
#define CV_ROWS_TOTAL (N * CV_HW)
#define CV_COLS C_PER_GROUP
#define CV_RED CV_KRS
#else
#define CV_ROWS_TOTAL CV_CRS       // GEMM M: the filter taps
#define CV_COLS K_PER_GROUP
#define CV_RED (N * CV_PQ)         // chunked
#endif

DEVICE_FN const wg_elem* cv_elems(const unsigned char* ws, long offset) { return (const wg_elem*)(ws + offset); }
DEVICE_FN wg_elem* cv_elems(unsigned char* ws, long offset) { return (wg_elem*)(ws + offset); }

// ---- gathers into the workspace (one thread per element, consecutive threads along the K-contiguous dimension) ----
#if DIRECTION == 0
// col[g][i][(c,r,s)] for rows row0 + i, i < rows: x at output pixel (n,p,q), tap (r,s), channel c of group g.
KERNEL void wg_gather(const wg_elem* RESTRICT x, unsigned char* RESTRICT ws, const int row0, const int rows) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)GROUPS * rows * RED_P) return;
  const int red = (int)(idx % RED_P);
  const long gi = idx / RED_P;
  const int i = (int)(gi % rows), g = (int)(gi / rows);
  const int row = row0 + i, img = row / CV_PQ, pq = row % CV_PQ;
  wg_elem value = 0;
  if (red < CV_RED) {
    const int c = red / CV_RS, rs = red % CV_RS;
    const int h = (pq / Q) * STRIDE_H - PAD_H + (rs / S) * DILATION_H;
    const int w = (pq % Q) * STRIDE_W - PAD_W + (rs % S) * DILATION_W;
    if ((unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W)
      value = x[((long)img * C + g * C_PER_GROUP + c) * CV_HW + h * W + w];
  }
  cv_elems(ws, WS_COL)[((long)g * CHUNK_ROWS + i) * RED_P + red] = value;
}
#if !W_DIRECT
// w[k][(c,r,s)] padded to RED_P columns (the filter rows are not a multiple of 16 bytes long).
KERNEL void wg_weights(const wg_elem* RESTRICT w, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)K * RED_P) return;
  const int red = (int)(idx % RED_P), k = (int)(idx / RED_P);
  cv_elems(ws, WS_W)[idx] = red < CV_CRS ? w[(long)k * CV_CRS + red] : (wg_elem)0;
}
#endif
#elif DIRECTION == 1
// col[g][i][(k,r,s)] for rows row0 + i: dy where p * STRIDE_H = h + PAD_H - r * DILATION_H (and likewise q) lands on
// the output grid, else zero.
KERNEL void wg_gather(const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws, const int row0, const int rows) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)GROUPS * rows * RED_P) return;
  const int red = (int)(idx % RED_P);
  const long gi = idx / RED_P;
  const int i = (int)(gi % rows), g = (int)(gi / rows);
  const int row = row0 + i, img = row / CV_HW, hw = row % CV_HW;
  wg_elem value = 0;
  if (red < CV_RED) {
    const int k = red / CV_RS, rs = red % CV_RS;
    const int ph = hw / W + PAD_H - (rs / S) * DILATION_H, qw = hw % W + PAD_W - (rs % S) * DILATION_W;
    if (ph >= 0 && qw >= 0 && ph % STRIDE_H == 0 && qw % STRIDE_W == 0 && ph / STRIDE_H < P && qw / STRIDE_W < Q)
      value = dy[((long)img * K + g * K_PER_GROUP + k) * CV_PQ + (ph / STRIDE_H) * Q + qw / STRIDE_W];
  }
  cv_elems(ws, WS_COL)[((long)g * CHUNK_ROWS + i) * RED_P + red] = value;
}
// wt[g][c][(k,r,s)] = w[g K/G + k][c][r][s], padded to RED_P.
KERNEL void wg_weights(const wg_elem* RESTRICT w, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)GROUPS * C_PER_GROUP * RED_P) return;
  const int red = (int)(idx % RED_P), gc = (int)(idx / RED_P);
  const int g = gc / C_PER_GROUP, c = gc % C_PER_GROUP;
  wg_elem value = 0;
  if (red < CV_RED) {
    const int k = red / CV_RS, rs = red % CV_RS;
    value = w[((long)(g * K_PER_GROUP + k) * C_PER_GROUP + c) * CV_RS + rs];
  }
  cv_elems(ws, WS_W)[idx] = value;
}
#else
// xt[g][(c,r,s)][j] and dyt[g][k][j] for reduction positions row0 + j, j < rows (padded to RED_P): x at the tap of
// output pixel (n,p,q), and dy there.
KERNEL void wg_gather(const wg_elem* RESTRICT x, const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws,
                      const int row0, const int rows) {
  const long idx = GLOBAL_ID(0);
  const long x_elements = (long)GROUPS * CV_CRS * RED_P;
  if (idx >= x_elements + (long)K * RED_P) return;
  const int j = (int)(idx % RED_P);
  const int npq = row0 + j, img = npq / CV_PQ, pq = npq % CV_PQ;
  wg_elem value = 0;
  if (idx < x_elements) {
    const long gcrs = idx / RED_P;
    const int g = (int)(gcrs / CV_CRS), crs = (int)(gcrs % CV_CRS);
    const int c = crs / CV_RS, rs = crs % CV_RS;
    const int h = (pq / Q) * STRIDE_H - PAD_H + (rs / S) * DILATION_H;
    const int w = (pq % Q) * STRIDE_W - PAD_W + (rs % S) * DILATION_W;
    if (j < rows && (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W)
      value = x[((long)img * C + g * C_PER_GROUP + c) * CV_HW + h * W + w];
    cv_elems(ws, WS_COL)[idx] = value;
  } else {
    const int gk = (int)((idx - x_elements) / RED_P);  // g * K/G + k: dy's channel
    if (j < rows) value = dy[((long)img * K + gk) * CV_PQ + pq];
    cv_elems(ws, WS_W)[idx - x_elements] = value;
  }
}
#endif

// ---- the GEMM: per group, C[m][n] = sum over the reduction of A[m][.] B[n][.], both K-contiguous ----
// Arguments: forward (w, ws, y[, bias]), backward-data (ws, dx), backward-filter (ws: the partials are in it).
#if DIRECTION == 0 && HAS_BIAS
#define CV_GEMM_ARGS const wg_elem* RESTRICT w, unsigned char* RESTRICT ws, wg_elem* RESTRICT out, \
                     const float* RESTRICT bias
#elif DIRECTION == 0
#define CV_GEMM_ARGS const wg_elem* RESTRICT w, unsigned char* RESTRICT ws, wg_elem* RESTRICT out
#elif DIRECTION == 1
#define CV_GEMM_ARGS unsigned char* RESTRICT ws, wg_elem* RESTRICT out
#else
#define CV_GEMM_ARGS unsigned char* RESTRICT ws
#endif
KERNEL __launch_bounds__(WG_THREADS, 1) void wg_conv_gemm(CV_GEMM_ARGS, const int row0, const int rows) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int z = (int)GROUP_ID(2);
  const int g = z % GROUPS, slice = z / GROUPS;
#if DIRECTION == 2
  // M: the taps (all rows); the reduction: this chunk's `rows` positions (padded), split into slices.
  const int m_total = CV_ROWS_TOTAL;
  const int red_total = (rows + WG_CHUNK - 1) / WG_CHUNK * WG_CHUNK;
  const wg_elem* a_rows = cv_elems(ws, WS_COL) + (long)g * CV_CRS * RED_P;
  const wg_elem* b_rows = cv_elems(ws, WS_W) + (long)g * K_PER_GROUP * RED_P;
  float* out = (float*)(ws + WS_PARTIAL);
#else
  const int m_total = rows;  // this chunk's rows
  const int red_total = RED_P;
  const wg_elem* a_rows = cv_elems(ws, WS_COL) + (long)g * CHUNK_ROWS * RED_P;
#if DIRECTION == 0 && W_DIRECT
  const wg_elem* b_rows = w + (long)g * K_PER_GROUP * RED_P;  // RED_P == C/G*R*S here
#elif DIRECTION == 0
  const wg_elem* b_rows = cv_elems(ws, WS_W) + (long)g * K_PER_GROUP * RED_P;
  (void)w;
#else
  const wg_elem* b_rows = cv_elems(ws, WS_W) + (long)g * C_PER_GROUP * RED_P;
#endif
#endif
  if (m0 >= m_total) return;  // the last chunk's grid may be taller than its rows (before any barrier)
  // Slices of whole tiles; the last may be shorter or empty (its partials are then zero).
  const int slice_len = ((red_total + SPLIT_K - 1) / SPLIT_K + WG_TILE_K - 1) / WG_TILE_K * WG_TILE_K;
  const int k_begin = slice * slice_len < red_total ? slice * slice_len : red_total;
  const int k_length = red_total - k_begin < slice_len ? red_total - k_begin : slice_len;
  const int ntiles = (k_length + WG_TILE_K - 1) / WG_TILE_K;
  a_rows += (long)m0 * RED_P + k_begin;
  b_rows += (long)n0 * RED_P + k_begin;

#define WG_LOAD(stage, tile)                                                                     \
  {                                                                                              \
    const int kt_ = (tile) * WG_TILE_K;                                                          \
    PRAGMA_UNROLL for (int e = 0; e < (WG_BLOCK_M * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {     \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, ch = idx & 7;                        \
      if ((WG_BLOCK_M * 8) % WG_THREADS == 0 || row < WG_BLOCK_M) {                              \
        const int k_ = kt_ + ch * WG_CHUNK;                                                      \
        const bool ok = m0 + row < m_total && k_ < k_length;                                     \
        wg_copy16((stage) + wg_swizzle(row, ch), a_rows + (ok ? (long)row * RED_P + k_ : 0), ok); \
      }                                                                                          \
    }                                                                                            \
    PRAGMA_UNROLL for (int e = 0; e < (BLOCK_N * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {        \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, ch = idx & 7;                        \
      if ((BLOCK_N * 8) % WG_THREADS == 0 || row < BLOCK_N) {                                    \
        const int k_ = kt_ + ch * WG_CHUNK;                                                      \
        const bool ok = n0 + row < CV_COLS && k_ < k_length;                                     \
        wg_copy16((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, ch),                              \
                  b_rows + (ok ? (long)row * RED_P + k_ : 0), ok);                               \
      }                                                                                          \
    }                                                                                            \
  }

#include "tensor_core/wg_mainloop.h"

  PRAGMA_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int m = m0 + WG_ACC_ROW(r);
    if (m >= m_total) continue;
#if DIRECTION == 0
    const int row = row0 + m, img = row / CV_PQ, pq = row % CV_PQ;
    wg_elem* out_row = out + ((long)img * K + g * K_PER_GROUP) * CV_PQ + pq;  // + n * PQ
#elif DIRECTION == 1
    const int row = row0 + m, img = row / CV_HW, hw = row % CV_HW;
    wg_elem* out_row = out + ((long)img * C + g * C_PER_GROUP) * CV_HW + hw;  // + n * HW
#else
    // FP32 partials [slice][g][(c,r,s)][k].
    float* out_row = out + (((long)slice * GROUPS + g) * CV_CRS + m) * K_PER_GROUP;  // + n
#endif
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, r);
      if (n >= CV_COLS) continue;
      float value = acc[4 * j + r];
#if DIRECTION == 0
#if HAS_BIAS
      value += bias[g * K_PER_GROUP + n];
#endif
#if HAS_RELU
      value = value > 0.0f ? value : 0.0f;
#endif
      out_row[(long)n * CV_PQ] = WG_FROM_FLOAT(value);
#elif DIRECTION == 1
      out_row[(long)n * CV_HW] = WG_FROM_FLOAT(value);
#else
      if (row0 > 0) value += out_row[n];  // later chunks add to the earlier ones' sums
      out_row[n] = value;
#endif
    }
  }
}

#if DIRECTION == 2
// dw[g K/G + k][(c,r,s)] = the split-K slices' partials summed in order, rounded once.
KERNEL void wg_filter_reduce(unsigned char* RESTRICT ws, wg_elem* RESTRICT dw) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)K * CV_CRS) return;
  const int crs = (int)(idx % CV_CRS), gk = (int)(idx / CV_CRS);
  const int g = gk / K_PER_GROUP, k = gk % K_PER_GROUP;
  const float* partial = (const float*)(ws + WS_PARTIAL);
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(((long)s * GROUPS + g) * CV_CRS + crs) * K_PER_GROUP + k];
  dw[idx] = WG_FROM_FLOAT(sum);
}
#endif
