// Seed 003's unroll + GEMM convolution, per chunk of BATCH_CHUNK images, in all three directions:
//   forward          y[n]  (K x PQ)  = w (K x CRS) * col[n] (CRS x PQ)                      unroll, gemm
//   backward-data    col[n] (CRS x PQ) = w^T * dy[n];  dx = col2im(col)                    gemm, col2im
//   backward-filter  dw (K x CRS)   = sum over n of dy[n] * col[n]^T        zero_filter, then unroll, gemm
// per group (GEMM work-group axis 2). The column buffer is [channel * R*S + r*S + s][b * PQ + p*Q + q] for the
// chunk's images b, so one GEMM spans the whole chunk: its N (or, backward-filter, K) is chunk_images * PQ.
// DIRECTION picks the GEMM's transpositions and operand layouts; gemm.cl is the one GEMM source.
#include "common/compat.h"

// The problem shape (src/plan/kernel_family.cpp passes these); defaults only let the file compile alone.
#ifndef N
#define N 2
#define C 4
#define H 9
#define W 9
#define K 6
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
#define GROUPS 2
#define C_PER_GROUP 2
#define K_PER_GROUP 3
#endif
#ifndef DIRECTION
#define DIRECTION 0  // 0 forward, 1 backward-data, 2 backward-filter
#endif
#ifndef BATCH_CHUNK
#define BATCH_CHUNK 2  // images whose columns the workspace holds at once
#endif
#ifndef UNROLL_THREADS
#define UNROLL_THREADS 256  // work-group size of unroll and col2im
#endif

#define RS (R * S)
#define PQ (P * Q)
#define CRS (C_PER_GROUP * RS)
#define COL_LD (BATCH_CHUNK * PQ)

// The three matrices of a group: w (K_PER_GROUP x CRS), the chunk's columns (CRS x chunk*PQ, row stride
// COL_LD), and y/dy (K_PER_GROUP x chunk*PQ, one segment of PQ columns per image, images K*PQ apart).
// Vector loads need every stride and the column count to be multiples of the width: CRS for w, P*Q for the
// columns and y (the chunk's column count is a multiple of P*Q).
#define W_VECTOR (CRS % VECTOR_WIDTH == 0 ? VECTOR_WIDTH : 1)
#define PQ_VECTOR (PQ % VECTOR_WIDTH == 0 ? VECTOR_WIDTH : 1)
#define W_LD CRS
#define W_BASE (group * K_PER_GROUP * CRS)
#define COL_BASE (group * CRS * COL_LD)
#define Y_BASE (image0 * K * PQ + group * K_PER_GROUP * PQ)

#if DIRECTION == 0
#define GEMM_M K_PER_GROUP
#define GEMM_N (chunk_images * PQ)
#define GEMM_K CRS
#define A_TRANS 0
#define A_LD W_LD
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE W_BASE
#define A_VECTOR W_VECTOR
#define B_TRANS 0
#define B_LD COL_LD
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE COL_BASE
#define B_VECTOR PQ_VECTOR
#define C_LD PQ
#define C_SEG PQ
#define C_SEG_STRIDE (K * PQ)
#define C_BASE Y_BASE
#elif DIRECTION == 1
#define GEMM_M CRS
#define GEMM_N (chunk_images * PQ)
#define GEMM_K K_PER_GROUP
#define A_TRANS 1  // w stored K_PER_GROUP x CRS read as its transpose
#define A_LD W_LD
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE W_BASE
#define A_VECTOR W_VECTOR
#define B_TRANS 0
#define B_LD PQ
#define B_SEG PQ
#define B_SEG_STRIDE (K * PQ)
#define B_BASE Y_BASE
#define B_VECTOR PQ_VECTOR
#define C_LD COL_LD
#define C_SEG 0
#define C_SEG_STRIDE 0
#define C_BASE COL_BASE
#else
// dw sums over the chunks: zero_filter clears it (it arrives as NaN), then every chunk's GEMM adds its part.
// (A runtime overwrite-or-add flag costs a branch or a select per element and compiles slower.)
#define ACCUMULATE 1
#define GEMM_M K_PER_GROUP
#define GEMM_N CRS
#define GEMM_K (chunk_images * PQ)
#define A_TRANS 0
#define A_LD PQ
#define A_SEG PQ
#define A_SEG_STRIDE (K * PQ)
#define A_BASE Y_BASE
#define A_VECTOR PQ_VECTOR
#define B_TRANS 1  // the columns stored CRS x chunk*PQ read as their transpose
#define B_LD COL_LD
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE COL_BASE
#define B_VECTOR PQ_VECTOR
#define C_LD W_LD
#define C_SEG 0
#define C_SEG_STRIDE 0
#define C_BASE W_BASE
#endif

#include "gemm/gemm.cl"

#ifdef __OPENCL_VERSION__
#define UNROLL_GROUP_SHAPE __attribute__((reqd_work_group_size(UNROLL_THREADS, 1, 1)))
#else
#define UNROLL_GROUP_SHAPE __launch_bounds__(UNROLL_THREADS)
#endif

// Each direction's program holds only the kernels it launches.
#if DIRECTION != 1
// One work-item per (channel, image of the chunk, output pixel) writes that pixel's R*S column entries:
// consecutive work-items write consecutive columns. Padding reads as zero. Launched over C*BATCH_CHUNK*PQ
// work-items (rounded up); images past chunk_images (the last, short chunk) do nothing.
KERNEL void UNROLL_GROUP_SHAPE unroll(GLOBAL const float* RESTRICT x, GLOBAL float* RESTRICT col,
                                      const int image0, const int chunk_images) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)C * COL_LD) return;
  const int i = (int)id;
  const int pq = i % PQ;
  const int b = (i / PQ) % BATCH_CHUNK;
  const int channel = i / COL_LD;
  if (b >= chunk_images) return;
  const int h0 = (pq / Q) * STRIDE_H - PAD_H, w0 = (pq % Q) * STRIDE_W - PAD_W;
  GLOBAL const float* src = x + ((image0 + b) * C + channel) * (H * W);
  GLOBAL float* dst = col + channel * RS * COL_LD + b * PQ + pq;
  // Only the inner tap loop is unrolled: an 11x11 filter fully unrolled is 121 copies for little gain in a
  // memory-bound kernel.
  for (int r = 0; r < R; ++r) {
    const int h = h0 + r * DILATION_H;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int w = w0 + s * DILATION_W;
      const bool inside = (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
      dst[(r * S + s) * COL_LD] = inside ? src[h * W + w] : 0.0f;
    }
  }
}

#endif

#if DIRECTION == 1
// Backward-data's gather: one work-item per element of dx sums the column entries that came from it, in a
// fixed order and without atomics, and overwrites dx (elements no filter tap reaches get 0).
KERNEL void UNROLL_GROUP_SHAPE col2im(GLOBAL const float* RESTRICT col, GLOBAL float* RESTRICT x,
                                      const int image0, const int chunk_images) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)C * BATCH_CHUNK * (H * W)) return;
  const int i = (int)id;
  const int hw = i % (H * W);
  const int b = (i / (H * W)) % BATCH_CHUNK;
  const int channel = i / (BATCH_CHUNK * H * W);
  if (b >= chunk_images) return;
  const int h = hw / W, w = hw % W;
  GLOBAL const float* src = col + channel * RS * COL_LD + b * PQ;
  float sum = 0.0f;
  for (int r = 0; r < R; ++r) {
    const int ph = h + PAD_H - r * DILATION_H;  // = p * STRIDE_H when tap r of output row p reads row h
    if (ph < 0 || ph % STRIDE_H != 0 || ph / STRIDE_H >= P) continue;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int qw = w + PAD_W - s * DILATION_W;
      if (qw < 0 || qw % STRIDE_W != 0 || qw / STRIDE_W >= Q) continue;
      sum += src[(r * S + s) * COL_LD + (ph / STRIDE_H) * Q + qw / STRIDE_W];
    }
  }
  x[((image0 + b) * C + channel) * (H * W) + hw] = sum;
}
#endif

#if DIRECTION == 2
KERNEL void zero_filter(GLOBAL float* RESTRICT w) {
  const long id = GLOBAL_ID(0);
  if (id < (long)K * CRS) w[id] = 0.0f;
}
#endif
