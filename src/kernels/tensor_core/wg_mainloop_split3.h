// wg_mainloop.h's pipeline for 3xTF32 (FP32 tensors in FP32-accurate math), included inside a kernel body after
// wgmma.h. Each operand element arrives as a TF32 big part and a TF32 residual, split beforehand (the kernel's
// copies into the workspace): a stage holds the big parts' A and B tiles and, WG_STAGE_BYTES later, the residuals'.
// The kernel's WG_LOAD(stage, tile) copies both halves of reduction tile `tile`. A tile's three products (residual x
// big, big x residual, then big x big) go into zeroed partial sums, added into the FP32 accumulators with ordinary
// round-to-nearest adds: the tensor cores truncate when they accumulate, which over a whole reduction would exceed
// FP32's tolerance (implicit_gemm_wgmma.cu does the same for its gathered operands). Leaves the names wg_mainloop.h
// leaves: float acc[WG_ACC], wg_row0, wg_g, wg_q.
#define WG_SPLIT3_STAGE_BYTES (2 * WG_STAGE_BYTES)
extern __shared__ unsigned char wg_smem_raw[];  // STAGES x WG_SPLIT3_STAGE_BYTES + 1024: dynamic shared memory
const unsigned wg_base = (wg_shared_address(wg_smem_raw) + 1023u) & ~1023u;
const int wg_warpgroup = tid >> 7, wg_lane = tid & 31;
const int wg_row0 = 64 * wg_warpgroup + 16 * ((tid >> 5) & 3);
const int wg_g = wg_lane >> 2, wg_q = wg_lane & 3;
float acc[WG_ACC];
PRAGMA_UNROLL
for (int i = 0; i < WG_ACC; ++i) acc[i] = 0.0f;

PRAGMA_UNROLL
for (int s = 0; s < STAGES - 2; ++s) {
  if (s < ntiles) WG_LOAD(wg_base + s * WG_SPLIT3_STAGE_BYTES, s);
  WG_COPY_COMMIT();
}
for (int t = 0; t < ntiles; ++t) {
  WG_COPY_WAIT(STAGES - 3);  // this thread's copies of tile t have landed
  WG_FENCE_PROXY();
  BARRIER();  // everyone's copies of tile t are visible; every warpgroup is done with tile t-1 (waited below)
  if (t + STAGES - 2 < ntiles)
    WG_LOAD(wg_base + ((t + STAGES - 2) % STAGES) * WG_SPLIT3_STAGE_BYTES, t + STAGES - 2);
  WG_COPY_COMMIT();
  const unsigned stage = wg_base + (t % STAGES) * WG_SPLIT3_STAGE_BYTES;
  const unsigned long long a_hi = wg_descriptor(stage + wg_warpgroup * (64 * 128));
  const unsigned long long b_hi = wg_descriptor(stage + WG_A_STAGE_BYTES);
  const unsigned long long a_lo = wg_descriptor(stage + WG_STAGE_BYTES + wg_warpgroup * (64 * 128));
  const unsigned long long b_lo = wg_descriptor(stage + WG_STAGE_BYTES + WG_A_STAGE_BYTES);
  float part[WG_ACC];
  PRAGMA_UNROLL
  for (int i = 0; i < WG_ACC; ++i) part[i] = 0.0f;
  WG_MMA_FENCE();
  PRAGMA_UNROLL
  for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) {
    WG_MMA(part, a_lo + 2 * s, b_hi + 2 * s);
    WG_MMA(part, a_hi + 2 * s, b_lo + 2 * s);
  }
  PRAGMA_UNROLL
  for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) WG_MMA(part, a_hi + 2 * s, b_hi + 2 * s);
  WG_MMA_COMMIT();
  WG_MMA_WAIT(0);
  PRAGMA_UNROLL
  for (int i = 0; i < WG_ACC; ++i) {
    asm volatile("" : "+f"(part[i])::"memory");  // read only after the wait
    acc[i] += part[i];
  }
}
WG_COPY_WAIT(0);
