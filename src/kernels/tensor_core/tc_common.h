// Tensor-core building blocks of gemm_tc.cl and implicit_gemm_tc.cl: TF32 mma.sync, cp.async and TF32 rounding as
// inline PTX (NVRTC and NVIDIA's OpenCL alike), or in plain OpenCL C with TC_EMULATE=1 (the PoCL test of the
// kernels' indexing, layouts and pipeline; see tests/families/tensor_core_test.cpp), plus the shared-memory tile
// layouts and the warp's fragment mapping. tc_mainloop.h is the pipeline, tc_splitk_reduce.h the split-K sum.
//
// A block of WARPS_M x WARPS_N warps computes a TILE_M x TILE_N tile of C = A * B; warp w owns the
// (TILE_M/WARPS_M) x (TILE_N/WARPS_N) warp tile at row (w / WARPS_N), column (w % WARPS_N), made of m16n8k8 MMA
// tiles: TC_MI x TC_NI of them, 4 FP32 accumulators per thread each. MATH_SPLIT=0 rounds A and B to TF32 (cvt.rna)
// for one product; MATH_SPLIT=1 (3xTF32) splits each into a TF32 big part and a TF32 residual and accumulates
// small*big + big*small + big*big, which keeps FP32 accuracy (the residual product, below 2^-22 relative, is left out).
//
// Shared memory holds STAGES stages of an A and a B tile. Each operand's tile keeps the dimension that is contiguous
// in global memory contiguous in shared memory too, so the loads stay coalesced (and 16-byte where the layout
// allows): "K-contiguous" tiles are [rows][TILE_K], the others [TILE_K][rows]. SMEM_PADDING=1 pads each row so
// that a warp's fragment reads hit 32 distinct banks: lanes read (row g, k t) for g < 8, t < 4, which is
// conflict-free when a K-contiguous pitch is 4 (mod 8) floats (TILE_K + 4) and a row-contiguous one 8 (mod 32)
// (TILE_M/N + 8).
#ifndef CONVTUNE_TC_COMMON_H
#define CONVTUNE_TC_COMMON_H

#include "common/compat.h"

#ifndef TC_EMULATE
#define TC_EMULATE 0
#endif
#ifndef MATH_SPLIT
#define MATH_SPLIT 0
#endif

// Loops over fragments, MMA tiles and copies unroll on the GPU (register arrays need constant indices there); the
// emulation keeps them rolled, which keeps PoCL's compiles short.
#if TC_EMULATE
#define TC_UNROLL PRAGMA_NO_UNROLL
#else
#define TC_UNROLL PRAGMA_UNROLL
#endif

#define TC_THREADS (32 * WARPS_M * WARPS_N)
#define TC_WM (TILE_M / WARPS_M)
#define TC_WN (TILE_N / WARPS_N)
#define TC_MI (TC_WM / 16)
#define TC_NI (TC_WN / 8)
#define TC_PAD_K (SMEM_PADDING ? 4 : 0)
#define TC_PAD_ROWS (SMEM_PADDING ? 8 : 0)

// Element (m, k) of the A tile and (k, n) of the B tile of stage pointer s, in the layout the host chose
// (TC_A_KCONTIG, TC_B_KCONTIG; src/families/gemm_tc/tc_tiles.cpp computes the same sizes).
#if TC_A_KCONTIG
#define TC_A_PITCH (TILE_K + TC_PAD_K)
#define TC_A_STAGE (TILE_M * TC_A_PITCH)
#define TC_A_AT(s, m, k) (s)[(m) * TC_A_PITCH + (k)]
#else
#define TC_A_PITCH (TILE_M + TC_PAD_ROWS)
#define TC_A_STAGE (TILE_K * TC_A_PITCH)
#define TC_A_AT(s, m, k) (s)[(k) * TC_A_PITCH + (m)]
#endif
#if TC_B_KCONTIG
#define TC_B_PITCH (TILE_K + TC_PAD_K)
#define TC_B_STAGE (TILE_N * TC_B_PITCH)
#define TC_B_AT(s, k, n) (s)[(n) * TC_B_PITCH + (k)]
#else
#define TC_B_PITCH (TILE_N + TC_PAD_ROWS)
#define TC_B_STAGE (TILE_K * TC_B_PITCH)
#define TC_B_AT(s, k, n) (s)[(k) * TC_B_PITCH + (n)]
#endif
#define TC_STAGE_FLOATS (TC_A_STAGE + TC_B_STAGE)
#define TC_SMEM_FLOATS (STAGES * TC_STAGE_FLOATS)

// Row and column, within the block tile, of accumulator r (0..3) of MMA tile (i, j): the m16n8 C fragment gives
// lane (g = lane/4, t = lane%4) rows g and g+8, columns 2t and 2t+1.
#define TC_ACC_ROW(i, r) (tc_wm0 + (i) * 16 + tc_g + 8 * ((r) >> 1))
#define TC_ACC_COL(j, r) (tc_wn0 + (j) * 8 + 2 * tc_t + ((r) & 1))

// The block's thread count for the compiler; BLOCKS_PER_SM caps registers (NVIDIA's OpenCL has no launch bounds:
// the family passes -cl-nv-maxrregcount there).
#ifdef __OPENCL_VERSION__
#define TC_ATTRIBUTES __attribute__((reqd_work_group_size(TC_THREADS, 1, 1)))
#else
#define TC_ATTRIBUTES __launch_bounds__(TC_THREADS, BLOCKS_PER_SM)
#endif

#ifdef __OPENCL_VERSION__
#define TC_ASM __asm__ __volatile__  // OpenCL C is C99: only the reserved spelling
#define TC_AS_FLOAT(u) as_float(u)
#define TC_AS_UINT(f) as_uint(f)
#define TC_SHARED_ADDRESS(p) ((uint)(ulong)(p))  // a __local pointer already holds a shared-memory address
typedef uint tc_u32;
#else
#define TC_ASM asm volatile  // NVRTC knows only this spelling
#define TC_AS_FLOAT(u) __uint_as_float(u)
#define TC_AS_UINT(f) __float_as_uint(f)
#define TC_SHARED_ADDRESS(p) ((unsigned)__cvta_generic_to_shared(p))
typedef unsigned tc_u32;
#endif

#if TC_EMULATE
// Round to TF32 as cvt.rna does: the magnitude to 10 mantissa bits, ties away from zero (finite inputs).
DEVICE_FN tc_u32 tc_to_tf32(float x) { return (TC_AS_UINT(x) + 0x1000u) & 0xFFFFE000u; }
// Copies complete at once; the barriers of the pipeline order them as cp.async's waits would.
DEVICE_FN void tc_copy4(LOCAL float* dst, const GLOBAL float* src, bool valid) { *dst = valid ? *src : 0.0f; }
DEVICE_FN void tc_copy16(LOCAL float* dst, const GLOBAL float* src, bool valid) {
  for (int i = 0; i < 4; ++i) dst[i] = valid ? src[i] : 0.0f;
}
#define TC_COPY_COMMIT()
#define TC_COPY_WAIT_PIPELINE()
#define TC_COPY_WAIT_ALL()
#else
DEVICE_FN tc_u32 tc_to_tf32(float x) {
  tc_u32 r;
  TC_ASM("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// One float (or four, 16-byte aligned) global -> shared memory without registers, zero-filled when !valid
// (source size 0: nothing is read).
DEVICE_FN void tc_copy4(LOCAL float* dst, const GLOBAL float* src, bool valid) {
  TC_ASM("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(TC_SHARED_ADDRESS(dst)), "l"(src), "r"(valid ? 4 : 0)
         : "memory");
}
DEVICE_FN void tc_copy16(LOCAL float* dst, const GLOBAL float* src, bool valid) {
  TC_ASM("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(TC_SHARED_ADDRESS(dst)), "l"(src),
         "r"(valid ? 16 : 0)
         : "memory");
}
#define TC_COPY_COMMIT() TC_ASM("cp.async.commit_group;" ::: "memory")
// Waits until the oldest stage in flight has landed: STAGES-2 newer groups may still be pending.
#if STAGES == 2
#define TC_COPY_WAIT_PIPELINE() TC_ASM("cp.async.wait_group 0;" ::: "memory")
#elif STAGES == 3
#define TC_COPY_WAIT_PIPELINE() TC_ASM("cp.async.wait_group 1;" ::: "memory")
#else
#define TC_COPY_WAIT_PIPELINE() TC_ASM("cp.async.wait_group 2;" ::: "memory")
#endif
#define TC_COPY_WAIT_ALL() TC_ASM("cp.async.wait_group 0;" ::: "memory")
#endif

#if !TC_EMULATE
// ldmatrix moves 8x8 tiles of 16-bit elements; read as 32-bit words that is 8 rows x 4 words, lane l giving the
// address of row l%8 of tile l/8 and receiving word l%4 of row l/4 of each tile: for a K-contiguous tile that is an
// m16n8k8 TF32 fragment (lane g*4+t holds (row g, k t)), so one instruction replaces four (two) shared loads. Rows
// must be 16-byte aligned: every pitch here is a multiple of 4 floats.
DEVICE_FN void tc_ldmatrix_x4(float v[4], LOCAL const float* row) {
  tc_u32 r0, r1, r2, r3;
  TC_ASM("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
         : "r"(TC_SHARED_ADDRESS(row)));
  v[0] = TC_AS_FLOAT(r0), v[1] = TC_AS_FLOAT(r1), v[2] = TC_AS_FLOAT(r2), v[3] = TC_AS_FLOAT(r3);
}
DEVICE_FN void tc_ldmatrix_x2(float v[2], LOCAL const float* row) {
  tc_u32 r0, r1;
  TC_ASM("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(TC_SHARED_ADDRESS(row)));
  v[0] = TC_AS_FLOAT(r0), v[1] = TC_AS_FLOAT(r1);
}
#endif

// acc[i][j] += a[i] * b[j] for the warp's TC_MI x TC_NI MMA tiles (fragments already TF32). `scratch` is only used
// by the emulation: TC_THREADS * TC_FRAGMENT_WORDS words of local memory.
#define TC_FRAGMENT_WORDS (TC_MI * 4 + TC_NI * 2)
DEVICE_FN void tc_warp_mma(float acc[TC_MI][TC_NI][4], tc_u32 a[TC_MI][4], tc_u32 b[TC_NI][2],
                           LOCAL tc_u32* scratch, int warp, int lane) {
#if TC_EMULATE
  // Every lane publishes its fragments, then computes its accumulators from the lanes that hold each operand,
  // following the PTX fragment layouts: A (row, k) is in lane (row%8)*4 + k%4, register (row/8) + 2*(k/4);
  // B (k, col) in lane col*4 + k%4, register k/4.
  LOCAL tc_u32* mine = scratch + warp * 32 * TC_FRAGMENT_WORDS;
  for (int i = 0; i < TC_MI; ++i)
    for (int r = 0; r < 4; ++r) mine[(i * 4 + r) * 32 + lane] = a[i][r];
  for (int j = 0; j < TC_NI; ++j)
    for (int r = 0; r < 2; ++r) mine[(TC_MI * 4 + j * 2 + r) * 32 + lane] = b[j][r];
  BARRIER();
  const int g = lane >> 2, t = lane & 3;
  for (int i = 0; i < TC_MI; ++i)
    for (int j = 0; j < TC_NI; ++j)
      for (int r = 0; r < 4; ++r) {
        const int row = g + 8 * (r >> 1), col = 2 * t + (r & 1);
        float sum = acc[i][j][r];
        for (int k = 0; k < 8; ++k) {
          const float av = TC_AS_FLOAT(mine[(i * 4 + (row >> 3) + 2 * (k >> 2)) * 32 + (row & 7) * 4 + (k & 3)]);
          const float bv = TC_AS_FLOAT(mine[(TC_MI * 4 + j * 2 + (k >> 2)) * 32 + col * 4 + (k & 3)]);
          sum = FMA(av, bv, sum);
        }
        acc[i][j][r] = sum;
      }
  BARRIER();
#else
  (void)scratch, (void)warp, (void)lane;
  TC_UNROLL
  for (int i = 0; i < TC_MI; ++i) {
    TC_UNROLL
    for (int j = 0; j < TC_NI; ++j) {
      TC_ASM("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
             "{%0,%1,%2,%3};"
             : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
             : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
  }
#endif
}

// The product of one stage: TILE_K/8 steps of fragments read from shared memory (ldmatrix from K-contiguous
// tiles, plain loads from the others), rounded to TF32 (and split, MATH_SPLIT=1), multiplied on the tensor cores.
DEVICE_FN void tc_stage_mma(float acc[TC_MI][TC_NI][4], LOCAL const float* as, LOCAL const float* bs, int wm0, int wn0,
                            int lane, int warp, LOCAL tc_u32* scratch) {
  const int g = lane >> 2, t = lane & 3;
  (void)g, (void)t;  // unused where both tiles are read by ldmatrix
  TC_UNROLL
  for (int kk = 0; kk < TILE_K; kk += 8) {
    tc_u32 a_big[TC_MI][4], b_big[TC_NI][2];
#if MATH_SPLIT
    tc_u32 a_small[TC_MI][4], b_small[TC_NI][2];
#endif
    TC_UNROLL
    for (int i = 0; i < TC_MI; ++i) {
      float v[4];
#if TC_A_KCONTIG && !TC_EMULATE
      // Tiles (rows 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7): a0..a3.
      tc_ldmatrix_x4(v, &TC_A_AT(as, wm0 + i * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), kk + 4 * (lane >> 4)));
#else
      const int m = wm0 + i * 16 + g;
      v[0] = TC_A_AT(as, m, kk + t);
      v[1] = TC_A_AT(as, m + 8, kk + t);
      v[2] = TC_A_AT(as, m, kk + t + 4);
      v[3] = TC_A_AT(as, m + 8, kk + t + 4);
#endif
      TC_UNROLL
      for (int r = 0; r < 4; ++r) {
        a_big[i][r] = tc_to_tf32(v[r]);
#if MATH_SPLIT
        a_small[i][r] = tc_to_tf32(v[r] - TC_AS_FLOAT(a_big[i][r]));
#endif
      }
    }
    TC_UNROLL
    for (int j = 0; j < TC_NI; ++j) {
      float v[2];
#if TC_B_KCONTIG && !TC_EMULATE
      // Tiles (columns 0-7, k 0-3), (columns 0-7, k 4-7): b0, b1 (lanes 16-31's addresses are ignored by .x2).
      tc_ldmatrix_x2(v, &TC_B_AT(bs, kk + 4 * ((lane >> 3) & 1), wn0 + j * 8 + (lane & 7)));
#else
      const int n = wn0 + j * 8 + g;
      v[0] = TC_B_AT(bs, kk + t, n);
      v[1] = TC_B_AT(bs, kk + t + 4, n);
#endif
      TC_UNROLL
      for (int r = 0; r < 2; ++r) {
        b_big[j][r] = tc_to_tf32(v[r]);
#if MATH_SPLIT
        b_small[j][r] = tc_to_tf32(v[r] - TC_AS_FLOAT(b_big[j][r]));
#endif
      }
    }
#if MATH_SPLIT
    // Small products first, so they are not lost beside the big one (CUTLASS's order).
    tc_warp_mma(acc, a_small, b_big, scratch, warp, lane);
    tc_warp_mma(acc, a_big, b_small, scratch, warp, lane);
#endif
    tc_warp_mma(acc, a_big, b_big, scratch, warp, lane);
  }
}

#endif  // CONVTUNE_TC_COMMON_H
