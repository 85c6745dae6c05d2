// Hopper's warpgroup tensor-core instructions for the wgmma kernels (gemm_wgmma.cu, im2col_wgmma.cu), CUDA only
// (sm_90a: NVRTC builds them for the arch-specific target; NVIDIA's OpenCL has no such target):
//   C[m][n] = sum_k A[m][k] * B[n][k], both operands K-major ("TN"), FP32 accumulators; ELEM 0 BF16, 1 FP16, 2 TF32
//   (FP32 storage; the tensor cores read the top 19 bits of each value).
// A block of WG_M warpgroups (128 threads each) computes a (64 WG_M) x BLOCK_N tile: warpgroup w its rows 64w ..
// 64w+63 with one m64nBLOCK_N wgmma per reduction step, all of B. Each stage of shared memory holds the A and B tiles
// of WG_TILE_K reduction elements: rows of 128 bytes in the canonical 128-byte-swizzled K-major layout (16-byte chunk c
// of row r at chunk c ^ (r % 8); 8-row groups 1024 bytes apart), filled by 16-byte cp.async copies (zero-filled past
// the matrix). The descriptor of reduction step s starts 32 bytes further into the rows; the hardware applies the
// swizzle from the address bits, so every stage starts on a 1024-byte boundary.
//
// Pipeline (wg_mainloop.h): STAGES stages, the copies running STAGES-2 tiles ahead. At tile t every thread waits for
// its copies of tile t, fences them into the async proxy (wgmma reads shared memory through it), and the barrier
// makes all of them visible; every warpgroup has by then waited for its MMAs of tile t-2, so tile t+STAGES-2's copies
// go into that stage. Then tile t's MMAs are issued asynchronously and the warpgroup waits for those of tile t-1.
#ifndef CONVTUNE_WGMMA_H
#define CONVTUNE_WGMMA_H

#ifdef __OPENCL_VERSION__
#error "the wgmma kernels are CUDA only (sm_90a)"
#endif

#include "common/compat.h"
#include "tensor_core/wgmma_mma.h"

#if ELEM == 2
typedef float wg_elem;
#define WG_ELEM_BYTES 4
#define WG_K_STEP 8
#define WG_MMA_NAME(n) wgmma_tf32_n##n
#elif ELEM == 1
typedef unsigned short wg_elem;
#define WG_ELEM_BYTES 2
#define WG_K_STEP 16
#define WG_MMA_NAME(n) wgmma_f16_n##n
#else
typedef unsigned short wg_elem;
#define WG_ELEM_BYTES 2
#define WG_K_STEP 16
#define WG_MMA_NAME(n) wgmma_bf16_n##n
#endif
#define WG_MMA_OF(n) WG_MMA_NAME(n)
#define WG_MMA WG_MMA_OF(BLOCK_N)

#define WG_TILE_K (128 / WG_ELEM_BYTES)  // reduction elements per stage: one 128-byte swizzled row
#define WG_CHUNK (16 / WG_ELEM_BYTES)    // elements per 16-byte copy
#define WG_THREADS (128 * WG_M)
#define WG_BLOCK_M (64 * WG_M)
#define WG_A_STAGE_BYTES (WG_BLOCK_M * 128)
#define WG_B_STAGE_BYTES (BLOCK_N * 128)
#define WG_STAGE_BYTES (WG_A_STAGE_BYTES + WG_B_STAGE_BYTES)
#define WG_ACC (BLOCK_N / 2)  // FP32 accumulators per thread

// ---- 16-bit / FP32 conversions (round to nearest even on the way down, as the host does) ----
DEVICE_FN float wg_to_float(unsigned short h) {
#if ELEM == 1
  float f;
  asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
  return f;
#else
  return __uint_as_float((unsigned)h << 16);
#endif
}
DEVICE_FN float wg_to_float(float f) { return f; }
DEVICE_FN unsigned short wg_from_float_16(float x) {
  unsigned packed;
#if ELEM == 1
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(x));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(x));
#endif
  return (unsigned short)(packed & 0xFFFFu);
}
#if ELEM == 2
#define WG_FROM_FLOAT(x) (x)
#else
#define WG_FROM_FLOAT(x) wg_from_float_16(x)
#endif

// ---- shared memory, copies, descriptors, fences ----
DEVICE_FN unsigned wg_shared_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
// Byte offset of 16-byte chunk `chunk` of row `row` in a 128-byte-swizzled K-major tile.
DEVICE_FN unsigned wg_swizzle(int row, int chunk) { return (unsigned)(row * 128 + ((chunk ^ (row & 7)) << 4)); }
// 16 bytes global -> shared, zero-filled when !valid (source size 0: nothing is read).
DEVICE_FN void wg_copy16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
#define WG_COPY_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define WG_COPY_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
// Writes through the generic proxy (cp.async, st.shared) made visible to the async proxy wgmma reads through.
#define WG_FENCE_PROXY() asm volatile("fence.proxy.async.shared::cta;" ::: "memory")
#define WG_MMA_FENCE() asm volatile("wgmma.fence.sync.aligned;" ::: "memory")
#define WG_MMA_COMMIT() asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory")
#define WG_MMA_WAIT(n) asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(n) : "memory")

// The descriptor of a K-major, 128-byte-swizzled tile starting at shared address `addr` (1024-byte aligned, or a
// multiple of 32 bytes past such a start for later reduction steps): start address >> 4, leading byte offset unused
// (1), stride byte offset 1024 (8 rows of 128 bytes), layout type 1 (128-byte swizzle).
DEVICE_FN unsigned long long wg_descriptor(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
         (1ull << 62);
}

// The descriptor of an MN-major (transposed), 128-byte-swizzled 16-bit tile at `addr` (1024-byte aligned, or whole
// 16-row steps past such a start): each row holds 64 consecutive M (or N) elements of one reduction index, swizzled
// as wg_swizzle(k, chunk); 8 rows make a 1024-byte atom. Leading byte offset 8192: the next 64 M/N elements (the next
// 64-row block of a stage, whose tiles hold WG_TILE_K = 64 rows per 64 columns); stride byte offset 1024: the next 8
// reduction rows.
DEVICE_FN unsigned long long wg_descriptor_mn(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(8192 >> 4) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// Accumulator r (0..3) of n8 block j: rows and columns within the block tile (warpgroup wg, its warp wi, lane g*4+q).
#define WG_ACC_ROW(r) (wg_row0 + wg_g + 8 * ((r) >> 1))
#define WG_ACC_COL(j, r) (8 * (j) + 2 * wg_q + ((r) & 1))

#endif  // CONVTUNE_WGMMA_H
