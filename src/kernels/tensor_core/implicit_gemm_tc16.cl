// The implicit_gemm_tc family's 16-bit kernel: convolutions of BF16 or FP16 tensors (ELEM_BF16) in all three
// directions as implicit GEMMs on tensor cores with FP32 accumulation (tc16_common.h, tc16_mainloop.h), with the
// GEMM mapping and gathers of implicit_gemm/implicit_gemm.cl (implicit_gemm/gather.h) as implicit_gemm_tc.cl has
// them. Gathered elements travel through registers (cp.async moves 4 bytes at least, a gather one 16-bit element);
// forward's A rows (filters, contiguous along the reduction) by 16-byte cp.async where they stay aligned. A is
// K-contiguous in shared memory, B K-contiguous for backward-filter only. SPLIT_K > 1 writes FP32 partial outputs to
// the workspace, which tc_splitk_reduce sums, finishes (forward's bias and ReLU) and rounds. Bias is FP32. Grid:
// axis 0 N-tiles, axis 1 M-tiles, axis 2 groups x split-K slices. Every shape and parameter is a define from the
// family (the file does not compile alone).
#define TC_A_KCONTIG 1
#define TC_B_KCONTIG (DIRECTION == 2)
#include "tensor_core/tc16_common.h"

#define IG_RS (R * S)
#define IG_HW (H * W)
#define IG_PQ (P * Q)
#define IG_CHW (C * IG_HW)
#define IG_KPQ (K * IG_PQ)
#if DIRECTION == 0
#define IG_GM K_PER_GROUP
#define IG_GN (N * IG_PQ)
#define IG_GR (C_PER_GROUP * IG_RS)
#define IG_OUT_ELEMENTS (N * IG_KPQ)
#elif DIRECTION == 1
#define IG_GM C_PER_GROUP
#define IG_GN (N * IG_HW)
#define IG_GR (K_PER_GROUP * IG_RS)
#define IG_OUT_ELEMENTS (N * IG_CHW)
#else
#define IG_GM K_PER_GROUP
#define IG_GN (C_PER_GROUP * IG_RS)
#define IG_GR (N * IG_PQ)
#define IG_OUT_ELEMENTS (K * C_PER_GROUP * IG_RS)
#endif
#define IG_R_EVEN ((IG_GR % TILE_K) == 0)
#define IG_TILES_R ((IG_GR + TILE_K - 1) / TILE_K)
#define IG_CHECK_H (PAD_H > 0)
#define IG_CHECK_W (PAD_W > 0)
#include "implicit_gemm/gather.h"

// A copies of 8 elements (16 bytes) in the forward direction where the family found the filter rows a multiple of 8
// long (A_VECTOR=8) and the tile holds 8 elements per thread, else element-wise through registers.
#if defined(A_VECTOR) && A_VECTOR == 8 && DIRECTION == 0 && (TILE_M * TILE_K) % (8 * TC_THREADS) == 0
#define TC_A_VEC 8
#else
#define TC_A_VEC 1
#endif
#define TC_LOADS_A (TILE_M * TILE_K / (TC_A_VEC * TC_THREADS))
#define TC_LOADS_B (TILE_N * TILE_K / TC_THREADS)
#define TC_B_COLUMNS (TILE_N > TC_THREADS ? TILE_N / TC_THREADS : 1)

#if DIRECTION == 0
#define TC_KERNEL_NAME implicit_gemm_tc16_fwd
#define TC_X_QUAL const
#define TC_W_QUAL const
#define TC_Y_QUAL
#elif DIRECTION == 1
#define TC_KERNEL_NAME implicit_gemm_tc16_bwd_data
#define TC_X_QUAL
#define TC_W_QUAL const
#define TC_Y_QUAL const
#else
#define TC_KERNEL_NAME implicit_gemm_tc16_bwd_filter
#define TC_X_QUAL const
#define TC_W_QUAL
#define TC_Y_QUAL const
#endif
// The written operand is FP32 partials in the workspace under split-K, 16-bit elements otherwise.
#if SPLIT_K > 1
#define TC_OUT_T float
#else
#define TC_OUT_T tc_h16
#endif
#if DIRECTION == 0
#define TC_X_T tc_h16
#define TC_W_T tc_h16
#define TC_Y_T TC_OUT_T
#elif DIRECTION == 1
#define TC_X_T TC_OUT_T
#define TC_W_T tc_h16
#define TC_Y_T tc_h16
#else
#define TC_X_T tc_h16
#define TC_W_T TC_OUT_T
#define TC_Y_T tc_h16
#endif
#define TC_EPILOGUE_BIAS (HAS_BIAS && SPLIT_K == 1)
#define TC_EPILOGUE_RELU (HAS_RELU && SPLIT_K == 1)

#if DIRECTION == 0
#define TC_B_COLUMN(n, base, u, v)                                       \
  {                                                                      \
    const int img_ = (unsigned)(n) / IG_PQ, pq_ = (unsigned)(n) % IG_PQ; \
    base = img_ * IG_CHW;                                                \
    u = (int)((unsigned)pq_ / Q) * STRIDE_H - PAD_H;                     \
    v = (int)((unsigned)pq_ % Q) * STRIDE_W - PAD_W;                     \
  }
#elif DIRECTION == 1
#define TC_B_COLUMN(n, base, u, v)                                       \
  {                                                                      \
    const int img_ = (unsigned)(n) / IG_HW, hw_ = (unsigned)(n) % IG_HW; \
    base = img_ * IG_KPQ;                                                \
    u = (int)((unsigned)hw_ / W) + PAD_H;                                \
    v = (int)((unsigned)hw_ % W) + PAD_W;                                \
  }
#else
#define TC_B_COLUMN(n, base, u, v)                                       \
  {                                                                      \
    const int c_ = (unsigned)(n) / IG_RS, rs_ = (unsigned)(n) % IG_RS;   \
    base = c_ * IG_HW;                                                   \
    u = (int)((unsigned)rs_ / S) * DILATION_H - PAD_H;                   \
    v = (int)((unsigned)rs_ % S) * DILATION_W - PAD_W;                   \
  }
#endif

KERNEL TC_ATTRIBUTES void TC_KERNEL_NAME(TC_X_QUAL GLOBAL TC_X_T* RESTRICT x, TC_W_QUAL GLOBAL TC_W_T* RESTRICT w,
                                         TC_Y_QUAL GLOBAL TC_Y_T* RESTRICT y
#if TC_EPILOGUE_BIAS
                                         , const GLOBAL float* RESTRICT bias
#endif
) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * TILE_N;
  const int m0 = (int)GROUP_ID(1) * TILE_M;
  const int z = (int)GROUP_ID(2);
  const int g = z % GROUPS;
  // This block's reduction range: all of it, or one split-K slice of whole tiles (as implicit_gemm/group_range.h;
  // that header's operand pointers are FP32).
#if SPLIT_K > 1
  const int slice = z / GROUPS;
  const int tiles_per_slice = (IG_TILES_R + SPLIT_K - 1) / SPLIT_K;
  const int tile_begin = slice * tiles_per_slice;
  const int tiles_left = IG_TILES_R - tile_begin;
  const int ntiles = tiles_left < tiles_per_slice ? tiles_left : tiles_per_slice;
#else
  const int tile_begin = 0;
  const int ntiles = IG_TILES_R;
#endif
  const int k_begin = tile_begin * TILE_K;
#if DIRECTION == 0
  const GLOBAL tc_h16* a_src = w + g * (K_PER_GROUP * IG_GR);
  const GLOBAL tc_h16* b_src = x + g * (C_PER_GROUP * IG_HW);
#elif DIRECTION == 1
  const GLOBAL tc_h16* a_src = w + g * (K_PER_GROUP * C_PER_GROUP * IG_RS);
  const GLOBAL tc_h16* b_src = y + g * (K_PER_GROUP * IG_PQ);
#else
  const GLOBAL tc_h16* a_src = y + g * (K_PER_GROUP * IG_PQ);
  const GLOBAL tc_h16* b_src = x + g * (C_PER_GROUP * IG_HW);
#endif

  // A elements: reduction column a_kl (.. + TC_A_VEC - 1) of rows a_ml0 + e * (threads * TC_A_VEC / TILE_K).
  const int a_kl = tid % (TILE_K / TC_A_VEC) * TC_A_VEC, a_ml0 = tid / (TILE_K / TC_A_VEC);
  tc_h16 regs_a[TC_A_VEC == 1 ? TC_LOADS_A : 1];
  tc_h16 regs_b[TC_LOADS_B];
  (void)regs_a;
#if DIRECTION == 2
  const int b_kl = tid % TILE_K, b_nl0 = tid / TILE_K;  // B elements likewise, over columns
#else
  // B elements: column (tid + (e % TC_B_COLUMNS) * threads) % TILE_N, reduction row (tid + e * threads) / TILE_N.
  int b_base[TC_B_COLUMNS], b_u[TC_B_COLUMNS], b_v[TC_B_COLUMNS];
  bool b_inside[TC_B_COLUMNS];
  TC_UNROLL
  for (int cl = 0; cl < TC_B_COLUMNS; ++cl) {
    int n = n0 + (tid + cl * TC_THREADS) % TILE_N;
    b_inside[cl] = n < IG_GN;
    if (n >= IG_GN) n = IG_GN - 1;
    TC_B_COLUMN(n, b_base[cl], b_u[cl], b_v[cl]);
  }
#endif

#define TC_FETCH(as, bs, tile)                                                                      \
  {                                                                                                 \
    const int kt_ = k_begin + (tile) * TILE_K;                                                      \
    const int ka_ = kt_ + a_kl;                                                                     \
    const bool a_in_ = IG_IN_REDUCTION(ka_);                                                        \
    const int a_red_ = IG_A_RED(ka_);                                                               \
    TC_UNROLL for (int e = 0; e < TC_LOADS_A; ++e) {                                                \
      const int ml_ = a_ml0 + e * (TC_THREADS * TC_A_VEC / TILE_K);                                 \
      const bool ok_ = a_in_ && m0 + ml_ < IG_GM;                                                   \
      const GLOBAL tc_h16* as_ = a_src + (ok_ ? IG_A_ROW(m0 + ml_) + a_red_ : 0);                   \
      if (TC_A_VEC == 8) tc16_copy_bytes((as) + ml_ * TC_A_PITCH + a_kl, as_, ok_, 8);              \
      else regs_a[TC_A_VEC == 8 ? 0 : e] = ok_ ? *as_ : (tc_h16)0;                                  \
    }                                                                                               \
    TC_FETCH_B(kt_);                                                                                \
  }
#if DIRECTION == 2
#define TC_FETCH_B(kt)                                                                     \
  {                                                                                        \
    const int kb_ = (kt) + b_kl;                                                           \
    TC_UNROLL for (int e = 0; e < TC_LOADS_B; ++e) {                                       \
      const int nl_ = b_nl0 + e * (TC_THREADS / TILE_K);                                   \
      int n_ = n0 + nl_, base_, u_, v_, off_;                                              \
      bool ok_;                                                                            \
      const bool inside_ = n_ < IG_GN;                                                     \
      if (!inside_) n_ = IG_GN - 1;                                                        \
      TC_B_COLUMN(n_, base_, u_, v_);                                                      \
      IG_GATHER(kb_, base_, u_, v_, off_, ok_);                                            \
      regs_b[e] = ok_ && inside_ ? b_src[off_] : (tc_h16)0;                                \
    }                                                                                      \
  }
#define TC_PUT_B(bs)                                                                       \
  {                                                                                        \
    TC_UNROLL for (int e = 0; e < TC_LOADS_B; ++e)                                         \
      (bs)[(b_nl0 + e * (TC_THREADS / TILE_K)) * TC_B_PITCH + b_kl] = regs_b[e];           \
  }
#else
#define TC_FETCH_B(kt)                                                                     \
  {                                                                                        \
    TC_UNROLL for (int e = 0; e < TC_LOADS_B; ++e) {                                       \
      const int idx_ = tid + e * TC_THREADS;                                               \
      const int cl_ = e % TC_B_COLUMNS, kl_ = idx_ / TILE_N;                               \
      int off_;                                                                            \
      bool ok_;                                                                            \
      IG_GATHER((kt) + kl_, b_base[cl_], b_u[cl_], b_v[cl_], off_, ok_);                   \
      regs_b[e] = ok_ && b_inside[cl_] ? b_src[off_] : (tc_h16)0;                          \
    }                                                                                      \
  }
#define TC_PUT_B(bs)                                                                       \
  {                                                                                        \
    TC_UNROLL for (int e = 0; e < TC_LOADS_B; ++e) {                                       \
      const int idx_ = tid + e * TC_THREADS;                                               \
      (bs)[idx_ / TILE_N * TC_B_PITCH + idx_ % TILE_N] = regs_b[e];                        \
    }                                                                                      \
  }
#endif
#if TC_A_VEC == 8
#define TC_PUT(as, bs) TC_PUT_B(bs)
#else
#define TC_PUT(as, bs)                                                                     \
  {                                                                                        \
    TC_UNROLL for (int e = 0; e < TC_LOADS_A; ++e)                                         \
      (as)[(a_ml0 + e * (TC_THREADS / TILE_K)) * TC_A_PITCH + a_kl] = regs_a[e];           \
    TC_PUT_B(bs);                                                                          \
  }
#endif

#include "tensor_core/tc16_mainloop.h"

  // ---- store: output element (m, n) of group g at out + row part of m + column part of n ----
#if DIRECTION == 0
  GLOBAL TC_OUT_T* out = y + g * (K_PER_GROUP * IG_PQ);
#define TC_OUT_ROW(m) ((m) * IG_PQ)
#define TC_OUT_COL(n) ((int)((unsigned)(n) / IG_PQ) * IG_KPQ + (int)((unsigned)(n) % IG_PQ))
#elif DIRECTION == 1
  GLOBAL TC_OUT_T* out = x + g * (C_PER_GROUP * IG_HW);
#define TC_OUT_ROW(m) ((m) * IG_HW)
#define TC_OUT_COL(n) ((int)((unsigned)(n) / IG_HW) * IG_CHW + (int)((unsigned)(n) % IG_HW))
#else
  GLOBAL TC_OUT_T* out = w + g * (K_PER_GROUP * IG_GN);
#define TC_OUT_ROW(m) ((m) * IG_GN)
#define TC_OUT_COL(n) (n)
#endif
#if SPLIT_K > 1
  out += slice * IG_OUT_ELEMENTS;  // the workspace: slice `slice` holds a whole partial output
#endif
  int col_off[TC_NI][2];
  TC_UNROLL
  for (int j = 0; j < TC_NI; ++j)
    TC_UNROLL
    for (int c2 = 0; c2 < 2; ++c2) col_off[j][c2] = TC_OUT_COL(n0 + TC_ACC_COL(j, c2));
  TC_UNROLL
  for (int i = 0; i < TC_MI; ++i)
    TC_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int m = m0 + TC_ACC_ROW(i, r);
      if (m < IG_GM) {
#if TC_EPILOGUE_BIAS
        const float bias_m = bias[g * K_PER_GROUP + m];
#endif
        TC_UNROLL
        for (int j = 0; j < TC_NI; ++j) {
          const int n = n0 + TC_ACC_COL(j, r);
          if (n < IG_GN) {
            float value = acc[i][j][r];
#if TC_EPILOGUE_BIAS
            value += bias_m;
#endif
#if TC_EPILOGUE_RELU
            value = value > 0.0f ? value : 0.0f;
#endif
#if SPLIT_K > 1
            out[TC_OUT_ROW(m) + col_off[j][r & 1]] = value;
#else
            out[TC_OUT_ROW(m) + col_off[j][r & 1]] = tc16_from_float(value);
#endif
          }
        }
      }
    }
}

#if SPLIT_K > 1
// The slices' FP32 partials summed in order (deterministic), forward's bias and ReLU applied, rounded once.
KERNEL void tc_splitk_reduce(const GLOBAL float* RESTRICT partial, GLOBAL tc_h16* RESTRICT out
#if HAS_BIAS
                             , const GLOBAL float* RESTRICT bias
#endif
) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)IG_OUT_ELEMENTS) return;
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(long)s * IG_OUT_ELEMENTS + i];
#if HAS_BIAS
  sum += bias[((unsigned)i / IG_PQ) % K];
#endif
#if HAS_RELU
  sum = sum > 0.0f ? sum : 0.0f;
#endif
  out[i] = tc16_from_float(sum);
}
#endif
