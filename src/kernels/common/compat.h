// One kernel source for OpenCL C and CUDA (NVRTC): the few words that differ between the two, as macros.
// A kernel file that includes this compiles under both; a GPU-specific variant lives beside it as .cu.
#ifndef CONVTUNE_COMPAT_H
#define CONVTUNE_COMPAT_H

#ifdef __OPENCL_VERSION__
#define KERNEL __kernel
#define GLOBAL __global
#define LOCAL __local
#define LOCAL_ARRAY __local
#define RESTRICT restrict
#define DEVICE_FN inline
#define GLOBAL_ID(d) ((long)get_global_id(d))
#define LOCAL_ID(d) ((int)get_local_id(d))
#define GROUP_ID(d) ((long)get_group_id(d))
#define LOCAL_SIZE(d) ((int)get_local_size(d))
#define GLOBAL_SIZE(d) ((long)get_global_size(d))
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define FMA(a, b, c) fma((a), (b), (c))
typedef float4 vec4;
#define MAKE_VEC4(x) ((float4)(x))
typedef float2 vec2;
#define MAKE_VEC2(x) ((float2)(x))
// Vector access of p[i .. i+n-1]; callers keep i a multiple of n so CUDA's aligned access is legal too.
#define VLOAD2(p, i) vload2(0, (p) + (i))
#define VLOAD4(p, i) vload4(0, (p) + (i))
#define VSTORE2(v, p, i) vstore2((v), 0, (p) + (i))
#define VSTORE4(v, p, i) vstore4((v), 0, (p) + (i))
#define MAKE_FLOAT2(a, b) ((float2)((a), (b)))
#define MAKE_FLOAT4(a, b, c, d) ((float4)((a), (b), (c), (d)))
#else  // CUDA through NVRTC
#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL
#define LOCAL_ARRAY __shared__
#define RESTRICT __restrict__
#define DEVICE_FN __device__ inline
__device__ inline unsigned cvt_dim_(int d, unsigned x, unsigned y, unsigned z) { return d == 0 ? x : d == 1 ? y : z; }
#define LOCAL_ID(d) ((int)cvt_dim_((d), threadIdx.x, threadIdx.y, threadIdx.z))
#define GROUP_ID(d) ((long)cvt_dim_((d), blockIdx.x, blockIdx.y, blockIdx.z))
#define LOCAL_SIZE(d) ((int)cvt_dim_((d), blockDim.x, blockDim.y, blockDim.z))
#define GLOBAL_ID(d) (GROUP_ID(d) * LOCAL_SIZE(d) + LOCAL_ID(d))
#define GLOBAL_SIZE(d) ((long)cvt_dim_((d), gridDim.x, gridDim.y, gridDim.z) * LOCAL_SIZE(d))
#define BARRIER() __syncthreads()
#define FMA(a, b, c) fmaf((a), (b), (c))
typedef float4 vec4;
#define MAKE_VEC4(x) make_float4((x), (x), (x), (x))
typedef float2 vec2;
#define MAKE_VEC2(x) make_float2((x), (x))
#define VLOAD2(p, i) (*(const float2*)((p) + (i)))
#define VLOAD4(p, i) (*(const float4*)((p) + (i)))
#define VSTORE2(v, p, i) (*(float2*)((p) + (i)) = (v))
#define VSTORE4(v, p, i) (*(float4*)((p) + (i)) = (v))
#define MAKE_FLOAT2(a, b) make_float2((a), (b))
#define MAKE_FLOAT4(a, b, c, d) make_float4((a), (b), (c), (d))
#endif

// Loop unrolling hints; both compilers take the clang/NVCC pragma spelling.
#define PRAGMA_UNROLL _Pragma("unroll")
#define PRAGMA_NO_UNROLL _Pragma("unroll 1")

#endif  // CONVTUNE_COMPAT_H
