// The multi-stage main loop of the tensor-core kernels, included inside a kernel body after tc_common.h. The kernel
// provides `tid` (its thread in the block), `ntiles` (TILE_K-deep tiles of its reduction range) and
// TC_LOAD_STAGE(as, bs, tile), which issues the copies of reduction tile `tile` (0 .. ntiles-1) into the A and B
// tiles at `as` and `bs`. This leaves acc[TC_MI][TC_NI][4] (rows and columns: TC_ACC_ROW, TC_ACC_COL).
//
// Pipeline: STAGES-1 tiles are requested before the loop; at tile t each thread waits for its copies of tile t
// (cp.async.wait_group STAGES-2: one commit group per tile, empty ones included, so the count is exact), the
// barrier makes every thread's copies visible and also tells that the stage read at tile t-1 is free, which is
// where the copies of tile t+STAGES-1 go before tile t is multiplied.
//
// MATH_SPLIT=1 (3xTF32) adds each stage's MMA sums into a second set of accumulators with ordinary FP32 adds
// (round to nearest) and restarts the MMA accumulators from zero. The tensor cores' own FP32 accumulation truncates
// (rounds toward zero), so over a long reduction its error grows with the reduction length instead of its square
// root: on the H200, alex2's backward-data (4800 terms) missed the FP32 tolerance by 4% without this. Per stage the
// truncated sums cover TILE_K terms only.
#if TC_EMULATE
LOCAL_ARRAY tc_u32 tc_scratch[TC_THREADS * TC_FRAGMENT_WORDS];
#else
LOCAL tc_u32* tc_scratch = 0;  // unused: the tensor cores exchange fragments themselves
#endif
#if defined(__OPENCL_VERSION__)
LOCAL_ARRAY float tc_smem[TC_SMEM_FLOATS] __attribute__((aligned(16)));
#else
extern __shared__ __align__(16) float tc_smem[];  // TC_SMEM_FLOATS: the launch's dynamic shared memory
#endif
const int tc_warp = tid >> 5, tc_lane = tid & 31;
const int tc_g = tc_lane >> 2, tc_t = tc_lane & 3;
const int tc_wm0 = (tc_warp / WARPS_N) * TC_WM, tc_wn0 = (tc_warp % WARPS_N) * TC_WN;
float acc[TC_MI][TC_NI][4];
TC_UNROLL
for (int i = 0; i < TC_MI; ++i)
  TC_UNROLL
  for (int j = 0; j < TC_NI; ++j)
    TC_UNROLL
    for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
#if MATH_SPLIT
float tc_total[TC_MI][TC_NI][4];
TC_UNROLL
for (int i = 0; i < TC_MI; ++i)
  TC_UNROLL
  for (int j = 0; j < TC_NI; ++j)
    TC_UNROLL
    for (int r = 0; r < 4; ++r) tc_total[i][j][r] = 0.0f;
#endif

TC_UNROLL
for (int s = 0; s < STAGES - 1; ++s) {
  if (s < ntiles) TC_LOAD_STAGE(tc_smem + s * TC_STAGE_FLOATS, tc_smem + s * TC_STAGE_FLOATS + TC_A_STAGE, s);
  TC_COPY_COMMIT();
}
int tc_read = 0, tc_write = STAGES - 1;
for (int t = 0; t < ntiles; ++t) {
  TC_COPY_WAIT_PIPELINE();
  BARRIER();
  if (t + STAGES - 1 < ntiles) {
    TC_LOAD_STAGE(tc_smem + tc_write * TC_STAGE_FLOATS, tc_smem + tc_write * TC_STAGE_FLOATS + TC_A_STAGE,
                  t + STAGES - 1);
  }
  TC_COPY_COMMIT();
  tc_stage_mma(acc, tc_smem + tc_read * TC_STAGE_FLOATS, tc_smem + tc_read * TC_STAGE_FLOATS + TC_A_STAGE, tc_wm0,
               tc_wn0, tc_lane, tc_warp, tc_scratch);
#if MATH_SPLIT
  TC_UNROLL
  for (int i = 0; i < TC_MI; ++i)
    TC_UNROLL
    for (int j = 0; j < TC_NI; ++j)
      TC_UNROLL
      for (int r = 0; r < 4; ++r) {
        tc_total[i][j][r] += acc[i][j][r];
        acc[i][j][r] = 0.0f;
      }
#endif
  tc_read = tc_read + 1 == STAGES ? 0 : tc_read + 1;
  tc_write = tc_write + 1 == STAGES ? 0 : tc_write + 1;
}
TC_COPY_WAIT_ALL();  // only empty groups remain; nothing may still write shared memory when the block ends
#if MATH_SPLIT
TC_UNROLL
for (int i = 0; i < TC_MI; ++i)
  TC_UNROLL
  for (int j = 0; j < TC_NI; ++j)
    TC_UNROLL
    for (int r = 0; r < 4; ++r) acc[i][j][r] = tc_total[i][j][r];
#endif
