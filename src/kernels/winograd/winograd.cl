// Winograd's minimal filtering, non-fused (Lavin and Gray), for stride-1 convolutions in all three directions.
// Forward (DIRECTION 0) and backward-data (1; the forward pass of dy with the filter rotated by 180 degrees, its
// channels swapped and padding R-1-pad) use F(M_TILE x M_TILE, R x R); per group and transform position
// (ALPHA x ALPHA of them):  U = G g G^T  (filters),  V = B^T d B  (input tiles),  M = U V  (a batched GEMM over the
// channels, gemm.cl),  Y = A^T M A  (output tiles). Backward-filter (2) uses F(R x R, M_TILE x M_TILE): the M_TILE x
// M_TILE tiles of dy play the filter (U = G dy G^T), the x tiles the data, the GEMM sums over the tiles of the
// batch (M += U V^T, chunk after chunk) and A^T M A is the R x R filter gradient.
// U, V and M live in one workspace (V at V_OFFSET, M at M_OFFSET floats). The host (src/families/winograd) passes
// the transform matrices as WG_AT, WG_G and WG_BT, and the images of one chunk as image0 and count.
#include "common/compat.h"

#ifndef M_TILE  // defaults only let the file compile alone: F(2x2, 3x3) forward on a small problem
#define N 2
#define C 4
#define H 8
#define W 8
#define K 4
#define R 3
#define S 3
#define P 8
#define Q 8
#define PAD_H 1
#define PAD_W 1
#define GROUPS 1
#define C_PER_GROUP 4
#define K_PER_GROUP 4
#define DIRECTION 0
#define M_TILE 2
#define ALPHA 4
#define SPLIT 1
#define BATCH_CHUNK 2
#define TRANSFORM_THREADS 64
#define WG_AT 1.f, 1.f, 1.f, 0.f, 0.f, 1.f, -1.f, 1.f
#define WG_G 1.f, 0.f, 0.f, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f, 0.5f, 0.f, 0.f, 1.f
#define WG_BT 1.f, 0.f, -1.f, 0.f, 0.f, 1.f, 1.f, 0.f, 0.f, -1.f, 1.f, 0.f, 0.f, 1.f, 0.f, -1.f
#define TILES_Y 4
#define TILES_X 4
#define V_OFFSET 256
#define M_OFFSET 768
#define TILE_M 16
#define TILE_N 16
#define TILE_K 8
#define THREADS_M 8
#define THREADS_N 8
#define LOCAL_PADDING 1
#define VECTOR_WIDTH 1
#define A_VECTOR 1
#define B_VECTOR 1
#endif

#ifndef SPLIT
#define SPLIT 1  // backward-filter: slices of the tiles whose GEMMs run side by side (each its own copy of M)
#endif
// Tiles per channel in one chunk of the batch, rounded up to whole slices; tiles past the chunk's images are zero.
#define TILES ((BATCH_CHUNK * TILES_Y * TILES_X + SPLIT - 1) / SPLIT * SPLIT)
#define POSITIONS (ALPHA * ALPHA)

// The data side, the same in every direction: which tensor is cut into ALPHA x ALPHA tiles (M_TILE apart).
#if DIRECTION == 1
#define IN_CH K_PER_GROUP
#define IN_TOTAL K
#define IN_H P
#define IN_W Q
#define PADH (R - 1 - PAD_H)  // may be negative (pad > R-1): the tiles then start inside dy
#define PADW (S - 1 - PAD_W)
#else
#define IN_CH C_PER_GROUP
#define IN_TOTAL C
#define IN_H H
#define IN_W W
#define PADH PAD_H
#define PADW PAD_W
#endif

// ---- V = B^T d B for every (group, channel, tile of the chunk); V[g][xi][nu][ch][t]. Padding and images past
// the chunk's count read as zero (backward-filter sums over every tile, so they must be numbers).
KERNEL void winograd_input_transform(GLOBAL const float* RESTRICT in, GLOBAL float* RESTRICT workspace,
                                     const int image0, const int count) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)GROUPS * IN_CH * TILES) return;
  const int t = (int)(id % TILES), ch = (int)((id / TILES) % IN_CH), g = (int)(id / ((long)TILES * IN_CH));
  const int n = t / (TILES_Y * TILES_X), ty = (t / TILES_X) % TILES_Y, tx = t % TILES_X;
  const int y0 = ty * M_TILE - PADH, x0 = tx * M_TILE - PADW;
  const bool image_inside = n < count;
  const float kBT[POSITIONS] = {WG_BT};
  GLOBAL const float* plane = in + ((long)(image0 + (image_inside ? n : 0)) * IN_TOTAL + (long)g * IN_CH + ch) * IN_H * IN_W;
  float d[ALPHA][ALPHA];
  PRAGMA_UNROLL
  for (int i = 0; i < ALPHA; ++i)
    PRAGMA_UNROLL
    for (int j = 0; j < ALPHA; ++j) {
      const int y = y0 + i, x = x0 + j;
      d[i][j] = image_inside && y >= 0 && y < IN_H && x >= 0 && x < IN_W ? plane[y * IN_W + x] : 0.0f;
    }
  float bd[ALPHA][ALPHA];  // B^T d
  PRAGMA_UNROLL
  for (int a = 0; a < ALPHA; ++a)
    PRAGMA_UNROLL
    for (int j = 0; j < ALPHA; ++j) {
      float sum = 0.0f;
      PRAGMA_UNROLL
      for (int i = 0; i < ALPHA; ++i) sum = FMA(kBT[a * ALPHA + i], d[i][j], sum);
      bd[a][j] = sum;
    }
  GLOBAL float* v = workspace + V_OFFSET + (long)g * POSITIONS * IN_CH * TILES + (long)ch * TILES + t;
  PRAGMA_UNROLL
  for (int a = 0; a < ALPHA; ++a)
    PRAGMA_UNROLL
    for (int b = 0; b < ALPHA; ++b) {
      float sum = 0.0f;
      PRAGMA_UNROLL
      for (int j = 0; j < ALPHA; ++j) sum = FMA(bd[a][j], kBT[b * ALPHA + j], sum);
      v[(long)(a * ALPHA + b) * IN_CH * TILES] = sum;
    }
}

// G x G^T of one TAPS x TAPS block into the ALPHA x ALPHA positions of u (POSITIONS apart by `stride` floats).
#define G_SANDWICH(TAPS, block, u, stride)                                   \
  do {                                                                       \
    const float kG[ALPHA * TAPS] = {WG_G};                                   \
    float gx[ALPHA][TAPS];                                                   \
    PRAGMA_UNROLL                                                            \
    for (int a = 0; a < ALPHA; ++a)                                          \
      PRAGMA_UNROLL                                                          \
      for (int j = 0; j < TAPS; ++j) {                                       \
        float sum = 0.0f;                                                    \
        PRAGMA_UNROLL                                                        \
        for (int i = 0; i < TAPS; ++i) sum = FMA(kG[a * TAPS + i], block[i][j], sum); \
        gx[a][j] = sum;                                                      \
      }                                                                      \
    PRAGMA_UNROLL                                                            \
    for (int a = 0; a < ALPHA; ++a)                                          \
      PRAGMA_UNROLL                                                          \
      for (int b = 0; b < ALPHA; ++b) {                                      \
        float sum = 0.0f;                                                    \
        PRAGMA_UNROLL                                                        \
        for (int j = 0; j < TAPS; ++j) sum = FMA(gx[a][j], kG[b * TAPS + j], sum); \
        (u)[(long)(a * ALPHA + b) * (stride)] = sum;                         \
      }                                                                      \
  } while (0)

// A^T m A of the ALPHA x ALPHA values at m (POSITIONS apart by `stride`) into out[i * out_ld + j] for the OUTS x
// OUTS results with i < rows and j < cols.
#define A_SANDWICH(OUTS, m, stride, out, out_ld, rows, cols)                 \
  do {                                                                       \
    const float kAT[OUTS * ALPHA] = {WG_AT};                                 \
    float mm[ALPHA][ALPHA];                                                  \
    PRAGMA_UNROLL                                                            \
    for (int a = 0; a < ALPHA; ++a)                                          \
      PRAGMA_UNROLL                                                          \
      for (int b = 0; b < ALPHA; ++b) mm[a][b] = (m)[(long)(a * ALPHA + b) * (stride)]; \
    float am[OUTS][ALPHA];                                                   \
    PRAGMA_UNROLL                                                            \
    for (int i = 0; i < OUTS; ++i)                                           \
      PRAGMA_UNROLL                                                          \
      for (int b = 0; b < ALPHA; ++b) {                                      \
        float sum = 0.0f;                                                    \
        PRAGMA_UNROLL                                                        \
        for (int a = 0; a < ALPHA; ++a) sum = FMA(kAT[i * ALPHA + a], mm[a][b], sum); \
        am[i][b] = sum;                                                      \
      }                                                                      \
    PRAGMA_UNROLL                                                            \
    for (int i = 0; i < OUTS; ++i)                                           \
      PRAGMA_UNROLL                                                          \
      for (int j = 0; j < OUTS; ++j) {                                       \
        if (i >= (rows) || j >= (cols)) continue;                            \
        float sum = 0.0f;                                                    \
        PRAGMA_UNROLL                                                        \
        for (int b = 0; b < ALPHA; ++b) sum = FMA(am[i][b], kAT[j * ALPHA + b], sum); \
        (out)[i * (out_ld) + j] = sum;                                       \
      }                                                                      \
  } while (0)

#if DIRECTION != 2
// ======== forward and backward-data: F(M_TILE, R)
#if DIRECTION == 0
#define OUT_CH K_PER_GROUP
#define OUT_TOTAL K
#define OUT_H P
#define OUT_W Q
// w is K x C/groups x R x S: output channel oc of the group, input channel ic.
#define FILTER_TAP(g, oc, ic, i, j) (((((g) * OUT_CH + (oc)) * IN_CH + (ic)) * R + (i)) * S + (j))
#else
#define OUT_CH C_PER_GROUP
#define OUT_TOTAL C
#define OUT_H H
#define OUT_W W
// The same w read as K/groups x C/groups per group, rotated: dx is the correlation of dy with the flipped filter.
#define FILTER_TAP(g, oc, ic, i, j) (((((g) * IN_CH + (ic)) * OUT_CH + (oc)) * R + (R - 1 - (i))) * S + (S - 1 - (j)))
#endif

// ---- U = G g G^T for every (group, output channel, input channel); U[g][xi][nu][oc][ic].
KERNEL void winograd_filter_transform(GLOBAL const float* RESTRICT w, GLOBAL float* RESTRICT workspace) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)GROUPS * OUT_CH * IN_CH) return;
  const int ic = (int)(id % IN_CH), oc = (int)((id / IN_CH) % OUT_CH), g = (int)(id / ((long)IN_CH * OUT_CH));
  float taps[R][S];
  PRAGMA_UNROLL
  for (int i = 0; i < R; ++i)
    PRAGMA_UNROLL
    for (int j = 0; j < S; ++j) taps[i][j] = w[FILTER_TAP(g, oc, ic, i, j)];
  GLOBAL float* u = workspace + (long)g * POSITIONS * OUT_CH * IN_CH + (long)oc * IN_CH + ic;
  G_SANDWICH(R, taps, u, (long)OUT_CH * IN_CH);
}

// ---- M = U V: per group and position, (OUT_CH x IN_CH) times (IN_CH x TILES), one batched GEMM (work-group axis
// 2 runs over groups x positions). A, B and C are all the workspace, at the offsets of U, V and M.
#define GEMM_M OUT_CH
#define GEMM_N TILES
#define GEMM_K IN_CH
#define A_TRANS 0
#define B_TRANS 0
#define ACCUMULATE 0
#define A_LD IN_CH
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE ((long)group * OUT_CH * IN_CH)
#define B_LD TILES
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE (V_OFFSET + (long)group * IN_CH * TILES)
#define C_LD TILES
#define C_SEG 0
#define C_SEG_STRIDE 0
#define C_BASE (M_OFFSET + (long)group * OUT_CH * TILES)

// ---- Y = A^T M A for every (group, output channel, tile); the M_TILE x M_TILE outputs inside the output.
KERNEL void winograd_output_transform(GLOBAL const float* RESTRICT workspace, GLOBAL float* RESTRICT out,
                                      const int image0, const int count) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)GROUPS * OUT_CH * TILES) return;
  const int t = (int)(id % TILES), oc = (int)((id / TILES) % OUT_CH), g = (int)(id / ((long)TILES * OUT_CH));
  const int n = t / (TILES_Y * TILES_X), ty = (t / TILES_X) % TILES_Y, tx = t % TILES_X;
  if (n >= count) return;
  GLOBAL const float* m = workspace + M_OFFSET + (long)g * POSITIONS * OUT_CH * TILES + (long)oc * TILES + t;
  GLOBAL float* tile = out + ((long)(image0 + n) * OUT_TOTAL + (long)g * OUT_CH + oc) * OUT_H * OUT_W +
                       (long)ty * M_TILE * OUT_W + tx * M_TILE;
  A_SANDWICH(M_TILE, m, (long)OUT_CH * TILES, tile, OUT_W, OUT_H - ty * M_TILE, OUT_W - tx * M_TILE);
}

#else
// ======== backward-filter: F(R, M_TILE), the dy tiles as filters

// ---- U = G dy G^T for every (group, output channel k, tile); U[g][xi][nu][k][t]. Outside dy and past the chunk:
// zero.
KERNEL void winograd_gradient_transform(GLOBAL const float* RESTRICT dy, GLOBAL float* RESTRICT workspace,
                                        const int image0, const int count) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)GROUPS * K_PER_GROUP * TILES) return;
  const int t = (int)(id % TILES), k = (int)((id / TILES) % K_PER_GROUP), g = (int)(id / ((long)TILES * K_PER_GROUP));
  const int n = t / (TILES_Y * TILES_X), ty = (t / TILES_X) % TILES_Y, tx = t % TILES_X;
  const bool image_inside = n < count;
  GLOBAL const float* plane = dy + ((long)(image0 + (image_inside ? n : 0)) * K + (long)g * K_PER_GROUP + k) * P * Q;
  float block[M_TILE][M_TILE];
  PRAGMA_UNROLL
  for (int i = 0; i < M_TILE; ++i)
    PRAGMA_UNROLL
    for (int j = 0; j < M_TILE; ++j) {
      const int y = ty * M_TILE + i, x = tx * M_TILE + j;
      block[i][j] = image_inside && y < P && x < Q ? plane[y * Q + x] : 0.0f;
    }
  GLOBAL float* u = workspace + (long)g * POSITIONS * K_PER_GROUP * TILES + (long)k * TILES + t;
  G_SANDWICH(M_TILE, block, u, (long)K_PER_GROUP * TILES);
}

#define M_COPY ((long)GROUPS * POSITIONS * K_PER_GROUP * C_PER_GROUP)  // floats of one slice's M

// ---- M is cleared once before the first chunk: every chunk's GEMM adds into it.
KERNEL void winograd_zero(GLOBAL float* RESTRICT workspace) {
  const long id = GLOBAL_ID(0);
  if (id < SPLIT * M_COPY) workspace[M_OFFSET + id] = 0.0f;
}

// ---- M += U V^T: per slice, group and position, (K/groups x TILES/SPLIT) times (TILES/SPLIT x C/groups), the
// V tiles stored channel-major (B_TRANS). Work-group axis 2 runs over slices x groups x positions; each slice
// adds into its own copy of M, which the output transform sums.
#define SLICE (group / (GROUPS * POSITIONS))
#define GROUP_POSITION (group % (GROUPS * POSITIONS))
#define GEMM_M K_PER_GROUP
#define GEMM_N C_PER_GROUP
#define GEMM_K (TILES / SPLIT)
#define A_TRANS 0
#define B_TRANS 1
#define ACCUMULATE 1
#define A_LD TILES
#define A_SEG 0
#define A_SEG_STRIDE 0
#define A_BASE ((long)GROUP_POSITION * K_PER_GROUP * TILES + (long)SLICE * GEMM_K)
#define B_LD TILES
#define B_SEG 0
#define B_SEG_STRIDE 0
#define B_BASE (V_OFFSET + (long)GROUP_POSITION * C_PER_GROUP * TILES + (long)SLICE * GEMM_K)
#define C_LD C_PER_GROUP
#define C_SEG 0
#define C_SEG_STRIDE 0
#define C_BASE (M_OFFSET + SLICE * M_COPY + (long)GROUP_POSITION * K_PER_GROUP * C_PER_GROUP)

// ---- dw = A^T (sum of the slices' M) A for every (group, k, c): the R x S taps of the filter gradient. The sum
// is written back into the first slice's M, which this thread alone reads.
KERNEL void winograd_filter_output_transform(GLOBAL float* RESTRICT workspace, GLOBAL float* RESTRICT dw) {
  const long id = GLOBAL_ID(0);
  if (id >= (long)GROUPS * K_PER_GROUP * C_PER_GROUP) return;
  const int c = (int)(id % C_PER_GROUP), k = (int)((id / C_PER_GROUP) % K_PER_GROUP);
  const int g = (int)(id / ((long)C_PER_GROUP * K_PER_GROUP));
  GLOBAL float* m = workspace + M_OFFSET + (long)g * POSITIONS * K_PER_GROUP * C_PER_GROUP + (long)k * C_PER_GROUP + c;
  const long stride = (long)K_PER_GROUP * C_PER_GROUP;
  for (int slice = 1; slice < SPLIT; ++slice)
    PRAGMA_UNROLL
    for (int position = 0; position < POSITIONS; ++position) m[position * stride] += m[slice * M_COPY + position * stride];
  GLOBAL float* taps = dw + (((long)g * K_PER_GROUP + k) * C_PER_GROUP + c) * R * S;
  A_SANDWICH(R, m, stride, taps, S, R, S);
}
#endif

// The GEMM of either branch, with the layout macros it defined (the source is included once: the include expander
// takes each file once per program).
#include "gemm/gemm.cl"
