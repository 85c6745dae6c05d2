// depthwise backward-filter: dw[k, 0, r, s] = sum over n, p, q of dy[n, k, p, q] * x[n, k / MULTIPLIER, ...].
// One work-group per (output channel k, chunk of the reduction): its work-items walk the chunk's segments of TILE_Q
// consecutive output positions, accumulating every filter tap in registers (an x row segment loaded once serves
// all S taps), then reduce across the work-group in local memory in a fixed tree. With SPLIT > 1 each chunk's
// partial filter goes to the workspace and depthwise_sum_splits adds the chunks in order: no float atomics, so
// results are the same on every run.
#include "depthwise/depthwise_common.h"

#ifndef THREADS
#define THREADS 64  // work-items per work-group (a power of two)
#endif
#ifndef TILE_Q
#define TILE_Q 4  // consecutive output positions along a row per work-item step
#endif
#ifndef SPLIT
#define SPLIT 1  // chunks of each channel's N*P*Q reduction (work-groups per channel)
#endif

#define Q_SEGMENTS CEIL_DIV(Q, TILE_Q)
#define SEGMENTS (N * P * Q_SEGMENTS)  // (n, p, segment of a row): the units a chunk's work-items share out
#define SEGMENTS_PER_SPLIT CEIL_DIV(SEGMENTS, SPLIT)
// Filter rows accumulated per pass over the chunk: registers for at most 64 taps (larger filters take passes).
#define ROWS_PER_PASS (S >= 64 ? 1 : MIN_INT(R, 64 / S))
#define PASSES CEIL_DIV(R, ROWS_PER_PASS)
#define TAPS_PER_PASS (ROWS_PER_PASS * S)
#define ROW_SPAN ((TILE_Q - 1) * STRIDE_W + (S - 1) * DILATION_W + 1)
#define DW_ELEMENTS (K * FILTER_SIZE)

// `out` is dw itself when SPLIT is 1, else the workspace of SPLIT partial filters (chunk-major).
KERNEL void depthwise_backward_filter(GLOBAL const float* RESTRICT x, GLOBAL const float* RESTRICT y,
                                      GLOBAL float* RESTRICT out) {
  const int lid = LOCAL_ID(0);
  const int k = (int)(GROUP_ID(0) / SPLIT);
  const int split = (int)(GROUP_ID(0) % SPLIT);
  const int c = k / MULTIPLIER;
  const int first = split * SEGMENTS_PER_SPLIT;
  const int end = MIN_INT(first + SEGMENTS_PER_SPLIT, SEGMENTS);
  LOCAL_ARRAY float partial[TAPS_PER_PASS * THREADS];

  for (int pass = 0; pass < PASSES; ++pass) {
    const int r0 = pass * ROWS_PER_PASS;
    float acc[ROWS_PER_PASS][S];
    PRAGMA_UNROLL for (int rr = 0; rr < ROWS_PER_PASS; ++rr)
      PRAGMA_UNROLL for (int s = 0; s < S; ++s) acc[rr][s] = 0.0f;
    // Consecutive work-items take consecutive row segments: dy and (at stride 1) x reads are coalesced.
    for (int e = first + lid; e < end; e += THREADS) {
      const int segment = e % Q_SEGMENTS;
      const int p = (e / Q_SEGMENTS) % P;
      const int n = e / (Q_SEGMENTS * P);
      const int q0 = segment * TILE_Q;
      GLOBAL const float* dy_row = y + ((n * K + k) * P + p) * Q + q0;
      float dv[TILE_Q];
      PRAGMA_UNROLL for (int j = 0; j < TILE_Q; ++j) dv[j] = q0 + j < Q ? dy_row[j] : 0.0f;
      GLOBAL const float* x_c = x + (n * C + c) * H * W;
      PRAGMA_UNROLL for (int rr = 0; rr < ROWS_PER_PASS; ++rr) {
        const int h = p * STRIDE_H - PAD_H + (r0 + rr) * DILATION_H;
        const bool row_inside = r0 + rr < R && h >= 0 && h < H;
        float xr[ROW_SPAN];
        PRAGMA_UNROLL for (int u = 0; u < ROW_SPAN; ++u) {
          const int wc = q0 * STRIDE_W - PAD_W + u;
          xr[u] = row_inside && wc >= 0 && wc < W ? x_c[h * W + wc] : 0.0f;
        }
        PRAGMA_UNROLL for (int s = 0; s < S; ++s)
          PRAGMA_UNROLL for (int j = 0; j < TILE_Q; ++j)
            acc[rr][s] = FMA(dv[j], xr[j * STRIDE_W + s * DILATION_W], acc[rr][s]);
      }
    }

    // The work-group's sum per tap: a fixed tree over the work-items (deterministic).
    BARRIER();  // the previous pass's results are read
    PRAGMA_UNROLL for (int rr = 0; rr < ROWS_PER_PASS; ++rr)
      PRAGMA_UNROLL for (int s = 0; s < S; ++s) partial[(rr * S + s) * THREADS + lid] = acc[rr][s];
    BARRIER();
    for (int width = THREADS / 2; width > 0; width /= 2) {
      if (lid < width) {
        for (int t = 0; t < TAPS_PER_PASS; ++t)
          partial[t * THREADS + lid] += partial[t * THREADS + lid + width];
      }
      BARRIER();
    }
    for (int t = lid; t < TAPS_PER_PASS; t += THREADS) {
      if (r0 * S + t < FILTER_SIZE)
        out[split * DW_ELEMENTS + k * FILTER_SIZE + r0 * S + t] = partial[t * THREADS];
    }
  }
}

#if SPLIT > 1
// dw = the sum of the SPLIT partial filters, added in chunk order; every element of dw is written once.
KERNEL void depthwise_sum_splits(GLOBAL const float* RESTRICT partial, GLOBAL float* RESTRICT dw) {
  const long i = GLOBAL_ID(0);
  if (i >= DW_ELEMENTS) return;
  float sum = 0.0f;
  for (int z = 0; z < SPLIT; ++z) sum += partial[z * DW_ELEMENTS + i];
  dw[i] = sum;
}
#endif
