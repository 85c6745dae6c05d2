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

#ifdef __OPENCL_VERSION__
#define GEMM_GROUP_SHAPE __attribute__((reqd_work_group_size(THREADS_N, THREADS_M, 1)))
#else
#define GEMM_GROUP_SHAPE __launch_bounds__(THREADS_N * THREADS_M)
#endif

DEVICE_FN int matrix_offset(const int row, const int col, const int ld, const int seg, const int seg_stride) {
  return seg == 0 ? row * ld + col : row * ld + (col / seg) * seg_stride + col % seg;
}

// Copies the tile_rows x tile_cols block at stored (row0, col0) into local memory, zero beyond rows x cols.
// transpose: the local tile is [col][row], else [row][col]; local rows are local_ld floats apart. Branch-free:
// a vector outside the matrix loads the matrix's first vector (always valid) and is replaced by zeros.
DEVICE_FN void load_tile(GLOBAL const float* RESTRICT src, const int ld, const int seg, const int seg_stride,
                         const int rows, const int cols, const int row0, const int col0, const int tile_rows,
                         const int tile_cols, const int vw, const int transpose, LOCAL float* tile,
                         const int local_ld, const int thread) {
  const int vectors_per_row = tile_cols / vw;
  for (int i = thread; i < tile_rows * vectors_per_row; i += GEMM_THREADS) {
    const int r = i / vectors_per_row;
    const int c = (i % vectors_per_row) * vw;
    const bool inside = row0 + r < rows && col0 + c < cols;
    const int offset = inside ? matrix_offset(row0 + r, col0 + c, ld, seg, seg_stride) : 0;
    float v[4];
    if (vw == 4) {
      const float4 t = *((GLOBAL const float4*)(src + offset));
      v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else if (vw == 2) {
      const float2 t = *((GLOBAL const float2*)(src + offset));
      v[0] = t.x; v[1] = t.y;
    } else {
      v[0] = src[offset];
    }
    for (int e = 0; e < vw; ++e) {
      const float value = inside ? v[e] : 0.0f;
      if (transpose) tile[(c + e) * local_ld + r] = value;
      else tile[r * local_ld + c + e] = value;
    }
  }
}

// Work-group (THREADS_N, THREADS_M, 1) computes a TILE_M x TILE_N block of C; axis 2 is the group of a grouped
// convolution. Thread (tn, tm) owns rows tm + i*THREADS_M and columns tn + j*THREADS_N: neighbouring threads
// read neighbouring local floats and store neighbouring columns of C.
KERNEL void GEMM_GROUP_SHAPE gemm(GLOBAL const float* RESTRICT a, GLOBAL const float* RESTRICT b,
                                  GLOBAL float* RESTRICT c, const int image0, const int chunk_images) {
  LOCAL_ARRAY float a_tile[TILE_K * A_TILE_LD];  // [k][m]
  LOCAL_ARRAY float b_tile[TILE_K * B_TILE_LD];  // [k][n]
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

  for (int k0 = 0; k0 < gemm_k; k0 += TILE_K) {
#if A_TRANS
    load_tile(a_base, A_LD, A_SEG, A_SEG_STRIDE, gemm_k, gemm_m, k0, m0, TILE_K, TILE_M,
              A_VECTOR, 0, a_tile, A_TILE_LD, thread);
#else
    load_tile(a_base, A_LD, A_SEG, A_SEG_STRIDE, gemm_m, gemm_k, m0, k0, TILE_M, TILE_K,
              A_VECTOR, 1, a_tile, A_TILE_LD, thread);
#endif
#if B_TRANS
    load_tile(b_base, B_LD, B_SEG, B_SEG_STRIDE, gemm_n, gemm_k, n0, k0, TILE_N, TILE_K,
              B_VECTOR, 1, b_tile, B_TILE_LD, thread);
#else
    load_tile(b_base, B_LD, B_SEG, B_SEG_STRIDE, gemm_k, gemm_n, k0, n0, TILE_K, TILE_N,
              B_VECTOR, 0, b_tile, B_TILE_LD, thread);
#endif
    BARRIER();
    // Unrolled by 2 only: the register tile already gives each step enough independent FMAs, and full
    // unrolling multiplies the code by TILE_K (CPU OpenCL compilers then take seconds per program).
#pragma unroll 2
    for (int kk = 0; kk < TILE_K; ++kk) {
      float a_reg[ROWS_PER_THREAD], b_reg[COLS_PER_THREAD];
#pragma unroll
      for (int i = 0; i < ROWS_PER_THREAD; ++i) a_reg[i] = a_tile[kk * A_TILE_LD + tm + i * THREADS_M];
#pragma unroll
      for (int j = 0; j < COLS_PER_THREAD; ++j) b_reg[j] = b_tile[kk * B_TILE_LD + tn + j * THREADS_N];
#pragma unroll
      for (int i = 0; i < ROWS_PER_THREAD; ++i)
#pragma unroll
        for (int j = 0; j < COLS_PER_THREAD; ++j) acc[i][j] = FMA(a_reg[i], b_reg[j], acc[i][j]);
    }
    BARRIER();
  }

  GLOBAL float* c_base = c + (C_BASE);
#pragma unroll
  for (int i = 0; i < ROWS_PER_THREAD; ++i) {
    const int m = m0 + tm + i * THREADS_M;
    if (m >= gemm_m) continue;
#pragma unroll
    for (int j = 0; j < COLS_PER_THREAD; ++j) {
      const int n = n0 + tn + j * THREADS_N;
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
