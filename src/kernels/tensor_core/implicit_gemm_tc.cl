// The implicit_gemm_tc family: convolutions in all three directions as implicit GEMMs on TF32 tensor cores
// (tc_common.h, tc_mainloop.h). Per group, C[M][N] = sum_k A[M][k] * B[k][N] with the mapping of
// implicit_gemm/implicit_gemm.cl (forward: A = w, B = x gathered; backward-data: A = w, B = dy gathered on the
// strided grid; backward-filter: A = dy, B = x), whose gathers (implicit_gemm/gather.h) this kernel shares. Each
// B element is copied global -> shared memory by its own 4-byte cp.async, zero-filled where the gather says the
// element is zero (padding, off the strided grid, past the edges); forward's A rows by 16-byte copies where aligned. A is K-contiguous in shared memory (its rows run
// along the reduction in every direction); B is K-contiguous for backward-filter (x rows run along its reduction)
// and N-contiguous otherwise (neighbouring output pixels read neighbouring input pixels). SPLIT_K > 1 writes
// partial outputs to the workspace, summed by tc_splitk_reduce, which also applies the forward epilogue.
// Grid: axis 0 N-tiles, axis 1 M-tiles, axis 2 groups x split-K slices. Every shape and parameter is a define
// from the family (the file does not compile alone).
#define TC_A_KCONTIG 1
#define TC_B_KCONTIG (DIRECTION == 2)
#include "tensor_core/tc_common.h"

// ---- the GEMM each direction is, in implicit_gemm.cl's names (the gathers read them) ----
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

// A is copied TC_A_VEC floats per cp.async: 4 (16 bytes) in the forward direction when the family found the
// filter rows (C/groups*R*S floats) a multiple of 4 long (A_VECTOR=4) and the tile holds 4 floats per thread, else 1.
// Backward-data's and backward-filter's A rows are contiguous only over R*S or P*Q elements.
#if defined(A_VECTOR) && A_VECTOR == 4 && DIRECTION == 0 && (TILE_M * TILE_K) % (4 * TC_THREADS) == 0
#define TC_A_VEC 4
#else
#define TC_A_VEC 1
#endif
// Copies of the A and B tiles each thread makes (the family's constraints make them whole).
#define TC_LOADS_A (TILE_M * TILE_K / (TC_A_VEC * TC_THREADS))
#define TC_LOADS_B (TILE_N * TILE_K / TC_THREADS)
// N-contiguous B: a thread's elements of one tile lie in TC_B_COLUMNS columns (TILE_N and the thread count are
// powers of two), so the columns' gather state is computed once per block.
#define TC_B_COLUMNS (TILE_N > TC_THREADS ? TILE_N / TC_THREADS : 1)

#if DIRECTION == 0
#define TC_KERNEL_NAME implicit_gemm_tc_fwd
#define TC_X_QUAL const
#define TC_W_QUAL const
#define TC_Y_QUAL
#elif DIRECTION == 1
#define TC_KERNEL_NAME implicit_gemm_tc_bwd_data
#define TC_X_QUAL
#define TC_W_QUAL const
#define TC_Y_QUAL const
#else
#define TC_KERNEL_NAME implicit_gemm_tc_bwd_filter
#define TC_X_QUAL const
#define TC_W_QUAL
#define TC_Y_QUAL const
#endif
#define TC_EPILOGUE_BIAS (HAS_BIAS && SPLIT_K == 1)
#define TC_EPILOGUE_RELU (HAS_RELU && SPLIT_K == 1)

// The fixed parts of B column n's gather (base offset, u, v), as implicit_gemm.cl computes them.
#if DIRECTION == 0
#define TC_B_COLUMN(n, base, u, v)                                  \
  {                                                                 \
    const int img_ = (unsigned)(n) / IG_PQ, pq_ = (unsigned)(n) % IG_PQ; \
    base = img_ * IG_CHW;                                           \
    u = (int)((unsigned)pq_ / Q) * STRIDE_H - PAD_H;                \
    v = (int)((unsigned)pq_ % Q) * STRIDE_W - PAD_W;                \
  }
#elif DIRECTION == 1
#define TC_B_COLUMN(n, base, u, v)                                  \
  {                                                                 \
    const int img_ = (unsigned)(n) / IG_HW, hw_ = (unsigned)(n) % IG_HW; \
    base = img_ * IG_KPQ;                                           \
    u = (int)((unsigned)hw_ / W) + PAD_H;                           \
    v = (int)((unsigned)hw_ % W) + PAD_W;                           \
  }
#else
#define TC_B_COLUMN(n, base, u, v)                                  \
  {                                                                 \
    const int c_ = (unsigned)(n) / IG_RS, rs_ = (unsigned)(n) % IG_RS; \
    base = c_ * IG_HW;                                              \
    u = (int)((unsigned)rs_ / S) * DILATION_H - PAD_H;              \
    v = (int)((unsigned)rs_ % S) * DILATION_W - PAD_W;              \
  }
#endif

KERNEL TC_ATTRIBUTES void TC_KERNEL_NAME(TC_X_QUAL GLOBAL float* RESTRICT x, TC_W_QUAL GLOBAL float* RESTRICT w,
                                         TC_Y_QUAL GLOBAL float* RESTRICT y
#if TC_EPILOGUE_BIAS
                                         , const GLOBAL float* RESTRICT bias
#endif
) {
  const int tid = LOCAL_ID(0);
  const int n0 = (int)GROUP_ID(0) * TILE_N;
  const int m0 = (int)GROUP_ID(1) * TILE_M;
  const int z = (int)GROUP_ID(2);
  const int g = z % GROUPS;
  // The reduction range of this block (tile_begin, ntiles, k_begin; slice with split-K) and group g's operands
  // (a_src, b_src), as implicit_gemm.cl has them.
#include "implicit_gemm/group_range.h"

  // A copies: reduction columns a_kl .. a_kl + TC_A_VEC - 1 of rows a_ml0 + e * (threads * TC_A_VEC / TILE_K).
  const int a_kl = tid % (TILE_K / TC_A_VEC) * TC_A_VEC, a_ml0 = tid / (TILE_K / TC_A_VEC);
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
    if (n >= IG_GN) n = IG_GN - 1;  // any column inside: its copies are zero-filled
    TC_B_COLUMN(n, b_base[cl], b_u[cl], b_v[cl]);
  }
#endif

#define TC_LOAD_STAGE(as, bs, tile)                                                                   \
  {                                                                                                   \
    const int kt_ = k_begin + (tile) * TILE_K;                                                        \
    const int ka_ = kt_ + a_kl;                                                                       \
    const bool a_in_ = IG_IN_REDUCTION(ka_);                                                          \
    const int a_red_ = IG_A_RED(ka_);                                                                 \
    TC_UNROLL for (int e = 0; e < TC_LOADS_A; ++e) {                                              \
      const int ml_ = a_ml0 + e * (TC_THREADS * TC_A_VEC / TILE_K);                                   \
      const bool ok_ = a_in_ && m0 + ml_ < IG_GM;                                                     \
      LOCAL float* ad_ = (as) + ml_ * TC_A_PITCH + a_kl;                                              \
      const GLOBAL float* as_ = a_src + (ok_ ? IG_A_ROW(m0 + ml_) + a_red_ : 0);                      \
      if (TC_A_VEC == 4) tc_copy16(ad_, as_, ok_);                                                    \
      else tc_copy4(ad_, as_, ok_);                                                                   \
    }                                                                                                 \
    TC_LOAD_B(bs, kt_);                                                                               \
  }
#if DIRECTION == 2
#define TC_LOAD_B(bs, kt)                                                                  \
  {                                                                                        \
    const int kb_ = (kt) + b_kl;                                                           \
    TC_UNROLL for (int e = 0; e < TC_LOADS_B; ++e) {                                   \
      const int nl_ = b_nl0 + e * (TC_THREADS / TILE_K);                                   \
      int n_ = n0 + nl_, base_, u_, v_, off_;                                              \
      bool ok_;                                                                            \
      const bool inside_ = n_ < IG_GN;                                                     \
      if (!inside_) n_ = IG_GN - 1;                                                        \
      TC_B_COLUMN(n_, base_, u_, v_);                                                      \
      IG_GATHER(kb_, base_, u_, v_, off_, ok_);                                            \
      ok_ = ok_ && inside_;                                                                \
      tc_copy4((bs) + nl_ * TC_B_PITCH + b_kl, b_src + (ok_ ? off_ : 0), ok_);             \
    }                                                                                      \
  }
#else
#define TC_LOAD_B(bs, kt)                                                                  \
  {                                                                                        \
    TC_UNROLL for (int e = 0; e < TC_LOADS_B; ++e) {                                   \
      const int idx_ = tid + e * TC_THREADS;                                               \
      const int cl_ = e % TC_B_COLUMNS, kl_ = idx_ / TILE_N, nl_ = idx_ % TILE_N;          \
      int off_;                                                                            \
      bool ok_;                                                                            \
      IG_GATHER((kt) + kl_, b_base[cl_], b_u[cl_], b_v[cl_], off_, ok_);                   \
      ok_ = ok_ && b_inside[cl_];                                                          \
      tc_copy4((bs) + kl_ * TC_B_PITCH + nl_, b_src + (ok_ ? off_ : 0), ok_);              \
    }                                                                                      \
  }
#endif

#include "tensor_core/tc_mainloop.h"

  // ---- store: output element (m, n) of group g at out + row part of m + column part of n ----
#if DIRECTION == 0
  GLOBAL float* out = y + g * (K_PER_GROUP * IG_PQ);
#define TC_OUT_ROW(m) ((m) * IG_PQ)
#define TC_OUT_COL(n) ((int)((unsigned)(n) / IG_PQ) * IG_KPQ + (int)((unsigned)(n) % IG_PQ))
#elif DIRECTION == 1
  GLOBAL float* out = x + g * (C_PER_GROUP * IG_HW);
#define TC_OUT_ROW(m) ((m) * IG_HW)
#define TC_OUT_COL(n) ((int)((unsigned)(n) / IG_HW) * IG_CHW + (int)((unsigned)(n) % IG_HW))
#else
  GLOBAL float* out = w + g * (K_PER_GROUP * IG_GN);
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
            out[TC_OUT_ROW(m) + col_off[j][r & 1]] = value;
          }
        }
      }
    }
}

#define TC_REDUCE_ELEMENTS IG_OUT_ELEMENTS
#if HAS_BIAS
#define TC_REDUCE_ARGS GLOBAL float* RESTRICT out, const GLOBAL float* RESTRICT bias
#define TC_REDUCE_BIAS(i, v) v += bias[((unsigned)(i) / IG_PQ) % K]
#else
#define TC_REDUCE_ARGS GLOBAL float* RESTRICT out
#define TC_REDUCE_BIAS(i, v)
#endif
#if HAS_RELU
#define TC_REDUCE_RELU(v) v = v > 0.0f ? v : 0.0f
#else
#define TC_REDUCE_RELU(v)
#endif
#define TC_REDUCE_STORE(i, sum) \
  {                             \
    float v_ = (sum);           \
    TC_REDUCE_BIAS(i, v_);      \
    TC_REDUCE_RELU(v_);         \
    out[i] = v_;                \
  }
#include "tensor_core/tc_splitk_reduce.h"
