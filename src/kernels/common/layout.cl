// Layout conversion for channels-last (NHWC) problems computed by NCHW kernels (src/families/channels_last.cpp): a
// batch of row-major matrices [batch][rows][cols] transposed into [batch][cols][rows] through a local-memory tile, so
// both the reads and the writes run along contiguous rows. ELEMENT_BYTES is the element's size (4 for FP32, 2 for the
// 16-bit types, moved as unsigned short: a transpose moves bits and never converts). Sizes are arguments, so one
// compiled program serves every shape.
#include "common/compat.h"

#if ELEMENT_BYTES == 2
#define ELEMENT unsigned short
#else
#define ELEMENT float
#endif

#define LT_TILE 32
#define LT_ROWS_PER_PASS 8  // a work-group of 32 x 8 moves a 32 x 32 tile in four passes

// Work-group t of dimension 0 takes tile t of all batch * row_tiles * col_tiles tiles (one axis of 2^31 groups, so no
// batch or image is too large for CUDA's 65,535-block y and z axes); local size 32 x 8.
KERNEL void transpose_batched(GLOBAL const ELEMENT* RESTRICT src, GLOBAL ELEMENT* RESTRICT dst, const int rows,
                              const int cols, const int batch) {
  LOCAL_ARRAY ELEMENT tile[LT_TILE][LT_TILE + 1];
  const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
  const long row_tiles = (rows + LT_TILE - 1) / LT_TILE, col_tiles = (cols + LT_TILE - 1) / LT_TILE;
  const long t = GROUP_ID(0);
  const long b = t / (row_tiles * col_tiles);
  if (b >= batch) return;  // uniform per work-group: no thread reaches a barrier the others skip
  const int r0 = (int)((t / col_tiles) % row_tiles) * LT_TILE, c0 = (int)(t % col_tiles) * LT_TILE;
  const long base = b * (long)rows * cols;
  for (int i = 0; i < LT_TILE; i += LT_ROWS_PER_PASS) {
    const int r = r0 + ty + i, c = c0 + tx;
    if (r < rows && c < cols) tile[ty + i][tx] = src[base + (long)r * cols + c];
  }
  BARRIER();
  for (int i = 0; i < LT_TILE; i += LT_ROWS_PER_PASS) {
    const int c = c0 + ty + i, r = r0 + tx;
    if (r < rows && c < cols) dst[base + (long)c * rows + r] = tile[tx][ty + i];
  }
}
