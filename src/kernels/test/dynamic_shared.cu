// Reverses one block's worth of floats through dynamic shared memory: tests launches that need more shared
// memory than the 48 KiB a block gets without opting in.

// One block; its dynamic shared memory holds `count` floats, each of the blockDim.x threads moving several.
extern "C" __global__ void reverse_through_shared(const float* input, float* output, int count) {
  extern __shared__ float staged[];
  for (int i = threadIdx.x; i < count; i += blockDim.x) staged[i] = input[i];
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) output[i] = staged[count - 1 - i];
}
