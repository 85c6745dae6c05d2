// The main loop of the 16-bit tensor-core kernels, included inside a kernel body after tc16_common.h. The kernel
// provides `tid`, `ntiles` (TILE_K-deep tiles of its reduction range) and two macros:
//   TC_FETCH(as, bs, tile): starts the copies of reduction tile `tile` into the stage at as, bs: cp.async for the
//     parts that move 4 or 16 aligned bytes at a time, plain loads into the kernel's own registers for the rest
//     (single 16-bit elements, gathers: cp.async moves 4 bytes at least);
//   TC_PUT(as, bs): stores those registers into the stage.
// This leaves acc[TC_MI][TC_NI][4] (rows and columns: TC_ACC_ROW, TC_ACC_COL).
//
// Pipeline: the first STAGES-1 tiles are fetched and put before the loop. At tile t each thread waits for its
// cp.async copies of tile t (one commit group per tile, empty ones included), the barrier makes every thread's
// copies and stores visible and tells that the stage read at tile t-1 is free; tile t+STAGES-1 is fetched into that
// stage, tile t is multiplied, and only then are the registers of tile t+STAGES-1 stored: the plain loads' latency
// hides behind the MMAs instead of stalling them (a warp issues in order, so a store waiting on a load would).
#if TC_EMULATE
LOCAL_ARRAY tc_u32 tc_scratch[TC_THREADS * TC_FRAGMENT_WORDS];
#else
LOCAL tc_u32* tc_scratch = 0;
#endif
#if defined(__OPENCL_VERSION__)
LOCAL_ARRAY tc_h16 tc_smem[TC_SMEM_ELEMENTS] __attribute__((aligned(16)));
#else
extern __shared__ __align__(16) tc_h16 tc_smem[];  // TC_SMEM_ELEMENTS: the launch's dynamic shared memory
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

TC_UNROLL
for (int s = 0; s < STAGES - 1; ++s) {
  if (s < ntiles) {
    TC_FETCH(tc_smem + s * TC_STAGE_ELEMENTS, tc_smem + s * TC_STAGE_ELEMENTS + TC_A_STAGE, s);
    TC_PUT(tc_smem + s * TC_STAGE_ELEMENTS, tc_smem + s * TC_STAGE_ELEMENTS + TC_A_STAGE);
  }
  TC_COPY_COMMIT();
}
int tc_read = 0, tc_write = STAGES - 1;
for (int t = 0; t < ntiles; ++t) {
  TC_COPY_WAIT_PIPELINE();
  BARRIER();
  const bool tc_more = t + STAGES - 1 < ntiles;
  if (tc_more) {
    TC_FETCH(tc_smem + tc_write * TC_STAGE_ELEMENTS, tc_smem + tc_write * TC_STAGE_ELEMENTS + TC_A_STAGE,
             t + STAGES - 1);
  }
  TC_COPY_COMMIT();
  tc16_stage_mma(acc, tc_smem + tc_read * TC_STAGE_ELEMENTS, tc_smem + tc_read * TC_STAGE_ELEMENTS + TC_A_STAGE,
                 tc_wm0, tc_wn0, tc_lane, tc_warp, tc_scratch);
  if (tc_more) TC_PUT(tc_smem + tc_write * TC_STAGE_ELEMENTS, tc_smem + tc_write * TC_STAGE_ELEMENTS + TC_A_STAGE);
  tc_read = tc_read + 1 == STAGES ? 0 : tc_read + 1;
  tc_write = tc_write + 1 == STAGES ? 0 : tc_write + 1;
}
TC_COPY_WAIT_ALL();
