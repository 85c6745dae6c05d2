// The wgrad_nhwc_wgmma family: channels-last 16-bit backward-filter convolutions as implicit GEMMs on Hopper's wgmma
// (wgmma.h, wg_mainloop.h) that read x and dy where they lie, with no copies before the GEMM:
//   dw[g K/G + k][r][s][c] = sum over j = (n,p,q) of  A[m][j] B[k][j],  m = (r S + s) C/G + c (dw's channels-last row),
//   A[m][j] = x[n][p STRIDE_H + r DILATION_H - PAD_H][q STRIDE_W + s DILATION_W - PAD_W][g C/G + c] (0 off the image)
//   B[k][j] = dy[n][p][q][g K/G + k]
// Channels-last, both operands run along M and N in memory (channels), not along the reduction: they reach shared
// memory as MN-major tiles (wgmma's transposed operands, 16-bit types only). A stage holds, per 64 columns of A (one
// warpgroup's rows) and of B, 64 reduction rows of 128 bytes: 16-byte chunk c of reduction row j at wg_swizzle(j, c),
// 8192 bytes; each chunk is 8 channels of one tap at one (n, p, q), copied by cp.async and zero-filled off the image.
// C/G and K/G are multiples of 8, so a chunk never straddles a tap or a group. SPLIT_K slices of the reduction write
// FP32 partials in dw's layout, summed in order by wgr_reduce; one slice writes dw directly. Shapes and parameters are
// defines (problem_defines plus the wgmma tile's); the file does not compile alone.
#define WG_MMA_TRANSPOSE "1, 1"
#define WG_TILES_MN_MAJOR 1
#include "tensor_core/wgmma.h"

#if ELEM == 2
#error "wgmma takes MN-major operands in 16-bit types only"
#endif

#define WR_M (R * S * C_PER_GROUP)               // GEMM rows (r, s, c): one group's filter row of dw
#define WR_RED (images * P * Q)                  // the reduction (n, p, q)
#define WR_A_CHUNKS (WG_BLOCK_M / WG_CHUNK)      // 16-byte chunks across one reduction row of A
#define WR_A_ROWS (WG_THREADS / WR_A_CHUNKS)     // reduction rows of A one pass of the block's threads copies (16)
#define WR_B_CHUNKS (BLOCK_N / WG_CHUNK)         // ... and of B
#define WR_B_ROWS (WG_THREADS / WR_B_CHUNKS)
// Byte offset of chunk `chunk` (of a whole row across the block's 64-column blocks) of reduction row `row`.
#define WR_AT(row, chunk) (((chunk) >> 3) * 8192 + wg_swizzle((row), (chunk) & 7))

// The batch (`images`) is an argument, not a define: a new batch size with the same tiles reuses the program.
KERNEL __launch_bounds__(WG_THREADS, 1) void wgrad_nhwc_wgmma(wg_elem* RESTRICT dw, const wg_elem* RESTRICT x,
                                                               const wg_elem* RESTRICT dy, const int images
#if SPLIT_K > 1
                                                               ,
                                                               unsigned char* RESTRICT ws
#endif
) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int g = (int)GROUP_ID(2) % GROUPS, slice = (int)GROUP_ID(2) / GROUPS;

  // This block's reduction range: all of it, or one split-K slice of whole tiles.
  const int red_tiles = (WR_RED + WG_TILE_K - 1) / WG_TILE_K;
  const int tiles_per_slice = (red_tiles + SPLIT_K - 1) / SPLIT_K;
  const int tile_begin = slice * tiles_per_slice < red_tiles ? slice * tiles_per_slice : red_tiles;
  const int ntiles = red_tiles - tile_begin < tiles_per_slice ? red_tiles - tile_begin : tiles_per_slice;

  // This thread's chunk of A's rows: 8 channels of one tap (r, s), fixed for the whole reduction.
  const int a_chunk = tid % WR_A_CHUNKS, a_row = tid / WR_A_CHUNKS;
  const int a_m = m0 + a_chunk * WG_CHUNK;
  const bool a_inside = a_m < WR_M;
  const int a_c = a_m % C_PER_GROUP, a_rs = a_m / C_PER_GROUP;
  const int a_dh = (a_rs / S) * DILATION_H - PAD_H, a_dw = (a_rs % S) * DILATION_W - PAD_W;
  const wg_elem* a_base = x + g * C_PER_GROUP + a_c;
  const wg_elem* b_base = dy + g * K_PER_GROUP + n0;

  // Reduction tile `tile` (of this slice): A's chunks at this thread's reduction rows, each decoded to (n, p, q) and
  // its input pixel; B's chunks straight from dy's rows.
#define WG_LOAD(stage, tile)                                                                               \
  {                                                                                                        \
    const int j0_ = (tile_begin + (tile)) * WG_TILE_K;                                                     \
    PRAGMA_UNROLL for (int i = 0; i < WG_TILE_K / WR_A_ROWS; ++i) {                                        \
      const int row_ = a_row + i * WR_A_ROWS, j_ = j0_ + row_;                                             \
      const int img_ = j_ / (P * Q), pq_ = j_ % (P * Q);                                                   \
      const int h_ = (pq_ / Q) * STRIDE_H + a_dh, w_ = (pq_ % Q) * STRIDE_W + a_dw;                        \
      const bool ok_ = a_inside && j_ < WR_RED && (unsigned)h_ < (unsigned)H && (unsigned)w_ < (unsigned)W; \
      wg_copy16((stage) + WR_AT(row_, a_chunk), a_base + (ok_ ? (((long)img_ * H + h_) * W + w_) * C : 0),  \
                ok_);                                                                                      \
    }                                                                                                      \
    PRAGMA_UNROLL for (int e = 0; e < WG_TILE_K / WR_B_ROWS; ++e) {                                        \
      const int idx_ = tid + e * WG_THREADS, row_ = idx_ / WR_B_CHUNKS, chunk_ = idx_ % WR_B_CHUNKS;       \
      const int j_ = j0_ + row_;                                                                           \
      const bool ok_ = j_ < WR_RED && n0 + chunk_ * WG_CHUNK < K_PER_GROUP;                                \
      wg_copy16((stage) + WG_A_STAGE_BYTES + WR_AT(row_, chunk_),                                          \
                b_base + (ok_ ? (long)j_ * K + chunk_ * WG_CHUNK : 0), ok_);                               \
    }                                                                                                      \
  }

#include "tensor_core/wg_mainloop.h"

  // ---- epilogue: rows m = (r, s, c), columns k; dw channels-last holds (g K/G + k, m) at (g K/G + k) WR_M + m ----
  PRAGMA_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int mm = m0 + WG_ACC_ROW(r);
    if (mm >= WR_M) continue;
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, r);
      if (n >= K_PER_GROUP) continue;
      const long at = (long)(g * K_PER_GROUP + n) * WR_M + mm;
#if SPLIT_K == 1
      dw[at] = WG_FROM_FLOAT(acc[4 * j + r]);
#else
      ((float*)ws)[(long)slice * K * WR_M + at] = acc[4 * j + r];
#endif
    }
  }
}

#if SPLIT_K > 1
// dw = the split-K slices' partials summed in order, rounded once.
KERNEL void wgr_reduce(const unsigned char* RESTRICT ws, wg_elem* RESTRICT dw) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)K * WR_M) return;
  const float* partial = (const float*)ws;
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(long)s * K * WR_M + idx];
  dw[idx] = WG_FROM_FLOAT(sum);
}
#endif
