// The work-item tiles and work-group shape of the depthwise forward and backward-data kernels (the written tensor's
// rows and columns), with defaults so each kernel file also compiles alone.
#ifndef DEPTHWISE_SPATIAL_TILES_H
#define DEPTHWISE_SPATIAL_TILES_H

#include "depthwise/depthwise_common.h"

#ifndef TILE_W
#define TILE_W 4  // columns of the written tensor per work-item (local axis 0)
#endif
#ifndef TILE_H
#define TILE_H 2  // rows of the written tensor per work-item (local axis 1)
#endif
#ifndef THREADS_W
#define THREADS_W 16  // work-group extent along columns
#endif
#ifndef THREADS_H
#define THREADS_H 4  // work-group extent along rows
#endif
#ifndef THREADS_C
#define THREADS_C 1  // work-group extent along channels (local axis 2)
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1  // 1: stage the work-group's read window in local memory; 0: read through the caches
#endif

#define THREADS (THREADS_W * THREADS_H * THREADS_C)
#define BLOCK_W (TILE_W * THREADS_W)
#define BLOCK_H (TILE_H * THREADS_H)

#endif  // DEPTHWISE_SPATIAL_TILES_H
