// Implicit GEMM convolution, seed 004's "local memory" kernel: the im2col matrix is never written to device
// memory; each work-group gathers its TILE_K x TILE_N slice of it straight from the tensor into local memory,
// padding, stride and dilation resolved inside the gather (out of range -> 0). One source for OpenCL C and CUDA.
//
// Per group g, every direction is C[M][N] = sum_k A[M][k] * B[k][N] (DIRECTION picks the mapping):
//   0 forward:         M = K/groups (output channels), N = N*P*Q,         k = (C/groups)*R*S    A = w,  B = x
//   1 backward-data:   M = C/groups,                    N = N*H*W,         k = (K/groups)*R*S    A = w,  B = dy
//   2 backward-filter: M = K/groups,                    N = (C/groups)*R*S, k = N*P*Q            A = dy, B = x
// Backward-data gathers dy at p = (h + pad - r*dil) / stride only where that divides and lies in [0, P), so
// stride > 1 needs no zero-inserted copy of the gradient. SPLIT_K > 1 splits the reduction into slices (grid
// axis 2) that write partial outputs to a workspace; implicit_gemm_splitk_reduce adds them (and applies the
// forward epilogue). Backward-filter needs it most: its GEMM is small and its reduction (N*P*Q) long.
//
// Work-group: THREADS_M x THREADS_N work-items (1-D, THREADS_N fastest), block tile TILE_M x TILE_N, each
// work-item an (TILE_M/THREADS_M) x (TILE_N/THREADS_N) register tile made of VECTOR_WIDTH-wide pieces strided
// THREADS_x*VECTOR_WIDTH apart, so a warp's local-memory reads are consecutive vectors. A is stored transposed
// (As[k][m]) so both operands are read as vectors along M and N. Two local buffers, one barrier per tile: the
// global loads of tile t+1 go out before the FMAs of tile t, either into registers that are stored to the other
// buffer after the FMAs (ASYNC_COPY=0, any OpenCL device) or straight into the other buffer by PTX cp.async
// (ASYNC_COPY=1, NVIDIA sm_80+, through NVRTC and NVIDIA's OpenCL alike), which needs no staging registers.
// MAX_REGISTERS caps registers on NVIDIA (CUDA: __launch_bounds__ minimum blocks; OpenCL: -cl-nv-maxrregcount).
// The main loop reads only local memory and does FMAs; the tile loads' index arithmetic uses compile-time
// shapes (divisions by constants), with each element's column part precomputed once per work-group.
// Grid: axis 0 N-tiles, axis 1 M-tiles, axis 2 groups x split-K slices.
#include "common/compat.h"

// ---- defaults so the file compiles on its own (the family passes every one of these) ----
#ifndef DIRECTION
#define DIRECTION 0
#endif
#ifndef N
#define N 2
#define C 4
#define H 9
#define W 9
#define K 8
#define R 3
#define S 3
#define P 9
#define Q 9
#define STRIDE_H 1
#define STRIDE_W 1
#define PAD_H 1
#define PAD_W 1
#define DILATION_H 1
#define DILATION_W 1
#define GROUPS 1
#define C_PER_GROUP 4
#define K_PER_GROUP 8
#endif
#ifndef TILE_M
#define TILE_M 32
#endif
#ifndef TILE_N
#define TILE_N 32
#endif
#ifndef TILE_K
#define TILE_K 8
#endif
#ifndef THREADS_M
#define THREADS_M 8
#endif
#ifndef THREADS_N
#define THREADS_N 8
#endif
#ifndef LOCAL_PADDING
#define LOCAL_PADDING 0
#endif
#ifndef VECTOR_WIDTH
#define VECTOR_WIDTH 4
#endif
#ifndef UNROLL_K
#define UNROLL_K TILE_K
#endif
#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef ASYNC_COPY
#define ASYNC_COPY 0
#endif
#ifndef MAX_REGISTERS
#define MAX_REGISTERS 0
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef HAS_RELU
#define HAS_RELU 0
#endif

// ---- derived sizes ----
#define IG_THREADS (THREADS_M * THREADS_N)
#define IG_M_THR (TILE_M / THREADS_M)
#define IG_N_THR (TILE_N / THREADS_N)
#define IG_LDA (TILE_M + LOCAL_PADDING)
#define IG_LDB (TILE_N + LOCAL_PADDING)
#define IG_LOADS_A (TILE_M * TILE_K / IG_THREADS)
#define IG_LOADS_B (TILE_K * TILE_N / IG_THREADS)
#define IG_RS (R * S)
#define IG_HW (H * W)
#define IG_PQ (P * Q)
#define IG_CHW (C * IG_HW)
#define IG_KPQ (K * IG_PQ)

#if DIRECTION == 0
#define IG_GM K_PER_GROUP
#define IG_GN (N * IG_PQ)
#define IG_GR (C_PER_GROUP * IG_RS)
#elif DIRECTION == 1
#define IG_GM C_PER_GROUP
#define IG_GN (N * IG_HW)
#define IG_GR (K_PER_GROUP * IG_RS)
#else
#define IG_GM K_PER_GROUP
#define IG_GN (C_PER_GROUP * IG_RS)
#define IG_GR (N * IG_PQ)
#endif

// Elements of the written operand (y, x or w); with SPLIT_K > 1 the workspace holds SPLIT_K of them.
#if DIRECTION == 0
#define IG_OUT_ELEMENTS (N * IG_KPQ)
#elif DIRECTION == 1
#define IG_OUT_ELEMENTS (N * IG_CHW)
#else
#define IG_OUT_ELEMENTS (K * C_PER_GROUP * IG_RS)
#endif
// The forward epilogue runs in the main kernel, or in the split-K reduction when there is one.
#define IG_EPILOGUE_BIAS (HAS_BIAS && SPLIT_K == 1)
#define IG_EPILOGUE_RELU (HAS_RELU && SPLIT_K == 1)

// Edges known at compile time: whole tiles need no clamping or reduction check.
#define IG_M_EVEN ((IG_GM % TILE_M) == 0)
#define IG_N_EVEN ((IG_GN % TILE_N) == 0)
#define IG_R_EVEN ((IG_GR % TILE_K) == 0)
#define IG_TILES_R ((IG_GR + TILE_K - 1) / TILE_K)

// The forward and backward-filter gathers read x at h = p*stride - pad + r*dil, always inside [0, H) when there
// is no padding; backward-data always checks (the divisibility test is part of its gather).
#define IG_CHECK_H (PAD_H > 0)
#define IG_CHECK_W (PAD_W > 0)

#ifdef __OPENCL_VERSION__
// MAX_REGISTERS reaches NVIDIA's OpenCL compiler as -cl-nv-maxrregcount (the family adds it).
#define IG_ATTRIBUTES __attribute__((reqd_work_group_size(IG_THREADS, 1, 1)))
#else
// MAX_REGISTERS caps the registers of a thread through the blocks that must fit on a multiprocessor at once; with
// that hint ptxas keeps the next tile's loads ahead of the FMAs instead of sinking them to save registers.
#if MAX_REGISTERS > 0
#define IG_MIN_BLOCKS ((65536 / (IG_THREADS * MAX_REGISTERS)) > 0 ? (65536 / (IG_THREADS * MAX_REGISTERS)) : 1)
#define IG_ATTRIBUTES __launch_bounds__(IG_THREADS, IG_MIN_BLOCKS)
#else
#define IG_ATTRIBUTES __launch_bounds__(IG_THREADS)
#endif
#endif

// VECTOR_WIDTH consecutive floats of local memory (16/8-byte aligned) into out[0..VECTOR_WIDTH).
#if VECTOR_WIDTH == 4
#define IG_READ_VEC(out, base, offset)                                   \
  {                                                                      \
    const vec4 v_ = *((LOCAL const vec4*)((base) + (offset)));           \
    (out)[0] = v_.x;                                                     \
    (out)[1] = v_.y;                                                     \
    (out)[2] = v_.z;                                                     \
    (out)[3] = v_.w;                                                     \
  }
#elif VECTOR_WIDTH == 2
#define IG_READ_VEC(out, base, offset)                                   \
  {                                                                      \
    const float2 v_ = *((LOCAL const float2*)((base) + (offset)));       \
    (out)[0] = v_.x;                                                     \
    (out)[1] = v_.y;                                                     \
  }
#else
#define IG_READ_VEC(out, base, offset) \
  { (out)[0] = (base)[(offset)]; }
#endif

// Row (column) within the block tile of register-tile row i (column j): VECTOR_WIDTH-wide pieces, piece v of
// work-item tm at v*THREADS_M*VECTOR_WIDTH + tm*VECTOR_WIDTH.
#define IG_ROW(i, tm) (((i) / VECTOR_WIDTH) * (THREADS_M * VECTOR_WIDTH) + (tm) * VECTOR_WIDTH + (i) % VECTOR_WIDTH)
#define IG_COL(j, tn) (((j) / VECTOR_WIDTH) * (THREADS_N * VECTOR_WIDTH) + (tn) * VECTOR_WIDTH + (j) % VECTOR_WIDTH)

#include "implicit_gemm/gather.h"

#if ASYNC_COPY
// One float global -> local memory without a register (PTX cp.async, NVIDIA sm_80+), zero-filled when !valid
// (source size 0). NVIDIA's OpenCL compiler takes the same inline PTX; there a __local pointer already holds a
// shared-memory address.
#ifdef __OPENCL_VERSION__
#define IG_ASM __asm__ __volatile__  // OpenCL C is C99: only the reserved spelling
#else
#define IG_ASM asm volatile  // NVRTC knows only this spelling
#endif
#ifdef __OPENCL_VERSION__
inline void ig_copy_async(__local float* dst, const __global float* src, bool valid) {
  IG_ASM("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint)(ulong)dst), "l"(src), "r"(valid ? 4 : 0)
         : "memory");
}
#else
__device__ inline void ig_copy_async(float* dst, const float* src, bool valid) {
  IG_ASM("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src),
         "r"(valid ? 4 : 0)
         : "memory");
}
#endif
#define IG_COPY_COMMIT() IG_ASM("cp.async.commit_group;" ::: "memory")
#define IG_COPY_WAIT() IG_ASM("cp.async.wait_group 0;" ::: "memory")
#endif

#if DIRECTION == 0
#define IG_KERNEL_NAME implicit_gemm_fwd
#elif DIRECTION == 1
#define IG_KERNEL_NAME implicit_gemm_bwd_data
#else
#define IG_KERNEL_NAME implicit_gemm_bwd_filter
#endif

// Arguments are named after the forward pass in every direction: x, w, y (plus bias); the direction writes one.
#if DIRECTION == 0
#define IG_X_QUAL const
#define IG_W_QUAL const
#define IG_Y_QUAL
#elif DIRECTION == 1
#define IG_X_QUAL
#define IG_W_QUAL const
#define IG_Y_QUAL const
#else
#define IG_X_QUAL const
#define IG_W_QUAL
#define IG_Y_QUAL const
#endif

KERNEL IG_ATTRIBUTES void IG_KERNEL_NAME(IG_X_QUAL GLOBAL float* RESTRICT x, IG_W_QUAL GLOBAL float* RESTRICT w,
                                         IG_Y_QUAL GLOBAL float* RESTRICT y
#if IG_EPILOGUE_BIAS
                                         , const GLOBAL float* RESTRICT bias
#endif
) {
  LOCAL_ARRAY float As[2 * TILE_K * IG_LDA] __attribute__((aligned(16)));
  LOCAL_ARRAY float Bs[2 * TILE_K * IG_LDB] __attribute__((aligned(16)));

  const int tid = LOCAL_ID(0);
  const int tn = tid % THREADS_N;
  const int tm = tid / THREADS_N;
  const int n0 = (int)GROUP_ID(0) * TILE_N;
  const int m0 = (int)GROUP_ID(1) * TILE_M;
  const int z = (int)GROUP_ID(2);
  const int g = z % GROUPS;

#include "implicit_gemm/group_range.h"

  // ---- per-element loader state, fixed for the whole reduction: the tile loads' only divisions are the
  // compile-time-constant ones that decompose the reduction index ----
  int a_row[IG_LOADS_A];
#pragma unroll
  for (int e = 0; e < IG_LOADS_A; ++e) {
    int m = m0 + IG_A_ML(tid + e * IG_THREADS);
    // Rows past the edge read row GM-1 instead: they feed only output rows that are never stored.
    if (!IG_M_EVEN && m >= IG_GM) m = IG_GM - 1;
    a_row[e] = IG_A_ROW(m);
  }
  int b_base[IG_LOADS_B], b_u[IG_LOADS_B], b_v[IG_LOADS_B];
#pragma unroll
  for (int e = 0; e < IG_LOADS_B; ++e) {
    int n = n0 + IG_B_NL(tid + e * IG_THREADS);
    if (!IG_N_EVEN && n >= IG_GN) n = IG_GN - 1;  // likewise for columns past the edge
#if DIRECTION == 0
    const int img = (unsigned)n / IG_PQ, pq = (unsigned)n % IG_PQ;
    const int p = (unsigned)pq / Q, q = (unsigned)pq % Q;
    b_base[e] = img * IG_CHW;
    b_u[e] = p * STRIDE_H - PAD_H;  // input row of r = 0
    b_v[e] = q * STRIDE_W - PAD_W;  // input column of s = 0
#elif DIRECTION == 1
    const int img = (unsigned)n / IG_HW, hw = (unsigned)n % IG_HW;
    const int h = (unsigned)hw / W, ww = (unsigned)hw % W;
    b_base[e] = img * IG_KPQ;
    b_u[e] = h + PAD_H;  // p*stride for r = 0
    b_v[e] = ww + PAD_W;
#else
    const int c = (unsigned)n / IG_RS, rs = (unsigned)n % IG_RS;
    const int r = (unsigned)rs / S, s = (unsigned)rs % S;
    b_base[e] = c * IG_HW;
    b_u[e] = r * DILATION_H - PAD_H;  // input row at p = 0
    b_v[e] = s * DILATION_W - PAD_W;
#endif
  }

// Offset and validity of element e of the A and B tiles at reduction offset k0.
#define IG_A_ELEMENT(e, k0, off, ok)                                         \
  {                                                                          \
    const int kr_ = (k0) + IG_A_KL(tid + (e) * IG_THREADS);                  \
    ok = IG_IN_REDUCTION(kr_);                                               \
    off = a_row[e] + IG_A_RED(kr_);                                          \
  }
#define IG_B_ELEMENT(e, k0, off, ok) \
  IG_GATHER((k0) + IG_B_KL(tid + (e) * IG_THREADS), b_base[e], b_u[e], b_v[e], off, ok)
#define IG_A_SLOT(buf, e) ((buf) * (TILE_K * IG_LDA) + IG_A_KL(tid + (e) * IG_THREADS) * IG_LDA + IG_A_ML(tid + (e) * IG_THREADS))
#define IG_B_SLOT(buf, e) ((buf) * (TILE_K * IG_LDB) + IG_B_KL(tid + (e) * IG_THREADS) * IG_LDB + IG_B_NL(tid + (e) * IG_THREADS))

#if ASYNC_COPY
  // Global -> local buffer `buf` directly (cp.async): no staging registers, zero-fill done by the copy.
#define IG_FETCH_TILE(k0, buf)                                                                        \
  {                                                                                                   \
    _Pragma("unroll") for (int e = 0; e < IG_LOADS_A; ++e) {                                          \
      int off;                                                                                        \
      bool ok;                                                                                        \
      IG_A_ELEMENT(e, k0, off, ok);                                                                   \
      ig_copy_async(As + IG_A_SLOT(buf, e), a_src + (ok ? off : 0), ok);                              \
    }                                                                                                 \
    _Pragma("unroll") for (int e = 0; e < IG_LOADS_B; ++e) {                                          \
      int off;                                                                                        \
      bool ok;                                                                                        \
      IG_B_ELEMENT(e, k0, off, ok);                                                                   \
      ig_copy_async(Bs + IG_B_SLOT(buf, e), b_src + (ok ? off : 0), ok);                              \
    }                                                                                                 \
    IG_COPY_COMMIT();                                                                                 \
  }
#else
  // Global -> registers for the reduction tile at k0, then registers -> local buffer `buf` (A transposed).
  float ra[IG_LOADS_A], rb[IG_LOADS_B];
#define IG_LOAD_TILE(k0)                                                                              \
  {                                                                                                   \
    _Pragma("unroll") for (int e = 0; e < IG_LOADS_A; ++e) {                                          \
      int off;                                                                                        \
      bool ok;                                                                                        \
      IG_A_ELEMENT(e, k0, off, ok);                                                                   \
      ra[e] = ok ? a_src[off] : 0.0f;                                                                 \
    }                                                                                                 \
    _Pragma("unroll") for (int e = 0; e < IG_LOADS_B; ++e) {                                          \
      int off;                                                                                        \
      bool ok;                                                                                        \
      IG_B_ELEMENT(e, k0, off, ok);                                                                   \
      rb[e] = ok ? b_src[off] : 0.0f;                                                                 \
    }                                                                                                 \
  }
#define IG_STORE_TILE(buf)                                                                            \
  {                                                                                                   \
    _Pragma("unroll") for (int e = 0; e < IG_LOADS_A; ++e) As[IG_A_SLOT(buf, e)] = ra[e];             \
    _Pragma("unroll") for (int e = 0; e < IG_LOADS_B; ++e) Bs[IG_B_SLOT(buf, e)] = rb[e];             \
  }
#endif

  float acc[IG_M_THR][IG_N_THR];
#pragma unroll
  for (int i = 0; i < IG_M_THR; ++i)
#pragma unroll
    for (int j = 0; j < IG_N_THR; ++j) acc[i][j] = 0.0f;

  if (ntiles > 0) {
#if ASYNC_COPY
    IG_FETCH_TILE(k_begin, 0);
    IG_COPY_WAIT();
#else
    IG_LOAD_TILE(k_begin);
    IG_STORE_TILE(0);
#endif
  }
  BARRIER();

  for (int t = 0; t < ntiles; ++t) {
    const int buf = t & 1;
    // The next tile's loads go out before this tile's FMAs. They are unconditional: with `if (t + 1 < ntiles)`
    // around both the loads and the stores the compiler merged the two and sank the loads below the FMAs.
    // The last iteration reloads its own tile into the buffer nobody reads any more.
    const int k_next = k_begin + (t + 1 < ntiles ? t + 1 : t) * TILE_K;
#if ASYNC_COPY
    IG_FETCH_TILE(k_next, buf ^ 1);
#else
    IG_LOAD_TILE(k_next);
#endif

    LOCAL const float* a_tile = As + buf * (TILE_K * IG_LDA) + tm * VECTOR_WIDTH;
    LOCAL const float* b_tile = Bs + buf * (TILE_K * IG_LDB) + tn * VECTOR_WIDTH;
    for (int k0 = 0; k0 < TILE_K; k0 += UNROLL_K) {
#pragma unroll
      for (int u = 0; u < UNROLL_K; ++u) {
        const int kk = k0 + u;
        float a[IG_M_THR], b[IG_N_THR];
#pragma unroll
        for (int v = 0; v < IG_M_THR / VECTOR_WIDTH; ++v)
          IG_READ_VEC(a + v * VECTOR_WIDTH, a_tile, kk * IG_LDA + v * (THREADS_M * VECTOR_WIDTH));
#pragma unroll
        for (int v = 0; v < IG_N_THR / VECTOR_WIDTH; ++v)
          IG_READ_VEC(b + v * VECTOR_WIDTH, b_tile, kk * IG_LDB + v * (THREADS_N * VECTOR_WIDTH));
#pragma unroll
        for (int i = 0; i < IG_M_THR; ++i)
#pragma unroll
          for (int j = 0; j < IG_N_THR; ++j) acc[i][j] = FMA(a[i], b[j], acc[i][j]);
      }
    }

#if ASYNC_COPY
    IG_COPY_WAIT();
#else
    IG_STORE_TILE(buf ^ 1);
#endif
    BARRIER();
  }

  // ---- store the register tile ----
  int col_off[IG_N_THR];
#pragma unroll
  for (int j = 0; j < IG_N_THR; ++j) {
    const int n = n0 + IG_COL(j, tn);
#if DIRECTION == 0
    col_off[j] = (int)((unsigned)n / IG_PQ) * IG_KPQ + (int)((unsigned)n % IG_PQ);
#elif DIRECTION == 1
    col_off[j] = (int)((unsigned)n / IG_HW) * IG_CHW + (int)((unsigned)n % IG_HW);
#else
    col_off[j] = n;
#endif
  }
#if DIRECTION == 0
  GLOBAL float* out = y + g * (K_PER_GROUP * IG_PQ);
#define IG_OUT_ROW(m) ((m) * IG_PQ)
#elif DIRECTION == 1
  GLOBAL float* out = x + g * (C_PER_GROUP * IG_HW);
#define IG_OUT_ROW(m) ((m) * IG_HW)
#else
  GLOBAL float* out = w + g * (K_PER_GROUP * IG_GN);
#define IG_OUT_ROW(m) ((m) * IG_GN)
#endif
#if SPLIT_K > 1
  // The output argument is workspace0 here: slice `slice` of it holds a whole partial output.
  out += slice * IG_OUT_ELEMENTS;
#endif
#pragma unroll
  for (int i = 0; i < IG_M_THR; ++i) {
    const int m = m0 + IG_ROW(i, tm);
    if (IG_M_EVEN || m < IG_GM) {
#if IG_EPILOGUE_BIAS
      const float bias_m = bias[g * K_PER_GROUP + m];
#endif
#pragma unroll
      for (int j = 0; j < IG_N_THR; ++j) {
        const int n = n0 + IG_COL(j, tn);
        if (IG_N_EVEN || n < IG_GN) {
          float value = acc[i][j];
#if IG_EPILOGUE_BIAS
          value += bias_m;
#endif
#if IG_EPILOGUE_RELU
          value = value > 0.0f ? value : 0.0f;
#endif
          out[IG_OUT_ROW(m) + col_off[j]] = value;
        }
      }
    }
  }
}

#if SPLIT_K > 1
// Sums the SPLIT_K partial outputs of the workspace into the output (x, w or y by direction), in slice order so
// the result is deterministic, then applies the forward epilogue.
KERNEL void implicit_gemm_splitk_reduce(const GLOBAL float* RESTRICT partial, GLOBAL float* RESTRICT out
#if HAS_BIAS
                                        , const GLOBAL float* RESTRICT bias
#endif
) {
  const int i = (int)GLOBAL_ID(0);
  if (i >= IG_OUT_ELEMENTS) return;
  float sum = 0.0f;
#pragma unroll
  for (int slice = 0; slice < SPLIT_K; ++slice) sum += partial[slice * IG_OUT_ELEMENTS + i];
#if HAS_BIAS
  sum += bias[((unsigned)i / IG_PQ) % K];
#endif
#if HAS_RELU
  sum = sum > 0.0f ? sum : 0.0f;
#endif
  out[i] = sum;
}
#endif
