// A batched GEMM inside one buffer (the workspace) on Hopper's wgmma in tf32 or 3xtf32 math, for the families that
// transform their operands there first (fft_wgmma): the blocks the including file's layout macros describe, as
// gemm.cl and tc_workspace_gemm.h read them: A_BASE, B_BASE, C_BASE (offsets into the workspace, functions of
// `group`, work-group axis 2), GEMM_M, GEMM_N, GEMM_K, A_LD, B_LD, C_LD, B_TRANS and ACCUMULATE. A is row-major
// GEMM_M x GEMM_K (K-contiguous); B is GEMM_K x GEMM_N row-major (N-contiguous: the FFT's forward and backward-data
// tiles), or GEMM_N x GEMM_K with B_TRANS.
//
// Why the operands pass through registers rather than cp.async: wgmma reads TF32 operands from shared memory only
// K-major, and in 3xtf32 each needs its TF32 big part and residual. So every thread loads its share of a reduction
// tile LOADS_AHEAD tiles ahead (16-byte loads where A_VECTOR / B_VECTOR are 4, else single floats) while the tensor
// cores work on the current one, rounds each value to TF32 (round to nearest, as the host's helpers do) and, in 3xtf32
// (MATH_SPLIT 1), forms the residual, and stores them into the other of two buffers in wgmma.h's 128-byte-swizzled
// K-major layout; an N-contiguous B is transposed on the way. A tile's three products (residual x big, big x residual,
// big x big) go into zeroed partial sums added with round-to-nearest FP32 adds, as wg_mainloop_split3.h does (the
// tensor cores truncate when they accumulate). Include after wgmma.h (ELEM 2) and the layout macros; the kernel is
// named WG_WORKSPACE_GEMM_NAME. Defines: WG_M, BLOCK_N, LOADS_AHEAD (1 or 2), MATH_SPLIT, A_VECTOR, B_VECTOR.
#if A_TRANS
#error "the workspace GEMM reads A untransposed (K-contiguous A tiles)"
#endif
#if ELEM != 2
#error "wg_workspace_gemm.h computes FP32 workspaces in tf32 or 3xtf32 math (ELEM 2)"
#endif

#if MATH_SPLIT
#define WW_BUF_BYTES (2 * WG_STAGE_BYTES)  // big parts' A and B tiles, then the residuals'
#else
#define WW_BUF_BYTES WG_STAGE_BYTES
#endif
// 16-byte groups (4 reduction elements of a row, or 4 columns of a reduction row) per thread and tile.
#define WW_A_GROUPS (WG_BLOCK_M * 8 / WG_THREADS)
#define WW_B_GROUPS (BLOCK_N * 8 / WG_THREADS)

DEVICE_FN float ww_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// Four floats src[0], src[step], src[2 step], src[3 step] (16 bytes at once where VEC is 4 and step 1), those at
// index >= `valid` (and all when !ok) zero.
DEVICE_FN float4 ww_load4(const float* src, int valid, bool ok, int vec) {
  if (!ok) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (vec == 4) return __ldg((const float4*)src);
  return make_float4(__ldg(src), valid > 1 ? __ldg(src + 1) : 0.0f, valid > 2 ? __ldg(src + 2) : 0.0f,
                     valid > 3 ? __ldg(src + 3) : 0.0f);
}

// One float into the buffer at byte offset `offset` of the big parts' tile (and its residual WG_STAGE_BYTES later).
DEVICE_FN void ww_store1(unsigned addr, float v) {
  const float hi = ww_tf32(v);
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(hi) : "memory");
#if MATH_SPLIT
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr + WG_STAGE_BYTES), "f"(v - hi) : "memory");
#endif
}
DEVICE_FN void ww_store4(unsigned addr, float4 v) {
  const float4 hi = make_float4(ww_tf32(v.x), ww_tf32(v.y), ww_tf32(v.z), ww_tf32(v.w));
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(hi.x), "f"(hi.y), "f"(hi.z), "f"(hi.w)
               : "memory");
#if MATH_SPLIT
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr + WG_STAGE_BYTES), "f"(v.x - hi.x),
               "f"(v.y - hi.y), "f"(v.z - hi.z), "f"(v.w - hi.w)
               : "memory");
#endif
}

KERNEL __launch_bounds__(WG_THREADS, 1) void WG_WORKSPACE_GEMM_NAME(float* RESTRICT workspace) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * BLOCK_N;
  const int m0 = (int)GROUP_ID(1) * WG_BLOCK_M;
  const int group = (int)GROUP_ID(2);  // read by the layout macros A_BASE, B_BASE, C_BASE
  const int ntiles = (GEMM_K + WG_TILE_K - 1) / WG_TILE_K;
  const int m_valid = GEMM_M - m0 < WG_BLOCK_M ? GEMM_M - m0 : WG_BLOCK_M;
  const int n_valid = GEMM_N - n0 < BLOCK_N ? GEMM_N - n0 : BLOCK_N;
  const float* a = workspace + A_BASE + (long)m0 * A_LD;
#if B_TRANS
  const float* b = workspace + B_BASE + (long)n0 * B_LD;
#else
  const float* b = workspace + B_BASE + n0;
#endif

  extern __shared__ unsigned char wg_smem_raw[];  // 2 x WW_BUF_BYTES + 1024: the launch's dynamic shared memory
  const unsigned base = (wg_shared_address(wg_smem_raw) + 1023u) & ~1023u;
  const int wg_warpgroup = tid >> 7, wg_lane = tid & 31;
  const int wg_row0 = 64 * wg_warpgroup + 16 * ((tid >> 5) & 3);
  const int wg_g = wg_lane >> 2, wg_q = wg_lane & 3;

  // Group e of a K-contiguous operand: row idx / 8, 16-byte chunk idx % 8 of the tile's 128-byte rows.
#define WW_LOAD_KCONTIG(regs, COUNT, src, ld, rows_valid, VEC)                              \
  PRAGMA_UNROLL for (int e = 0; e < (COUNT); ++e) {                                         \
    const int idx = tid + e * WG_THREADS, row = idx >> 3, k_ = kt + (idx & 7) * 4;           \
    const bool ok = row < (rows_valid) && k_ < GEMM_K;                                       \
    regs[e] = ww_load4((src) + (ok ? (long)row * (ld) + k_ : 0), GEMM_K - k_, ok, (VEC));    \
  }
#define WW_STORE_KCONTIG(regs, COUNT, tile)                                                  \
  PRAGMA_UNROLL for (int e = 0; e < (COUNT); ++e) {                                         \
    const int idx = tid + e * WG_THREADS;                                                    \
    ww_store4((tile) + wg_swizzle(idx >> 3, idx & 7), regs[e]);                              \
  }
  // An N-contiguous B: a warp takes 8 columns (two runs of 4, lane % 2) in 16 reduction rows (lane / 2), so each
  // row's 32 bytes are one sector; storing element i of its run, the 32 lanes write rows col + i of 4 chunks x 4
  // words in two row phases (col % 8 is 0 or 4), 32 different banks of the swizzled layout: no conflicts, and i a
  // compile-time constant.
#define WW_B_COLS (BLOCK_N / 8)  // 8-column runs of the tile
#define WW_NB_COL(idx) ((((idx) >> 5) % WW_B_COLS) * 8 + ((idx) & 1) * 4)
#define WW_NB_K(idx) ((((idx) >> 5) / WW_B_COLS) * 16 + (((idx) >> 1) & 15))
#define WW_LOAD_NCONTIG(regs)                                                                        \
  PRAGMA_UNROLL for (int e = 0; e < WW_B_GROUPS; ++e) {                                              \
    const int idx = tid + e * WG_THREADS, col = WW_NB_COL(idx), k_ = kt + WW_NB_K(idx);              \
    const bool ok = col < n_valid && k_ < GEMM_K;                                                    \
    regs[e] = ww_load4(b + (ok ? (long)k_ * B_LD + col : 0), n_valid - col, ok, B_VECTOR);           \
  }
  // Element i of run col goes to row col + i, chunk kk / 4, word kk % 4: the swizzled chunk is (kk / 4) ^ ((col % 8)
  // + i) = ((kk / 4) ^ (col % 8)) ^ i, as col % 8 is 0 or 4 and i < 4.
#define WW_STORE_NCONTIG(regs, tile)                                                                 \
  PRAGMA_UNROLL for (int e = 0; e < WW_B_GROUPS; ++e) {                                              \
    const int idx = tid + e * WG_THREADS, col = WW_NB_COL(idx), kk = WW_NB_K(idx);                  \
    const unsigned row0_ = (tile) + (unsigned)(col * 128 + 4 * (kk & 3));                            \
    const int chunk_ = (kk >> 2) ^ (col & 7);                                                        \
    ww_store1(row0_ + ((chunk_ ^ 0) << 4), regs[e].x);                                               \
    ww_store1(row0_ + 128 + ((chunk_ ^ 1) << 4), regs[e].y);                                         \
    ww_store1(row0_ + 256 + ((chunk_ ^ 2) << 4), regs[e].z);                                         \
    ww_store1(row0_ + 384 + ((chunk_ ^ 3) << 4), regs[e].w);                                         \
  }
#if B_TRANS
#define WW_LOAD_B(RB) WW_LOAD_KCONTIG(RB, WW_B_GROUPS, b, B_LD, n_valid, B_VECTOR)
#define WW_STORE_B(tile, RB) WW_STORE_KCONTIG(RB, WW_B_GROUPS, tile)
#else
#define WW_LOAD_B(RB) WW_LOAD_NCONTIG(RB)
#define WW_STORE_B(tile, RB) WW_STORE_NCONTIG(RB, tile)
#endif
  // Reduction tile `tile_index` into the register set (RA, RB); a set into buffer `buffer`.
#define WW_LOAD(tile_index, RA, RB)                                                          \
  {                                                                                          \
    const int kt = (tile_index) * WG_TILE_K;                                                 \
    WW_LOAD_KCONTIG(RA, WW_A_GROUPS, a, A_LD, m_valid, A_VECTOR)                             \
    WW_LOAD_B(RB)                                                                            \
  }
#define WW_STORE(buffer, RA, RB)                                \
  {                                                             \
    WW_STORE_KCONTIG(RA, WW_A_GROUPS, (buffer))                 \
    WW_STORE_B((buffer) + WG_A_STAGE_BYTES, RB)                 \
  }

  // LOADS_AHEAD register sets: with two, tile t+2's loads are issued at tile t and stored into shared memory a whole
  // tile later, so their latency hides behind two tiles' MMAs instead of one (the reductions here are a few tiles:
  // alex2's forward GEMM has 4). With one, the second set is the first.
  float4 ra0[WW_A_GROUPS], rb0[WW_B_GROUPS];
#if LOADS_AHEAD == 2
  float4 ra1[WW_A_GROUPS], rb1[WW_B_GROUPS];
#else
#define ra1 ra0
#define rb1 rb0
#endif

  float acc[WG_ACC];
  PRAGMA_UNROLL
  for (int i = 0; i < WG_ACC; ++i) acc[i] = 0.0f;

#if MATH_SPLIT
#define WW_MMAS(buffer)                                                                                  \
  {                                                                                                      \
    const unsigned long long a_hi = wg_descriptor((buffer) + wg_warpgroup * (64 * 128));                 \
    const unsigned long long b_hi = wg_descriptor((buffer) + WG_A_STAGE_BYTES);                          \
    const unsigned long long a_lo = wg_descriptor((buffer) + WG_STAGE_BYTES + wg_warpgroup * (64 * 128)); \
    const unsigned long long b_lo = wg_descriptor((buffer) + WG_STAGE_BYTES + WG_A_STAGE_BYTES);         \
    PRAGMA_UNROLL for (int i = 0; i < WG_ACC; ++i) part[i] = 0.0f;                                       \
    WG_MMA_FENCE();                                                                                      \
    PRAGMA_UNROLL for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) {                                      \
      WG_MMA(part, a_lo + 2 * s, b_hi + 2 * s);                                                          \
      WG_MMA(part, a_hi + 2 * s, b_lo + 2 * s);                                                          \
    }                                                                                                    \
    PRAGMA_UNROLL for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) WG_MMA(part, a_hi + 2 * s, b_hi + 2 * s); \
    WG_MMA_COMMIT();                                                                                     \
  }
#define WW_MMA_DONE()                                                                 \
  {                                                                                   \
    WG_MMA_WAIT(0);                                                                   \
    PRAGMA_UNROLL for (int i = 0; i < WG_ACC; ++i) {                                  \
      asm volatile("" : "+f"(part[i])::"memory"); /* read only after the wait */      \
      acc[i] += part[i];                                                              \
    }                                                                                 \
  }
  float part[WG_ACC];
#else
#define WW_MMAS(buffer)                                                                             \
  {                                                                                                 \
    const unsigned long long a_hi = wg_descriptor((buffer) + wg_warpgroup * (64 * 128));            \
    const unsigned long long b_hi = wg_descriptor((buffer) + WG_A_STAGE_BYTES);                     \
    WG_MMA_FENCE();                                                                                 \
    PRAGMA_UNROLL for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) WG_MMA(acc, a_hi + 2 * s, b_hi + 2 * s); \
    WG_MMA_COMMIT();                                                                                \
  }
#define WW_MMA_DONE() WG_MMA_WAIT(0)
#endif
  // Tile t: the loads of tile t + LOADS_AHEAD into (LA, LB) (the set whose tile was stored at t-1), tile t's MMAs,
  // then tile t+1's set (SA, SB) into the other buffer, last read by tile t-1's MMAs, which every warpgroup waited
  // for before the barrier that ended tile t-1.
#define WW_TILE(t, LA, LB, SA, SB)                                                   \
  {                                                                                  \
    const unsigned buffer = base + ((t) & 1) * WW_BUF_BYTES;                         \
    if ((t) + LOADS_AHEAD < ntiles) WW_LOAD((t) + LOADS_AHEAD, LA, LB);              \
    WW_MMAS(buffer);                                                                 \
    if ((t) + 1 < ntiles) WW_STORE(base + (((t) + 1) & 1) * WW_BUF_BYTES, SA, SB);   \
    WW_MMA_DONE();                                                                   \
    WG_FENCE_PROXY();                                                                \
    BARRIER();                                                                       \
  }

  WW_LOAD(0, ra0, rb0);
#if LOADS_AHEAD == 2
  if (ntiles > 1) WW_LOAD(1, ra1, rb1);
#endif
  WW_STORE(base, ra0, rb0);
  WG_FENCE_PROXY();
  BARRIER();
  // Two tiles a trip, so that every register set is named at compile time.
  for (int t = 0; t < ntiles; t += 2) {
    WW_TILE(t, ra0, rb0, ra1, rb1);
    if (t + 1 < ntiles) WW_TILE(t + 1, ra1, rb1, ra0, rb0);
  }

  float* out = workspace + C_BASE;
  PRAGMA_UNROLL
  for (int j = 0; j < BLOCK_N / 8; ++j) {
    PRAGMA_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int m = m0 + WG_ACC_ROW(r), n = n0 + WG_ACC_COL(j, r);
      if (m < GEMM_M && n < GEMM_N) {
#if ACCUMULATE
        out[(long)m * C_LD + n] += acc[4 * j + r];
#else
        out[(long)m * C_LD + n] = acc[4 * j + r];
#endif
      }
    }
  }
}
