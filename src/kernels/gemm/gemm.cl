// convtune's tiled GEMM: C (M x N) = op(A) (M x K) * op(B) (K x N), or C += that (ACCUMULATE), with
// local-memory tiles, a per-thread register tile and vector global loads. One source serves every
// transposition: A_TRANS and B_TRANS say how A and B are stored; each operand's layout comes in as macros.
//
// Operand layout. Each stored matrix X in {A, B, C} is addressed as
//   X_BASE + row * X_LD + (col / X_SEG) * X_SEG_STRIDE + col % X_SEG      (X_SEG == 0: no segments)
// where "row"/"col" are of the matrix as stored: A is M x K (A_TRANS 0) or K x M (A_TRANS 1), B is K x N
// (B_TRANS 0) or N x K (B_TRANS 1), C is M x N. Segments let the columns of one logical matrix span several
// images of a batch (n*PQ + pq lives at n*K*PQ + pq). The macros may use the kernel's `group` (work-group
// axis 2), `image0` and `chunk_images`.
// X_VECTOR (A and B) is the width of that operand's loads: it must divide X_LD, X_SEG, X_SEG_STRIDE, X_BASE
// and the stored column count, so every vector is aligned and lies wholly inside or wholly outside the matrix.
#include "common/compat.h"

#ifndef TILE_M
#define TILE_M 64  // rows of C per work-group
#endif
#ifndef TILE_N
#define TILE_N 64  // columns of C per work-group
#endif
#ifndef TILE_K
#define TILE_K 16  // reduction depth of one pair of local tiles
#endif
#ifndef THREADS_M
#define THREADS_M 16  // work-group rows; each thread owns TILE_M / THREADS_M rows of C
#endif
#ifndef THREADS_N
#define THREADS_N 16  // work-group columns; each thread owns TILE_N / THREADS_N columns of C
#endif
#ifndef LOCAL_PADDING
#define LOCAL_PADDING 1  // extra floats per local tile row, against bank conflicts of the transposing stores
#endif
#ifndef VECTOR_WIDTH
#define VECTOR_WIDTH 4  // floats per global load (1, 2 or 4) where an operand's layout keeps them aligned
#endif
#ifndef REGISTER_VECTOR
#define REGISTER_VECTOR 1  // a thread's register tile rows (and columns) come in runs of this many adjacent ones, read
                           // from local memory as one vector (1, 2 or 4): fewer local loads per FMA
#endif
#ifndef PREFETCH
#define PREFETCH 0  // 1: the next local tiles' global loads are issued before the current tiles are used, into
                    // registers, so their latency hides behind the FMAs
#endif
#ifndef ACCUMULATE
#define ACCUMULATE 0  // 1: C += A*B (C must hold numbers); 0: C = A*B, C is never read (it may hold NaN)
#endif
#ifndef A_TRANS
#define A_TRANS 0
#endif
#ifndef B_TRANS
#define B_TRANS 0
#endif
#ifndef GEMM_M
#define GEMM_M 256
#endif
#ifndef GEMM_N
#define GEMM_N 256
#endif
#ifndef GEMM_K
#define GEMM_K 256
#endif
#ifndef A_LD  // a plain row-major matrix when nothing else is said
#define A_LD (A_TRANS ? GEMM_M : GEMM_K)
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE 0
#endif
#ifndef A_VECTOR
#define A_VECTOR ((A_LD) % VECTOR_WIDTH == 0 && (A_TRANS ? GEMM_M : GEMM_K) % VECTOR_WIDTH == 0 ? VECTOR_WIDTH : 1)
#endif
#ifndef B_LD
#define B_LD (B_TRANS ? GEMM_K : GEMM_N)
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE 0
#endif
#ifndef B_VECTOR
#define B_VECTOR ((B_LD) % VECTOR_WIDTH == 0 && (B_TRANS ? GEMM_K : GEMM_N) % VECTOR_WIDTH == 0 ? VECTOR_WIDTH : 1)
#endif
#ifndef C_LD
#define C_LD GEMM_N
#define C_SEG 0
#define C_SEG_STRIDE 0
#define C_BASE 0
#endif

#define GEMM_THREADS (THREADS_M * THREADS_N)
#define ROWS_PER_THREAD (TILE_M / THREADS_M)
#define COLS_PER_THREAD (TILE_N / THREADS_N)
#define A_TILE_LD (TILE_M + LOCAL_PADDING)
#define B_TILE_LD (TILE_N + LOCAL_PADDING)

// Each operand's tile as stored: its rows and columns, the stored matrix's extent and where tile k0 starts.
#if A_TRANS  // A stored K x M
#define A_ROWS gemm_k
#define A_COLS gemm_m
#define A_ROW0(k0) (k0)
#define A_COL0(k0) m0
#define A_TILE_ROWS TILE_K
#define A_TILE_COLS TILE_M
#else  // A stored M x K: the local tile is its transpose, [k][m]
#define A_ROWS gemm_m
#define A_COLS gemm_k
#define A_ROW0(k0) m0
#define A_COL0(k0) (k0)
#define A_TILE_ROWS TILE_M
#define A_TILE_COLS TILE_K
#endif
#if B_TRANS  // B stored N x K: the local tile is its transpose, [k][n]
#define B_ROWS gemm_n
#define B_COLS gemm_k
#define B_ROW0(k0) n0
#define B_COL0(k0) (k0)
#define B_TILE_ROWS TILE_N
#define B_TILE_COLS TILE_K
#else  // B stored K x N
#define B_ROWS gemm_k
#define B_COLS gemm_n
#define B_ROW0(k0) (k0)
#define B_COL0(k0) n0
#define B_TILE_ROWS TILE_K
#define B_TILE_COLS TILE_N
#endif
// Vectors of each operand's tile per thread.
#define A_FETCH ((TILE_M * TILE_K / A_VECTOR + GEMM_THREADS - 1) / GEMM_THREADS)
#define B_FETCH ((TILE_N * TILE_K / B_VECTOR + GEMM_THREADS - 1) / GEMM_THREADS)

#ifdef __OPENCL_VERSION__
#define GEMM_GROUP_SHAPE __attribute__((reqd_work_group_size(THREADS_N, THREADS_M, 1)))
#else
#define GEMM_GROUP_SHAPE __launch_bounds__(THREADS_N * THREADS_M)
#endif

DEVICE_FN int matrix_offset(const int row, const int col, const int ld, const int seg, const int seg_stride) {
  return seg == 0 ? row * ld + col : row * ld + (col / seg) * seg_stride + col % seg;
}

// Loads this thread's share of the tile_rows x tile_cols block at stored (row0, col0) into `regs`, zero beyond
// rows x cols: vector v of the tile is thread + v * GEMM_THREADS, `count` vectors of vw floats per thread.
// Branch-free: a vector outside the matrix loads the matrix's first vector (always valid) and becomes zeros.
DEVICE_FN void fetch_tile(GLOBAL const float* RESTRICT src, const int ld, const int seg, const int seg_stride,
                          const int rows, const int cols, const int row0, const int col0, const int tile_rows,
                          const int tile_cols, const int vw, const int thread, const int count, float* regs) {
  const int vectors_per_row = tile_cols / vw;
#pragma unroll
  for (int v = 0; v < count; ++v) {
    const int i = thread + v * GEMM_THREADS;
    const int r = i / vectors_per_row;
    const int c = (i % vectors_per_row) * vw;
    const bool inside = i < tile_rows * vectors_per_row && row0 + r < rows && col0 + c < cols;
    const int offset = inside ? matrix_offset(row0 + r, col0 + c, ld, seg, seg_stride) : 0;
    float t[4];
    if (vw == 4) {
      const float4 x = *((GLOBAL const float4*)(src + offset));
      t[0] = x.x; t[1] = x.y; t[2] = x.z; t[3] = x.w;
    } else if (vw == 2) {
      const float2 x = *((GLOBAL const float2*)(src + offset));
      t[0] = x.x; t[1] = x.y;
    } else {
      t[0] = src[offset];
    }
#pragma unroll
    for (int e = 0; e < vw; ++e) regs[v * vw + e] = inside ? t[e] : 0.0f;
  }
}

// Stores what fetch_tile loaded into the local tile: transposed ([col][row]) or not ([row][col]), local rows
// local_ld floats apart.
DEVICE_FN void store_tile(const float* regs, const int tile_rows, const int tile_cols, const int vw,
                          const int transpose, LOCAL float* tile, const int local_ld, const int thread,
                          const int count) {
  const int vectors_per_row = tile_cols / vw;
#pragma unroll
  for (int v = 0; v < count; ++v) {
    const int i = thread + v * GEMM_THREADS;
    if (i >= tile_rows * vectors_per_row) break;
    const int r = i / vectors_per_row;
    const int c = (i % vectors_per_row) * vw;
#pragma unroll
    for (int e = 0; e < vw; ++e) {
      if (transpose) tile[(c + e) * local_ld + r] = regs[v * vw + e];
      else tile[r * local_ld + c + e] = regs[v * vw + e];
    }
  }
}

// Reads `count` floats of a local tile row from `base` into `regs`, REGISTER_VECTOR at a time: run q of the thread's
// registers starts run_stride floats after run q - 1.
DEVICE_FN void read_fragment(LOCAL const float* tile, const int base, const int run_stride, const int count,
                             float* regs) {
#pragma unroll
  for (int q = 0; q < count / REGISTER_VECTOR; ++q) {
    const int at = base + q * run_stride;
#if REGISTER_VECTOR == 4
    const float4 x = VLOAD4(tile, at);
    regs[q * 4] = x.x; regs[q * 4 + 1] = x.y; regs[q * 4 + 2] = x.z; regs[q * 4 + 3] = x.w;
#elif REGISTER_VECTOR == 2
    const float2 x = VLOAD2(tile, at);
    regs[q * 2] = x.x; regs[q * 2 + 1] = x.y;
#else
    regs[q] = tile[at];
#endif
  }
}

// Work-group (THREADS_N, THREADS_M, 1) computes a TILE_M x TILE_N block of C; axis 2 is the group of a grouped
// convolution. With REGISTER_VECTOR (RV) 1, thread (tn, tm) owns rows tm + i*THREADS_M and columns tn + j*THREADS_N:
// neighbouring threads read neighbouring local floats and store neighbouring columns of C. With RV > 1 it owns runs
// of RV adjacent rows (columns): row (i / RV) * THREADS_M * RV + tm * RV + i % RV.
KERNEL void GEMM_GROUP_SHAPE gemm(GLOBAL const float* RESTRICT a, GLOBAL const float* RESTRICT b,
                                  GLOBAL float* RESTRICT c, const int image0, const int chunk_images) {
  // Aligned for REGISTER_VECTOR's vector reads (CUDA's need 16-byte alignment).
  LOCAL_ARRAY float a_tile[TILE_K * A_TILE_LD] __attribute__((aligned(16)));  // [k][m]
  LOCAL_ARRAY float b_tile[TILE_K * B_TILE_LD] __attribute__((aligned(16)));  // [k][n]
  const int group = (int)GROUP_ID(2);
  const int tn = LOCAL_ID(0), tm = LOCAL_ID(1);
  const int thread = tm * THREADS_N + tn;
  const int m0 = (int)GROUP_ID(1) * TILE_M, n0 = (int)GROUP_ID(0) * TILE_N;
  const int gemm_m = GEMM_M, gemm_n = GEMM_N, gemm_k = GEMM_K;
  GLOBAL const float* a_base = a + (A_BASE);
  GLOBAL const float* b_base = b + (B_BASE);
  (void)group;  // the layout macros may ignore any of these three
  (void)image0;
  (void)chunk_images;

  float acc[ROWS_PER_THREAD][COLS_PER_THREAD];
#pragma unroll
  for (int i = 0; i < ROWS_PER_THREAD; ++i)
#pragma unroll
    for (int j = 0; j < COLS_PER_THREAD; ++j) acc[i][j] = 0.0f;

  // This thread's share of each operand's tile, in registers between the global load and the local store.
  float a_regs[A_FETCH * A_VECTOR], b_regs[B_FETCH * B_VECTOR];
#define FETCH_A(k0) fetch_tile(a_base, A_LD, A_SEG, A_SEG_STRIDE, A_ROWS, A_COLS, A_ROW0(k0), A_COL0(k0), \
                               A_TILE_ROWS, A_TILE_COLS, A_VECTOR, thread, A_FETCH, a_regs)
#define FETCH_B(k0) fetch_tile(b_base, B_LD, B_SEG, B_SEG_STRIDE, B_ROWS, B_COLS, B_ROW0(k0), B_COL0(k0), \
                               B_TILE_ROWS, B_TILE_COLS, B_VECTOR, thread, B_FETCH, b_regs)
#if PREFETCH
  FETCH_A(0);
  FETCH_B(0);
#endif
  for (int k0 = 0; k0 < gemm_k; k0 += TILE_K) {
#if !PREFETCH
    FETCH_A(k0);
    FETCH_B(k0);
#endif
    store_tile(a_regs, A_TILE_ROWS, A_TILE_COLS, A_VECTOR, !A_TRANS, a_tile, A_TILE_LD, thread, A_FETCH);
    store_tile(b_regs, B_TILE_ROWS, B_TILE_COLS, B_VECTOR, B_TRANS, b_tile, B_TILE_LD, thread, B_FETCH);
    BARRIER();
#if PREFETCH
    if (k0 + TILE_K < gemm_k) {  // in flight while the FMAs below run
      FETCH_A(k0 + TILE_K);
      FETCH_B(k0 + TILE_K);
    }
#endif
    // Unrolled by 2 only: the register tile already gives each step enough independent FMAs, and full
    // unrolling multiplies the code by TILE_K (CPU OpenCL compilers then take seconds per program).
#pragma unroll 2
    for (int kk = 0; kk < TILE_K; ++kk) {
      float a_reg[ROWS_PER_THREAD], b_reg[COLS_PER_THREAD];
      read_fragment(a_tile, kk * A_TILE_LD + tm * REGISTER_VECTOR, THREADS_M * REGISTER_VECTOR, ROWS_PER_THREAD, a_reg);
      read_fragment(b_tile, kk * B_TILE_LD + tn * REGISTER_VECTOR, THREADS_N * REGISTER_VECTOR, COLS_PER_THREAD, b_reg);
#pragma unroll
      for (int i = 0; i < ROWS_PER_THREAD; ++i)
#pragma unroll
        for (int j = 0; j < COLS_PER_THREAD; ++j) acc[i][j] = FMA(a_reg[i], b_reg[j], acc[i][j]);
    }
    BARRIER();
  }
#undef FETCH_A
#undef FETCH_B

  GLOBAL float* c_base = c + (C_BASE);
#pragma unroll
  for (int i = 0; i < ROWS_PER_THREAD; ++i) {
    const int m = m0 + (i / REGISTER_VECTOR) * THREADS_M * REGISTER_VECTOR + tm * REGISTER_VECTOR + i % REGISTER_VECTOR;
    if (m >= gemm_m) continue;
#pragma unroll
    for (int j = 0; j < COLS_PER_THREAD; ++j) {
      const int n = n0 + (j / REGISTER_VECTOR) * THREADS_N * REGISTER_VECTOR + tn * REGISTER_VECTOR + j % REGISTER_VECTOR;
      if (n >= gemm_n) continue;
      const int offset = matrix_offset(m, n, C_LD, C_SEG, C_SEG_STRIDE);
#if ACCUMULATE
      c_base[offset] += acc[i][j];
#else
      c_base[offset] = acc[i][j];
#endif
    }
  }
}
