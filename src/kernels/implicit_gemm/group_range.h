  // The reduction range of this work-group: all of it, or one split-K slice of whole tiles.
#if SPLIT_K > 1
  const int slice = z / GROUPS;
  const int tiles_per_slice = (IG_TILES_R + SPLIT_K - 1) / SPLIT_K;
  const int tile_begin = slice * tiles_per_slice;
  const int tiles_left = IG_TILES_R - tile_begin;
  // Valid configurations leave no slice empty; one that was would just write zeros.
  const int ntiles = tiles_left < tiles_per_slice ? tiles_left : tiles_per_slice;
#else
  const int tile_begin = 0;
  const int ntiles = IG_TILES_R;
#endif
  const int k_begin = tile_begin * TILE_K;

  // Operand pointers of group g.
#if DIRECTION == 0
  const GLOBAL float* a_src = w + g * (K_PER_GROUP * IG_GR);
  const GLOBAL float* b_src = x + g * (C_PER_GROUP * IG_HW);
#elif DIRECTION == 1
  const GLOBAL float* a_src = w + g * (K_PER_GROUP * C_PER_GROUP * IG_RS);
  const GLOBAL float* b_src = y + g * (K_PER_GROUP * IG_PQ);
#else
  const GLOBAL float* a_src = y + g * (K_PER_GROUP * IG_PQ);
  const GLOBAL float* b_src = x + g * (C_PER_GROUP * IG_HW);
#endif
