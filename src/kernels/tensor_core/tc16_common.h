// Tensor-core building blocks of the 16-bit kernels (gemm_tc16.cl, implicit_gemm_tc16.cl): BF16 or FP16 tensors
// (ELEM_BF16 1 or 0) multiplied by mma.sync m16n8k16 with FP32 accumulators, fragments read by ldmatrix (.trans for
// tiles whose rows run along M or N), copies global -> shared by cp.async where 4 or 16 bytes stay aligned and
// through registers elsewhere (tc16_mainloop.h), FP32 -> 16-bit conversion with round-to-nearest-even for the
// stores; or all of it in plain OpenCL C with TC_EMULATE=1 (PoCL runs the kernels' indexing, layouts and pipeline;
// tests/families/tensor_core_test.cpp). The TF32 kernels keep their own tc_common.h: their source hashes key the
// shipped tuning entries.
//
// A block of WARPS_M x WARPS_N warps computes a TILE_M x TILE_N tile of C = A * B; warp w owns the warp tile at row
// (w / WARPS_N), column (w % WARPS_N), made of TC_MI x TC_NI m16n8 MMA tiles, 4 FP32 accumulators per thread each
// (lane g*4+t: rows g and g+8, columns 2t and 2t+1). Shared memory holds STAGES stages of an A and a B tile in 16-bit
// elements; each keeps the dimension contiguous in global memory contiguous ("K-contiguous" [rows][TILE_K], else
// [TILE_K][rows]). ldmatrix reads 8 rows of 16 bytes per 8x8 matrix: SMEM_PADDING=1 adds 8 elements (16 bytes) to
// every row, making the pitch an odd multiple of 16 bytes, so those 8 rows fall in 8 distinct 16-byte bank groups.
#ifndef CONVTUNE_TC16_COMMON_H
#define CONVTUNE_TC16_COMMON_H

#include "common/compat.h"

#ifndef TC_EMULATE
#define TC_EMULATE 0
#endif

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
#define TC_PAD (SMEM_PADDING ? 8 : 0)

#if TC_A_KCONTIG
#define TC_A_PITCH (TILE_K + TC_PAD)
#define TC_A_STAGE (TILE_M * TC_A_PITCH)
#define TC_A_AT(s, m, k) (s)[(m) * TC_A_PITCH + (k)]
#else
#define TC_A_PITCH (TILE_M + TC_PAD)
#define TC_A_STAGE (TILE_K * TC_A_PITCH)
#define TC_A_AT(s, m, k) (s)[(k) * TC_A_PITCH + (m)]
#endif
#if TC_B_KCONTIG
#define TC_B_PITCH (TILE_K + TC_PAD)
#define TC_B_STAGE (TILE_N * TC_B_PITCH)
#define TC_B_AT(s, k, n) (s)[(n) * TC_B_PITCH + (k)]
#else
#define TC_B_PITCH (TILE_N + TC_PAD)
#define TC_B_STAGE (TILE_K * TC_B_PITCH)
#define TC_B_AT(s, k, n) (s)[(k) * TC_B_PITCH + (n)]
#endif
#define TC_STAGE_ELEMENTS (TC_A_STAGE + TC_B_STAGE)
#define TC_SMEM_ELEMENTS (STAGES * TC_STAGE_ELEMENTS)

#define TC_ACC_ROW(i, r) (tc_wm0 + (i) * 16 + tc_g + 8 * ((r) >> 1))
#define TC_ACC_COL(j, r) (tc_wn0 + (j) * 8 + 2 * tc_t + ((r) & 1))

#ifdef __OPENCL_VERSION__
#define TC_ATTRIBUTES __attribute__((reqd_work_group_size(TC_THREADS, 1, 1)))
#define TC_ASM __asm__ __volatile__
#define TC_AS_FLOAT(u) as_float(u)
#define TC_AS_UINT(f) as_uint(f)
#define TC_SHARED_ADDRESS(p) ((uint)(ulong)(p))
typedef uint tc_u32;
typedef ushort tc_h16;
#else
#define TC_ATTRIBUTES __launch_bounds__(TC_THREADS, BLOCKS_PER_SM)
#define TC_ASM asm volatile
#define TC_AS_FLOAT(u) __uint_as_float(u)
#define TC_AS_UINT(f) __float_as_uint(f)
#define TC_SHARED_ADDRESS(p) ((unsigned)__cvta_generic_to_shared(p))
typedef unsigned tc_u32;
typedef unsigned short tc_h16;
#endif

// ---- 16-bit <-> FP32 ----
// Widening is exact. Narrowing rounds to nearest, ties to even (as the host's fp32_to_bf16/fp32_to_fp16 in
// src/core/rounding.cpp): PTX's cvt.rn on the GPU, the same rounding on the bit patterns in the emulation.
DEVICE_FN float tc16_to_float(tc_h16 h) {
#if ELEM_BF16
  return TC_AS_FLOAT((tc_u32)h << 16);
#else
  const tc_u32 sign = (tc_u32)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return TC_AS_FLOAT(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0u) {  // zero or subnormal: mantissa x 2^-24
    const float magnitude = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return TC_AS_FLOAT(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}

#if TC_EMULATE
DEVICE_FN tc_u32 tc16_round_bits(tc_u32 u, int dropped) {
  const tc_u32 below_half = (1u << (dropped - 1)) - 1u, lsb = (u >> dropped) & 1u;
  return (u + below_half + lsb) & ~((1u << dropped) - 1u);
}
DEVICE_FN tc_h16 tc16_from_float(float x) {
  const tc_u32 u = TC_AS_UINT(x);
#if ELEM_BF16
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (tc_h16)((u >> 16) | 0x40u);
  return (tc_h16)(tc16_round_bits(u, 16) >> 16);
#else
  const tc_u32 sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (tc_h16)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return (tc_h16)(sign | 0x7C00u);
  if (a >= 0x38800000u) return (tc_h16)(sign | (tc16_round_bits(a - 0x38000000u, 13) >> 13));
  if (a <= 0x33000000u) return (tc_h16)sign;
  const tc_u32 exponent = a >> 23, mantissa = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = (int)(126u - exponent);
  tc_u32 q = mantissa >> shift;
  const tc_u32 rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
  return (tc_h16)(sign | q);
#endif
}
#else
DEVICE_FN tc_h16 tc16_from_float(float x) {
  tc_u32 packed;  // the x2 form takes 32-bit registers only (what both compilers' inline PTX accept): x in the low half
#if ELEM_BF16
  TC_ASM("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(x));
#else
  TC_ASM("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(x));
#endif
  return (tc_h16)(packed & 0xFFFFu);
}
#endif

// ---- copies global -> shared ----
#if TC_EMULATE
DEVICE_FN void tc16_copy_bytes(LOCAL tc_h16* dst, const GLOBAL tc_h16* src, bool valid, int elements) {
  for (int i = 0; i < elements; ++i) dst[i] = valid ? src[i] : (tc_h16)0;
}
#define TC_COPY_COMMIT()
#define TC_COPY_WAIT_PIPELINE()
#define TC_COPY_WAIT_ALL()
#else
// 2 or 8 elements (4 or 16 bytes, aligned), zero-filled when !valid (source size 0: nothing is read).
DEVICE_FN void tc16_copy_bytes(LOCAL tc_h16* dst, const GLOBAL tc_h16* src, bool valid, int elements) {
  if (elements == 8) {
    TC_ASM("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(TC_SHARED_ADDRESS(dst)), "l"(src),
           "r"(valid ? 16 : 0)
           : "memory");
  } else {
    TC_ASM("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(TC_SHARED_ADDRESS(dst)), "l"(src), "r"(valid ? 4 : 0)
           : "memory");
  }
}
#define TC_COPY_COMMIT() TC_ASM("cp.async.commit_group;" ::: "memory")
#if STAGES == 2
#define TC_COPY_WAIT_PIPELINE() TC_ASM("cp.async.wait_group 0;" ::: "memory")
#elif STAGES == 3
#define TC_COPY_WAIT_PIPELINE() TC_ASM("cp.async.wait_group 1;" ::: "memory")
#else
#define TC_COPY_WAIT_PIPELINE() TC_ASM("cp.async.wait_group 2;" ::: "memory")
#endif
#define TC_COPY_WAIT_ALL() TC_ASM("cp.async.wait_group 0;" ::: "memory")
#endif

// ---- fragments ----
#if !TC_EMULATE
// Lane l gives the address of row l%8 of matrix l/8 and receives, of each 8x8 matrix of 16-bit elements, row l/4's
// elements 2(l%4) and 2(l%4)+1 in one 32-bit register (the first in the low half); .trans gives it column l/4's
// instead, rows 2(l%4) and 2(l%4)+1.
DEVICE_FN void tc16_ldmatrix_x4(tc_u32 v[4], LOCAL const tc_h16* row) {
  TC_ASM("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
         : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
         : "r"(TC_SHARED_ADDRESS(row)));
}
DEVICE_FN void tc16_ldmatrix_x4_trans(tc_u32 v[4], LOCAL const tc_h16* row) {
  TC_ASM("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
         : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
         : "r"(TC_SHARED_ADDRESS(row)));
}
DEVICE_FN void tc16_ldmatrix_x2(tc_u32 v[2], LOCAL const tc_h16* row) {
  TC_ASM("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "r"(TC_SHARED_ADDRESS(row)));
}
DEVICE_FN void tc16_ldmatrix_x2_trans(tc_u32 v[2], LOCAL const tc_h16* row) {
  TC_ASM("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
         : "=r"(v[0]), "=r"(v[1])
         : "r"(TC_SHARED_ADDRESS(row)));
}
#endif

DEVICE_FN tc_u32 tc16_pack(tc_h16 low, tc_h16 high) { return (tc_u32)low | ((tc_u32)high << 16); }

// acc[i][j] += a[i] * b[j] over one k16 step for the warp's MMA tiles. Fragments (m16n8k16): A (row, k) is in lane
// (row%8)*4 + (k%8)/2, register (row/8) + 2*(k/8), half k%2; B (k, col) in lane col*4 + (k%8)/2, register k/8, half
// k%2. `scratch` is only used by the emulation: TC_THREADS * TC_FRAGMENT_WORDS words of local memory.
#define TC_FRAGMENT_WORDS (TC_MI * 4 + TC_NI * 2)
DEVICE_FN void tc16_warp_mma(float acc[TC_MI][TC_NI][4], tc_u32 a[TC_MI][4], tc_u32 b[TC_NI][2],
                             LOCAL tc_u32* scratch, int warp, int lane) {
#if TC_EMULATE
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
        for (int k = 0; k < 16; ++k) {
          const tc_u32 aw = mine[(i * 4 + (row >> 3) + 2 * (k >> 3)) * 32 + (row & 7) * 4 + ((k & 7) >> 1)];
          const tc_u32 bw = mine[(TC_MI * 4 + j * 2 + (k >> 3)) * 32 + col * 4 + ((k & 7) >> 1)];
          const float av = tc16_to_float((tc_h16)((k & 1) ? aw >> 16 : aw & 0xFFFFu));
          const float bv = tc16_to_float((tc_h16)((k & 1) ? bw >> 16 : bw & 0xFFFFu));
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
#if ELEM_BF16
      TC_ASM("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
             "{%0,%1,%2,%3};"
             : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
             : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
#else
      TC_ASM("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
             "{%0,%1,%2,%3};"
             : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
             : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
#endif
    }
  }
#endif
}

// The product of one stage: TILE_K/16 steps of fragments read from shared memory (ldmatrix on the GPU, plain reads
// in the emulation), multiplied on the tensor cores.
DEVICE_FN void tc16_stage_mma(float acc[TC_MI][TC_NI][4], LOCAL const tc_h16* as, LOCAL const tc_h16* bs, int wm0,
                              int wn0, int lane, int warp, LOCAL tc_u32* scratch) {
  const int g = lane >> 2, t = lane & 3;
  (void)g, (void)t;
  TC_UNROLL
  for (int kk = 0; kk < TILE_K; kk += 16) {
    tc_u32 a[TC_MI][4], b[TC_NI][2];
    TC_UNROLL
    for (int i = 0; i < TC_MI; ++i) {
#if TC_EMULATE
      const int m = wm0 + i * 16 + g;
      a[i][0] = tc16_pack(TC_A_AT(as, m, kk + 2 * t), TC_A_AT(as, m, kk + 2 * t + 1));
      a[i][1] = tc16_pack(TC_A_AT(as, m + 8, kk + 2 * t), TC_A_AT(as, m + 8, kk + 2 * t + 1));
      a[i][2] = tc16_pack(TC_A_AT(as, m, kk + 2 * t + 8), TC_A_AT(as, m, kk + 2 * t + 9));
      a[i][3] = tc16_pack(TC_A_AT(as, m + 8, kk + 2 * t + 8), TC_A_AT(as, m + 8, kk + 2 * t + 9));
#elif TC_A_KCONTIG
      // Matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15): a0..a3.
      tc16_ldmatrix_x4(a[i], &TC_A_AT(as, wm0 + i * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), kk + 8 * (lane >> 4)));
#else
      // Stored [k][m]: the same four matrices transposed; lane l addresses k row (l%8) + 8(l/16) at column 8((l/8)%2).
      tc16_ldmatrix_x4_trans(a[i], &TC_A_AT(as, wm0 + i * 16 + 8 * ((lane >> 3) & 1), kk + (lane & 7) + 8 * (lane >> 4)));
#endif
    }
#if TC_EMULATE
    TC_UNROLL
    for (int j = 0; j < TC_NI; ++j) {
      const int n = wn0 + j * 8 + g;
      b[j][0] = tc16_pack(TC_B_AT(bs, kk + 2 * t, n), TC_B_AT(bs, kk + 2 * t + 1, n));
      b[j][1] = tc16_pack(TC_B_AT(bs, kk + 2 * t + 8, n), TC_B_AT(bs, kk + 2 * t + 9, n));
    }
#else
    // Two n8 tiles per ldmatrix.x4 where the warp has an even number of them, one per .x2 otherwise.
    TC_UNROLL
    for (int j = 0; j < TC_NI; j += (TC_NI % 2 == 0 ? 2 : 1)) {
      if (TC_NI % 2 == 0) {
        tc_u32 v[4];
#if TC_B_KCONTIG
        // Matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): b[j][0..1], b[j+1][0..1].
        tc16_ldmatrix_x4(v, &TC_B_AT(bs, kk + 8 * ((lane >> 3) & 1), wn0 + j * 8 + (lane & 7) + 8 * (lane >> 4)));
#else
        // Stored [k][n]: transposed; lane l addresses k row (l%8) + 8((l/8)%2) at column 8(l/16).
        tc16_ldmatrix_x4_trans(v, &TC_B_AT(bs, kk + (lane & 7) + 8 * ((lane >> 3) & 1), wn0 + j * 8 + 8 * (lane >> 4)));
#endif
        b[j][0] = v[0], b[j][1] = v[1];
        b[j + 1 < TC_NI ? j + 1 : j][0] = v[2], b[j + 1 < TC_NI ? j + 1 : j][1] = v[3];
      } else {
#if TC_B_KCONTIG
        tc16_ldmatrix_x2(b[j], &TC_B_AT(bs, kk + 8 * ((lane >> 3) & 1), wn0 + j * 8 + (lane & 7)));
#else
        tc16_ldmatrix_x2_trans(b[j], &TC_B_AT(bs, kk + (lane & 7) + 8 * ((lane >> 3) & 1), wn0 + j * 8));
#endif
      }
    }
#endif
    tc16_warp_mma(acc, a, b, scratch, warp, lane);
  }
}

#endif  // CONVTUNE_TC16_COMMON_H
