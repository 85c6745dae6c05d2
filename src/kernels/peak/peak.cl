// Device micro-benchmarks (seed 001 and the ceilings every later figure is compared with): fills in 2-D,
// 1-D and float4 form, a float4 copy, an FMA-throughput kernel and an empty kernel for launch latency.
// Shared by OpenCL and CUDA through common/compat.h.
#include "common/compat.h"

#ifndef FMA_ITERATIONS
#define FMA_ITERATIONS 1024  // unrolled FMA steps per thread per chain
#endif

// Seed 001's naive 2-D fill: one work-item per (row, column); position computed from both ids.
KERNEL void fill_2d(GLOBAL float* table, const float value, const int rows, const int cols) {
  const long row = GLOBAL_ID(0);
  const long col = GLOBAL_ID(1);
  if (row < rows && col < cols) table[row * cols + col] = value;
}

// Seed 001's flat 1-D fill; the bound lets the global size round up to any work-group size.
KERNEL void fill_1d(GLOBAL float* table, const float value, const long count) {
  const long i = GLOBAL_ID(0);
  if (i < count) table[i] = value;
}

// Four floats per work-item; count4 = count / 4 (the callers use multiples of 4).
KERNEL void fill_vec4(GLOBAL vec4* table, const float value, const long count4) {
  const long i = GLOBAL_ID(0);
  if (i < count4) table[i] = MAKE_VEC4(value);
}

// Device-to-device copy, 16 bytes per work-item, grid-stride so any launch covers the buffer.
KERNEL void copy_vec4(GLOBAL const vec4* RESTRICT src, GLOBAL vec4* RESTRICT dst, const long count4) {
  for (long i = GLOBAL_ID(0); i < count4; i += GLOBAL_SIZE(0)) dst[i] = src[i];
}

// Eight independent FMA chains per work-item hide the FMA latency; b and c come from arguments so the
// compiler cannot fold them. FLOPs = global size * FMA_ITERATIONS * 8 chains * 2.
KERNEL void fma_throughput(GLOBAL float* out, const float b, const float c) {
  const float seed = (float)GLOBAL_ID(0) * 1e-9f;
  float a0 = seed, a1 = seed + 1.0f, a2 = seed + 2.0f, a3 = seed + 3.0f;
  float a4 = seed + 4.0f, a5 = seed + 5.0f, a6 = seed + 6.0f, a7 = seed + 7.0f;
#pragma unroll 128
  for (int i = 0; i < FMA_ITERATIONS; ++i) {
    a0 = FMA(a0, b, c); a1 = FMA(a1, b, c); a2 = FMA(a2, b, c); a3 = FMA(a3, b, c);
    a4 = FMA(a4, b, c); a5 = FMA(a5, b, c); a6 = FMA(a6, b, c); a7 = FMA(a7, b, c);
  }
  out[GLOBAL_ID(0)] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

KERNEL void empty_kernel(GLOBAL float* unused) {
  if (GLOBAL_ID(0) < 0) unused[0] = 0.0f;  // never true; keeps the argument alive
}
