// The implicit_gemm_wgmma family: convolutions in all three directions as implicit GEMMs on Hopper's wgmma
// (wgmma.h), BF16/FP16 tensors or FP32 tensors in tf32 math. The gathered operand is A (GEMM rows), read straight
// from the tensors into registers and stored into the 128-byte-swizzled stage while the previous stage's MMAs run;
// the other operand is B, copied by 16-byte cp.async from rows that are K-contiguous already (the filters, or their
// transposed copy in the workspace) or gathered like A (backward-filter's dy):
//   forward         A[(n,p,q)][(c,r,s)] = x at the tap                  B[k][(c,r,s)] = w (or its padded copy)
//   backward-data   A[(n,h,w)][(k,r,s)] = dy where the tap lands        B[c][(k,r,s)] = w transposed (workspace)
//   backward-filter A[(c,r,s)][(n,p,q)] = x at the tap                  B[k][(n,p,q)] = dy (transposed copy,
//                                                                        DY_T, or gathered)
// A thread gathers 16-byte chunks (WG_CHUNK consecutive reduction elements) of one fixed row, so its row's part of
// every address is computed once; the reduction's part comes from a table of the stage's WG_TILE_K positions in
// shared memory (an offset and a packed pair of row/column displacements), which threads 0..WG_TILE_K-1 fill one
// stage ahead. Consecutive threads take consecutive rows (neighbouring pixels: coalesced loads) and a warp shares its
// chunk, so its table reads are broadcasts. Forward fuses bias and ReLU; backward-filter writes FP32 partials
// [slice][g][(c,r,s)][k] that wg_filter_reduce sums over the split-K slices into dw.
// 3xTF32 (SPLIT3=1: FP32 tensors in 3xtf32 math): every operand element is a TF32 big part (rounded to nearest) and
// a TF32 residual (the rest, rounded to nearest), kept in two halves of each stage (the gathered operands split in
// registers, the copied ones split by the recipe's first kernel into the workspace, WS_LO_SHIFT elements after the
// big parts). A tile's three products (big x big, big x residual, residual x big) go into zeroed accumulators, added
// into the FP32 sums with ordinary round-to-nearest adds: the tensor cores truncate when they accumulate, which over
// a whole reduction would exceed FP32's tolerance.
// Shapes and parameters are defines (problem_defines plus the family's); the file does not compile alone.
#include "tensor_core/wgmma.h"

#ifndef SPLIT3
#define SPLIT3 0
#endif
#if SPLIT3
#if ELEM != 2
#error "3xTF32 splits FP32 tensors"
#endif
#define CV_STAGE_BYTES (2 * WG_STAGE_BYTES)
#define CV_LO WG_STAGE_BYTES  // the residuals' half of a stage
// x rounded to the nearest TF32 value (ties away from zero), as FP32 bits with the low 13 bits clear.
DEVICE_FN float cv_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}
#define CV_STORE(base, idx, value)                         \
  {                                                        \
    const float v_ = (value), hi_ = cv_tf32(v_);           \
    (base)[idx] = hi_;                                     \
    (base)[(idx) + WS_LO_SHIFT] = cv_tf32(v_ - hi_);       \
  }
#else
#define CV_STAGE_BYTES WG_STAGE_BYTES
#define CV_STORE(base, idx, value) (base)[idx] = (value)
#endif

#define CV_RS (R * S)
#define CV_HW (H * W)
#define CV_PQ (P * Q)
#define CV_CHW (C * CV_HW)
#define CV_KPQ (K * CV_PQ)
#define CV_CRS (C_PER_GROUP * CV_RS)
#define CV_KRS (K_PER_GROUP * CV_RS)
#if DIRECTION == 0
#define CV_M (N * CV_PQ)
#define CV_N K_PER_GROUP
#define CV_RED CV_CRS
#elif DIRECTION == 1 && PHASED
// Strided backward-data by phases (dilation 1): dx pixels (h, w) with h % STRIDE_H = a, w % STRIDE_W = b take only
// the taps r = r0 + STRIDE_H t (r0 = (a + PAD_H) % STRIDE_H), and from dy the rows p = h / STRIDE_H + e - t: one
// stride-1 GEMM per phase (grid axis 2), no tap masked off the grid. Reduction (k, t, u) with t < ceil(R /
// STRIDE_H), u < ceil(S / STRIDE_W) (a phase's shorter ranges masked); CV_M the largest phase's rows.
#define CV_TMAX ((R + STRIDE_H - 1) / STRIDE_H)
#define CV_UMAX ((S + STRIDE_W - 1) / STRIDE_W)
#define CV_PHASES (STRIDE_H * STRIDE_W)
#define CV_M (N * ((H + STRIDE_H - 1) / STRIDE_H) * ((W + STRIDE_W - 1) / STRIDE_W))
#define CV_N C_PER_GROUP
#define CV_RED (K_PER_GROUP * CV_TMAX * CV_UMAX)
#elif DIRECTION == 1
#define CV_M (N * CV_HW)
#define CV_N C_PER_GROUP
#define CV_RED CV_KRS
#else
#define CV_M CV_CRS
#define CV_N K_PER_GROUP
#define CV_RED (N * CV_PQ)
#endif
// An invalid reduction position's displacement: no row plus it lands inside the image.
#define CV_OUTSIDE (-16384)

// The table entry of one reduction position: `off` (elements) and `dr`, `ds` (displacements, packed as two 16-bit
// halves) such that the element of A at row base b, row origin (u, v) is at b + off if (u + dr, v + ds) lies inside
// (forward, backward-filter: the input pixel); backward-data keeps (dr, ds) = the tap's dilated offsets and `off` the
// gradient channel's. `off_b`: backward-filter's dy offset of the position.
struct cv_entry {
  int off;
  int drds;
#if DIRECTION == 2
  int off_b;
#endif
};
DEVICE_FN int cv_pack(int dr, int ds) { return (dr << 16) | (ds & 0xFFFF); }
DEVICE_FN int cv_dr(int drds) { return drds >> 16; }
DEVICE_FN int cv_ds(int drds) { return (int)(short)(drds & 0xFFFF); }

// Phased backward-data: th, tw are this phase's tap counts (positions beyond them are masked).
DEVICE_FN cv_entry cv_table_entry(int red, int th, int tw) {
  cv_entry e;
  (void)th, (void)tw;
#if DIRECTION == 1 && PHASED
  const int kk = red / (CV_TMAX * CV_UMAX), tu = red % (CV_TMAX * CV_UMAX);
  const int t = tu / CV_UMAX, u = tu % CV_UMAX;
  if (red >= CV_RED || t >= th || u >= tw) {
    e.off = 0, e.drds = cv_pack(CV_OUTSIDE, CV_OUTSIDE);
    return e;
  }
  e.off = kk * CV_PQ - t * Q - u;
  e.drds = cv_pack(-t, -u);
  return e;
#endif
  if (red >= CV_RED) {
    // Forward and backward-filter: no row origin plus CV_OUTSIDE is inside the image; backward-data: off < 0.
    e.off = DIRECTION == 1 ? -1 : 0, e.drds = cv_pack(CV_OUTSIDE, CV_OUTSIDE);
#if DIRECTION == 2
    e.off_b = -1;
#endif
    return e;
  }
#if DIRECTION == 0
  const int c = red / CV_RS, rs = red % CV_RS;
  const int dr = (rs / S) * DILATION_H, ds = (rs % S) * DILATION_W;
  e.off = c * CV_HW + dr * W + ds;
  e.drds = cv_pack(dr, ds);
#elif DIRECTION == 1
  const int k = red / CV_RS, rs = red % CV_RS;
  e.off = k * CV_PQ;
  e.drds = cv_pack((rs / S) * DILATION_H, (rs % S) * DILATION_W);
#else
  const int img = red / CV_PQ, pq = red % CV_PQ;
  const int dr = (pq / Q) * STRIDE_H, ds = (pq % Q) * STRIDE_W;
  e.off = img * CV_CHW + dr * W + ds;
  e.drds = cv_pack(dr, ds);
  e.off_b = img * CV_KPQ + pq;
#endif
  return e;
}

// Rows and chunks of the gathered tiles (8 chunks of 16 bytes a row). Forward and backward-data: thread tid gathers
// row tid % (64 WG_M) of A, chunks tid / (64 WG_M) + 2 i, i < 4 (two threads a row, a warp on 32 neighbouring pixels
// of one chunk: coalesced loads, broadcast table reads). Backward-filter, whose rows (taps, dy channels) run along
// the reduction in memory: item i is chunk idx % 8 of row idx / 8, idx = tid + i * threads (eight threads a row, so a
// warp reads 4 rows' 64 consecutive positions), and the table is stored chunk-minor ([element][chunk]) so those eight
// threads read eight neighbouring entries.
#define CV_A_ITEMS 4
#if DIRECTION == 2
#define CV_A_ROWS CV_A_ITEMS
#define CV_A_ROW(i) ((tid + (i) * WG_THREADS) >> 3)
#define CV_A_CHUNK(i) ((tid + (i) * WG_THREADS) & 7)
#define CV_TIDX(pos) (((pos) % WG_CHUNK) * 8 + (pos) / WG_CHUNK)
#else
#define CV_A_ROWS 1
#define CV_A_ROW(i) (tid % WG_BLOCK_M)
#define CV_A_CHUNK(i) (tid / WG_BLOCK_M + 2 * (i))
#define CV_TIDX(pos) (pos)
#endif
#define CV_ROW_STATE(i) (CV_A_ROWS == 1 ? 0 : (i))

// Arguments: forward (x, w, y, ws[, bias]), backward-data (dx, dy, ws), backward-filter (x, dy, ws).
#if DIRECTION == 0 && HAS_BIAS
#define CV_ARGS const wg_elem* RESTRICT x, const wg_elem* RESTRICT w, wg_elem* RESTRICT y, \
                const unsigned char* RESTRICT ws, const float* RESTRICT bias
#elif DIRECTION == 0
#define CV_ARGS const wg_elem* RESTRICT x, const wg_elem* RESTRICT w, wg_elem* RESTRICT y, \
                const unsigned char* RESTRICT ws
#elif DIRECTION == 1
#define CV_ARGS wg_elem* RESTRICT dx, const wg_elem* RESTRICT dy, const unsigned char* RESTRICT ws
#else
#define CV_ARGS const wg_elem* RESTRICT x, const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws
#endif

// One register of gathered elements: two 16-bit ones, or one FP32.
#if ELEM == 2
typedef float cv_reg;
#define CV_REGS_PER_CHUNK 4
#else
typedef unsigned cv_reg;
#define CV_REGS_PER_CHUNK 4
#endif

KERNEL __launch_bounds__(WG_THREADS, 1) void implicit_gemm_wgmma(CV_ARGS) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int z = (int)GROUP_ID(2);
#if DIRECTION == 1 && PHASED
  // This block's phase (a, b) of dx: its taps' first row and column, the dy offset e, its pixel counts.
  const int g = z % GROUPS, slice = 0, phase = z / GROUPS;
  const int pa = phase / STRIDE_W, pb = phase % STRIDE_W;
  const int r0 = (pa + PAD_H) % STRIDE_H, s0 = (pb + PAD_W) % STRIDE_W;
  const int th = r0 < R ? (R - r0 + STRIDE_H - 1) / STRIDE_H : 0, tw = s0 < S ? (S - s0 + STRIDE_W - 1) / STRIDE_W : 0;
  const int ea = (pa + PAD_H - r0) / STRIDE_H, eb = (pb + PAD_W - s0) / STRIDE_W;
  const int ha = pa < H ? (H - pa + STRIDE_H - 1) / STRIDE_H : 0, wb = pb < W ? (W - pb + STRIDE_W - 1) / STRIDE_W : 0;
  const int m_total = N * ha * wb;
  if (m0 >= m_total) return;  // the whole block is past this phase's pixels (before any barrier)
#else
  const int g = z % GROUPS, slice = z / GROUPS;
  const int th = 0, tw = 0, m_total = CV_M;
#endif

  // This block's reduction range: all of it, or one split-K slice of whole tiles.
  const int red_tiles = (CV_RED + WG_TILE_K - 1) / WG_TILE_K;
  const int tiles_per_slice = (red_tiles + SPLIT_K - 1) / SPLIT_K;
  const int tile_begin = slice * tiles_per_slice < red_tiles ? slice * tiles_per_slice : red_tiles;
  const int ntiles = red_tiles - tile_begin < tiles_per_slice ? red_tiles - tile_begin : tiles_per_slice;

  // ---- this thread's A rows: base offset and origin (u, v) of each ----
  int a_base[CV_A_ROWS], a_u[CV_A_ROWS], a_v[CV_A_ROWS];
  PRAGMA_UNROLL
  for (int i = 0; i < CV_A_ROWS; ++i) {
    const int m = m0 + CV_A_ROW(i);
    a_base[i] = 0, a_u[i] = CV_OUTSIDE, a_v[i] = CV_OUTSIDE;
    if (m < m_total) {
#if DIRECTION == 0
      const int img = m / CV_PQ, pq = m % CV_PQ;
      a_u[i] = (pq / Q) * STRIDE_H - PAD_H, a_v[i] = (pq % Q) * STRIDE_W - PAD_W;
      a_base[i] = img * CV_CHW + g * C_PER_GROUP * CV_HW + a_u[i] * W + a_v[i];
#elif DIRECTION == 1 && PHASED
      const int img = m / (ha * wb), ij = m % (ha * wb);
      a_u[i] = ij / wb + ea, a_v[i] = ij % wb + eb;
      a_base[i] = img * CV_KPQ + g * K_PER_GROUP * CV_PQ + a_u[i] * Q + a_v[i];
#elif DIRECTION == 1
      const int img = m / CV_HW, hw = m % CV_HW;
      a_u[i] = hw / W + PAD_H, a_v[i] = hw % W + PAD_W;
      a_base[i] = img * CV_KPQ + g * K_PER_GROUP * CV_PQ;
#else
      const int c = m / CV_RS, rs = m % CV_RS;
      a_u[i] = (rs / S) * DILATION_H - PAD_H, a_v[i] = (rs % S) * DILATION_W - PAD_W;
      a_base[i] = (g * C_PER_GROUP + c) * CV_HW + a_u[i] * W + a_v[i];
#endif
    }
  }
  (void)th, (void)tw;
#if DIRECTION == 0
  const wg_elem* a_src = x;
#elif DIRECTION == 1
  const wg_elem* a_src = dy;
#else
  const wg_elem* a_src = x;
#endif

  // ---- B: filters (forward), transposed filters (backward-data) by cp.async; dy (backward-filter) gathered ----
#if DIRECTION == 0 && W_DIRECT
  const wg_elem* b_rows = w + (long)g * K_PER_GROUP * RED_P;  // RED_P == C/G*R*S here
#elif DIRECTION == 0
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_W) + (long)g * K_PER_GROUP * RED_P;
  (void)w;
#elif DIRECTION == 1 && PHASED
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_W) + ((long)g * CV_PHASES + phase) * C_PER_GROUP * RED_P;
#elif DIRECTION == 1
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_W) + (long)g * C_PER_GROUP * RED_P;
#elif DY_T
  // dy transposed to [channel][(n,p,q)] in the workspace by wg_dy_transpose: copied like the filters.
  const wg_elem* b_rows = (const wg_elem*)(ws + WS_W) + (long)g * K_PER_GROUP * RED_P;
#endif

  extern __shared__ unsigned char wg_smem_raw[];
  const unsigned wg_base = (wg_shared_address(wg_smem_raw) + 1023u) & ~1023u;
  // The reduction tables: STAGES slots of WG_TILE_K entries after the stages.
  cv_entry* table = (cv_entry*)(wg_smem_raw + (wg_base - wg_shared_address(wg_smem_raw)) + STAGES * CV_STAGE_BYTES);
  const int wg_warpgroup = tid >> 7, wg_lane = tid & 31;
  const int wg_row0 = 64 * wg_warpgroup + 16 * ((tid >> 5) & 3);
  const int wg_g = wg_lane >> 2, wg_q = wg_lane & 3;

  cv_reg a_regs[CV_A_ITEMS][CV_REGS_PER_CHUNK];
#if DIRECTION == 2 && !DY_T
#define CV_B_ITEMS (BLOCK_N * 8 / WG_THREADS)  // BLOCK_N <= threads (the family's constraint): at most 8
  cv_reg b_regs[CV_B_ITEMS][CV_REGS_PER_CHUNK];
#endif

  // Table slot of reduction tile `tile` (its entries for positions (tile_begin + tile) * WG_TILE_K ..).
#define CV_TABLE(tile)                                                                           \
  {                                                                                              \
    if (tid < WG_TILE_K)                                                                         \
      table[((tile) % STAGES) * WG_TILE_K + CV_TIDX(tid)] = cv_table_entry((tile_begin + (tile)) * WG_TILE_K + tid, th, tw); \
  }

  // A chunk of one row: WG_CHUNK elements at table entries ch * WG_CHUNK .., into `regs`.
#if DIRECTION == 1 && PHASED
#define CV_A_ELEMENT(entry, value, ri)                                                                  \
  {                                                                                                     \
    const bool ok_ = (unsigned)(a_u[ri] + cv_dr((entry).drds)) < (unsigned)P &&                          \
                     (unsigned)(a_v[ri] + cv_ds((entry).drds)) < (unsigned)Q;                            \
    value = ok_ ? a_src[a_base[ri] + (entry).off] : (wg_elem)0;                                         \
  }
#elif DIRECTION == 1
#define CV_A_ELEMENT(entry, value, ri)                                                               \
  {                                                                                                  \
    const int ph_ = a_u[ri] - cv_dr((entry).drds), qw_ = a_v[ri] - cv_ds((entry).drds);              \
    const bool ok_ = (entry).off >= 0 && ph_ >= 0 && qw_ >= 0 && ph_ % STRIDE_H == 0 &&             \
                     qw_ % STRIDE_W == 0 && ph_ / STRIDE_H < P && qw_ / STRIDE_W < Q;                \
    value = ok_ ? a_src[a_base[ri] + (entry).off + (ph_ / STRIDE_H) * Q + qw_ / STRIDE_W] : (wg_elem)0; \
  }
#else
#define CV_A_ELEMENT(entry, value, ri)                                                                  \
  {                                                                                                     \
    const bool ok_ = (unsigned)(a_u[ri] + cv_dr((entry).drds)) < (unsigned)H &&                          \
                     (unsigned)(a_v[ri] + cv_ds((entry).drds)) < (unsigned)W;                            \
    value = ok_ ? a_src[a_base[ri] + (entry).off] : (wg_elem)0;                                         \
  }
#endif

#if ELEM == 2
#define CV_GATHER_CHUNK(slot_entries, ch, regs, ELEMENT, ri)      \
  {                                                               \
    PRAGMA_UNROLL for (int j = 0; j < 4; ++j) {                   \
      const cv_entry e_ = (slot_entries)[CV_TIDX((ch) * 4 + j)];  \
      float v_;                                                   \
      ELEMENT(e_, v_, ri);                                        \
      (regs)[j] = v_;                                             \
    }                                                             \
  }
#else
#define CV_GATHER_CHUNK(slot_entries, ch, regs, ELEMENT, ri)             \
  {                                                                      \
    PRAGMA_UNROLL for (int j = 0; j < 4; ++j) {                          \
      const cv_entry e0_ = (slot_entries)[CV_TIDX((ch) * 8 + 2 * j)];    \
      const cv_entry e1_ = (slot_entries)[CV_TIDX((ch) * 8 + 2 * j + 1)]; \
      wg_elem v0_, v1_;                                                  \
      ELEMENT(e0_, v0_, ri);                                             \
      ELEMENT(e1_, v1_, ri);                                             \
      (regs)[j] = (unsigned)v0_ | ((unsigned)v1_ << 16);                 \
    }                                                                    \
  }
#endif

#if DIRECTION == 2 && !DY_T
  // dy rows of B (channel g K/G + n): item i is chunk idx % 8 of row idx / 8, idx = tid + i * threads, as for A.
#define CV_B_ROW(i) ((tid + (i) * WG_THREADS) >> 3)
#define CV_B_CHUNK(i) ((tid + (i) * WG_THREADS) & 7)
  int b_base[CV_B_ITEMS];
  PRAGMA_UNROLL
  for (int i = 0; i < CV_B_ITEMS; ++i)
    b_base[i] = n0 + CV_B_ROW(i) < CV_N ? (g * K_PER_GROUP + n0 + CV_B_ROW(i)) * CV_PQ : -1;
#define CV_B_ELEMENT(entry, value, i) \
  { value = b_base[i] >= 0 && (entry).off_b >= 0 ? dy[b_base[i] + (entry).off_b] : (wg_elem)0; }
#endif

#define CV_FETCH(stage, tile)                                                                         \
  {                                                                                                   \
    const cv_entry* entries_ = table + ((tile) % STAGES) * WG_TILE_K;                                 \
    PRAGMA_UNROLL for (int i = 0; i < CV_A_ITEMS; ++i)                                               \
      CV_GATHER_CHUNK(entries_, CV_A_CHUNK(i), a_regs[i], CV_A_ELEMENT, CV_ROW_STATE(i));               \
    CV_FETCH_B(stage, tile, entries_);                                                                \
  }
#if DIRECTION == 2 && !DY_T
#define CV_FETCH_B(stage, tile, entries)                                                              \
  {                                                                                                   \
    PRAGMA_UNROLL for (int i = 0; i < CV_B_ITEMS; ++i)                                                \
      CV_GATHER_CHUNK(entries, CV_B_CHUNK(i), b_regs[i], CV_B_ELEMENT, i);                            \
  }
#else
#define CV_FETCH_B(stage, tile, entries)                                                              \
  {                                                                                                   \
    const int kt_ = (tile_begin + (tile)) * WG_TILE_K;                                                \
    PRAGMA_UNROLL for (int e = 0; e < (BLOCK_N * 8 + WG_THREADS - 1) / WG_THREADS; ++e) {             \
      const int idx = tid + e * WG_THREADS, row = idx >> 3, ch = idx & 7;                             \
      if ((BLOCK_N * 8) % WG_THREADS == 0 || row < BLOCK_N) {                                         \
        const int k_ = kt_ + ch * WG_CHUNK;                                                           \
        const bool ok = n0 + row < CV_N && k_ < RED_P;                                                \
        wg_copy16((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, ch),                                   \
                  b_rows + (ok ? (long)(n0 + row) * RED_P + k_ : 0), ok);                             \
        CV_COPY_LO((stage) + WG_A_STAGE_BYTES + wg_swizzle(row, ch),                                  \
                   b_rows + (ok ? (long)(n0 + row) * RED_P + k_ : 0), ok);                            \
      }                                                                                               \
    }                                                                                                 \
  }
#endif

  #if SPLIT3
#define CV_COPY_LO(dst, src, ok) wg_copy16((dst) + CV_LO, (src) + WS_LO_SHIFT, ok)
#else
#define CV_COPY_LO(dst, src, ok)
#endif

// Registers into the stage: one 16-byte store a chunk (its place in the swizzled row).
#if ELEM == 2
#define CV_REG_BITS(v) __float_as_uint(v)
#else
#define CV_REG_BITS(v) (v)
#endif
#define CV_PUT_CHUNK(addr, regs)                                                                      \
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(CV_REG_BITS((regs)[0])),  \
               "r"(CV_REG_BITS((regs)[1])), "r"(CV_REG_BITS((regs)[2])), "r"(CV_REG_BITS((regs)[3])) : "memory")
#if SPLIT3
// The chunk's big parts into the stage, its residuals into the other half.
#define CV_PUT_SPLIT(addr, regs)                                            \
  {                                                                         \
    float hi_[4], lo_[4];                                                   \
    PRAGMA_UNROLL for (int j_ = 0; j_ < 4; ++j_) {                          \
      hi_[j_] = cv_tf32((regs)[j_]);                                        \
      lo_[j_] = cv_tf32((regs)[j_] - hi_[j_]);                              \
    }                                                                       \
    CV_PUT_CHUNK(addr, hi_);                                                \
    CV_PUT_CHUNK((addr) + CV_LO, lo_);                                      \
  }
#else
#define CV_PUT_SPLIT(addr, regs) CV_PUT_CHUNK(addr, regs)
#endif
#if DIRECTION == 2 && !DY_T
#define CV_PUT_B(stage)                                                                               \
  {                                                                                                   \
    PRAGMA_UNROLL for (int i = 0; i < CV_B_ITEMS; ++i)                                                \
      CV_PUT_SPLIT((stage) + WG_A_STAGE_BYTES + wg_swizzle(CV_B_ROW(i), CV_B_CHUNK(i)), b_regs[i]);    \
  }
#else
#define CV_PUT_B(stage)
#endif
#define CV_PUT(stage)                                                                                 \
  {                                                                                                   \
    PRAGMA_UNROLL for (int i = 0; i < CV_A_ITEMS; ++i)                                                \
      CV_PUT_SPLIT((stage) + wg_swizzle(CV_A_ROW(i), CV_A_CHUNK(i)), a_regs[i]);                       \
    CV_PUT_B(stage);                                                                                  \
  }

  float acc[WG_ACC];
  PRAGMA_UNROLL
  for (int i = 0; i < WG_ACC; ++i) acc[i] = 0.0f;

  // Prologue: the tables of tiles 0 .. STAGES-2, then tiles 0 .. STAGES-3 gathered and stored.
  for (int s = 0; s < STAGES - 1; ++s)
    if (s < ntiles) CV_TABLE(s);
  BARRIER();
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < ntiles) {
      CV_FETCH(wg_base + s * CV_STAGE_BYTES, s);
      CV_PUT(wg_base + s * CV_STAGE_BYTES);
    }
    WG_COPY_COMMIT();
  }
  for (int t = 0; t < ntiles; ++t) {
    WG_COPY_WAIT(STAGES - 3);
    WG_FENCE_PROXY();  // this thread's copies and stores of tile t, into the async proxy
    BARRIER();         // everyone's; every warpgroup is done with tile t-2; tile t+STAGES-2's table is in place
    if (t + STAGES - 1 < ntiles) CV_TABLE(t + STAGES - 1);
    const bool more = t + STAGES - 2 < ntiles;
    const unsigned next = wg_base + ((t + STAGES - 2) % STAGES) * CV_STAGE_BYTES;
    if (more) CV_FETCH(next, t + STAGES - 2);
    WG_COPY_COMMIT();
    const unsigned stage = wg_base + (t % STAGES) * CV_STAGE_BYTES;
    const unsigned long long a_desc = wg_descriptor(stage + wg_warpgroup * (64 * 128));
    const unsigned long long b_desc = wg_descriptor(stage + WG_A_STAGE_BYTES);
#if SPLIT3
    // The residual products first, then the big one, into zeroed accumulators; waited for at once (they are
    // three times the MMAs of the other modes, so the wait costs less) and added into the FP32 sums.
    const unsigned long long a_lo = wg_descriptor(stage + CV_LO + wg_warpgroup * (64 * 128));
    const unsigned long long b_lo = wg_descriptor(stage + CV_LO + WG_A_STAGE_BYTES);
    float part[WG_ACC];
    PRAGMA_UNROLL
    for (int i = 0; i < WG_ACC; ++i) part[i] = 0.0f;
    WG_MMA_FENCE();
    PRAGMA_UNROLL
    for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) {
      WG_MMA(part, a_lo + 2 * s, b_desc + 2 * s);
      WG_MMA(part, a_desc + 2 * s, b_lo + 2 * s);
    }
    PRAGMA_UNROLL
    for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) WG_MMA(part, a_desc + 2 * s, b_desc + 2 * s);
    WG_MMA_COMMIT();
    WG_MMA_WAIT(0);
    PRAGMA_UNROLL
    for (int i = 0; i < WG_ACC; ++i) {
      asm volatile("" : "+f"(part[i])::"memory");  // read only after the wait
      acc[i] += part[i];
    }
#else
    WG_MMA_FENCE();
    PRAGMA_UNROLL
    for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) WG_MMA(acc, a_desc + 2 * s, b_desc + 2 * s);
    WG_MMA_COMMIT();
    WG_MMA_WAIT(1);          // tile t-1's MMAs done: time for the gathered loads to land
#endif
    if (more) CV_PUT(next);  // their registers into the stage (before the next barrier)
  }
  WG_MMA_WAIT(0);
  WG_COPY_WAIT(0);

  // ---- epilogue ----
#if DIRECTION == 2
  float* out = (float*)(ws + WS_PARTIAL);
#endif
  PRAGMA_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int mm = m0 + WG_ACC_ROW(r);
    if (mm >= m_total) continue;
#if DIRECTION == 0
    const int img = mm / CV_PQ, pq = mm % CV_PQ;
    wg_elem* out_row = y + ((long)img * K + g * K_PER_GROUP) * CV_PQ + pq;  // + n * PQ
#elif DIRECTION == 1 && PHASED
    const int img = mm / (ha * wb), ij = mm % (ha * wb);
    const int hw = (pa + STRIDE_H * (ij / wb)) * W + pb + STRIDE_W * (ij % wb);
    wg_elem* out_row = dx + ((long)img * C + g * C_PER_GROUP) * CV_HW + hw;  // + n * HW
#elif DIRECTION == 1
    const int img = mm / CV_HW, hw = mm % CV_HW;
    wg_elem* out_row = dx + ((long)img * C + g * C_PER_GROUP) * CV_HW + hw;  // + n * HW
#else
    float* out_row = out + (((long)slice * GROUPS + g) * CV_CRS + mm) * K_PER_GROUP;  // + n
#endif
    PRAGMA_UNROLL
    for (int j = 0; j < BLOCK_N / 8; ++j) {
      const int n = n0 + WG_ACC_COL(j, r);
      if (n >= CV_N) continue;
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
      out_row[n] = value;
#endif
    }
  }
}

// ---- the other kernels of a recipe ----
#if DIRECTION == 0 && !W_DIRECT
// w[k][(c,r,s)] padded to RED_P columns (its rows are not a whole number of 16-byte chunks).
KERNEL void wg_weights(const wg_elem* RESTRICT w, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)K * RED_P) return;
  const int red = (int)(idx % RED_P), k = (int)(idx / RED_P);
  CV_STORE((wg_elem*)(ws + WS_W), idx, red < CV_CRS ? w[(long)k * CV_CRS + red] : (wg_elem)0);
}
#elif DIRECTION == 1 && PHASED
// wt[g][phase][c][(k,t,u)] = w[g K/G + k][c][r0 + STRIDE_H t][s0 + STRIDE_W u] of each phase's taps, padded to RED_P.
KERNEL void wg_weights(const wg_elem* RESTRICT w, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)GROUPS * CV_PHASES * C_PER_GROUP * RED_P) return;
  const int red = (int)(idx % RED_P);
  const long gpc = idx / RED_P;
  const int c = (int)(gpc % C_PER_GROUP), phase = (int)(gpc / C_PER_GROUP % CV_PHASES), g = (int)(gpc / C_PER_GROUP / CV_PHASES);
  const int pa = phase / STRIDE_W, pb = phase % STRIDE_W;
  const int r0 = (pa + PAD_H) % STRIDE_H, s0 = (pb + PAD_W) % STRIDE_W;
  wg_elem value = 0;
  if (red < CV_RED) {
    const int k = red / (CV_TMAX * CV_UMAX), tu = red % (CV_TMAX * CV_UMAX);
    const int r = r0 + STRIDE_H * (tu / CV_UMAX), s = s0 + STRIDE_W * (tu % CV_UMAX);
    if (r < R && s < S) value = w[((long)(g * K_PER_GROUP + k) * C_PER_GROUP + c) * CV_RS + r * S + s];
  }
  CV_STORE((wg_elem*)(ws + WS_W), idx, value);
}
#elif DIRECTION == 1
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
  CV_STORE((wg_elem*)(ws + WS_W), idx, value);
}
#elif DIRECTION == 2
#if DY_T
// dyt[channel][(n,p,q)] = dy[n][channel][p][q], rows padded to RED_P: backward-filter's B operand K-contiguous, so
// the main kernel copies it by cp.async instead of gathering it.
KERNEL void wg_dy_transpose(const wg_elem* RESTRICT dy, unsigned char* RESTRICT ws) {
  const long idx = GLOBAL_ID(0);
  if (idx >= (long)K * RED_P) return;
  const int j = (int)(idx % RED_P), k = (int)(idx / RED_P);
  CV_STORE((wg_elem*)(ws + WS_W), idx, j < CV_RED ? dy[((long)(j / CV_PQ) * K + k) * CV_PQ + j % CV_PQ] : (wg_elem)0);
}
#endif
// dw[g K/G + k][(c,r,s)] = the split-K slices' partials summed in order, rounded once.
KERNEL void wg_filter_reduce(const unsigned char* RESTRICT ws, wg_elem* RESTRICT dw) {
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
