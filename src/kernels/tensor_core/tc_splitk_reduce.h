// The split-K sum of the tensor-core kernels, included at the end of a kernel file: element i of slice s of the
// workspace is partial[s * TC_REDUCE_ELEMENTS + i]; the kernel file defines TC_REDUCE_ELEMENTS, TC_REDUCE_ARGS (the
// arguments after the workspace) and TC_REDUCE_STORE(i, sum). Slices are added in order, so results are deterministic.
#if SPLIT_K > 1
KERNEL void tc_splitk_reduce(const GLOBAL float* RESTRICT partial, TC_REDUCE_ARGS) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)TC_REDUCE_ELEMENTS) return;
  float sum = 0.0f;
  for (int s = 0; s < SPLIT_K; ++s) sum += partial[(long)s * TC_REDUCE_ELEMENTS + i];
  TC_REDUCE_STORE(i, sum);
}
#endif
