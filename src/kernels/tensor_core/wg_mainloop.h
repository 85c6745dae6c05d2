// The main loop of the wgmma kernels, included inside a kernel body after wgmma.h (see its comment for the pipeline).
// The kernel provides `tid`, `ntiles` (WG_TILE_K-deep tiles of its reduction range) and WG_LOAD(stage, tile), which
// issues the 16-byte copies of reduction tile `tile` into the stage whose A tile starts at shared address `stage`
// (its B tile WG_A_STAGE_BYTES later). This leaves float acc[WG_ACC] (rows WG_ACC_ROW, columns WG_ACC_COL) and the
// names the epilogue needs (wg_row0, wg_g, wg_q). Tiles are K-major (wg_descriptor, each k step 32 bytes further into
// the rows) unless the kernel defines WG_TILES_MN_MAJOR: MN-major tiles (wg_descriptor_mn, each k step 16 rows further).
extern __shared__ unsigned char wg_smem_raw[];  // WG_SMEM_BYTES + 1024: the launch's dynamic shared memory
// Stages start on 1024-byte boundaries (the swizzle is a function of the address bits).
const unsigned wg_base = (wg_shared_address(wg_smem_raw) + 1023u) & ~1023u;
const int wg_warpgroup = tid >> 7, wg_lane = tid & 31;
const int wg_row0 = 64 * wg_warpgroup + 16 * ((tid >> 5) & 3);
const int wg_g = wg_lane >> 2, wg_q = wg_lane & 3;
#ifdef WG_TILES_MN_MAJOR
#define WG_STAGE_DESCRIPTOR(addr) wg_descriptor_mn(addr)
#define WG_DESCRIPTOR_STEP ((WG_K_STEP * 128) >> 4)
#else
#define WG_STAGE_DESCRIPTOR(addr) wg_descriptor(addr)
#define WG_DESCRIPTOR_STEP 2
#endif
float acc[WG_ACC];
PRAGMA_UNROLL
for (int i = 0; i < WG_ACC; ++i) acc[i] = 0.0f;

PRAGMA_UNROLL
for (int s = 0; s < STAGES - 2; ++s) {
  if (s < ntiles) WG_LOAD(wg_base + s * WG_STAGE_BYTES, s);
  WG_COPY_COMMIT();
}
for (int t = 0; t < ntiles; ++t) {
  WG_COPY_WAIT(STAGES - 3);  // this thread's copies of tile t have landed
  WG_FENCE_PROXY();
  BARRIER();  // everyone's copies of tile t are visible; every warpgroup is done with tile t-2
  if (t + STAGES - 2 < ntiles) WG_LOAD(wg_base + ((t + STAGES - 2) % STAGES) * WG_STAGE_BYTES, t + STAGES - 2);
  WG_COPY_COMMIT();
  const unsigned stage = wg_base + (t % STAGES) * WG_STAGE_BYTES;
  const unsigned long long a_desc = WG_STAGE_DESCRIPTOR(stage + wg_warpgroup * (64 * 128));
  const unsigned long long b_desc = WG_STAGE_DESCRIPTOR(stage + WG_A_STAGE_BYTES);
  WG_MMA_FENCE();
  PRAGMA_UNROLL
  for (int s = 0; s < WG_TILE_K / WG_K_STEP; ++s) {
    // K-major: each step reads the next 32 bytes of every row (+2 in the descriptor's 16-byte address units);
    // MN-major: the next 16 rows.
    WG_MMA(acc, a_desc + WG_DESCRIPTOR_STEP * s, b_desc + WG_DESCRIPTOR_STEP * s);
  }
  WG_MMA_COMMIT();
  WG_MMA_WAIT(1);  // tile t-1's MMAs (this warpgroup's) are done
}
WG_MMA_WAIT(0);
WG_COPY_WAIT(0);
