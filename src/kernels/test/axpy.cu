// y[i] = alpha * x[i] + y[i]: the smallest real kernel, for backend tests of build, arguments and launch.

// Launched with the grid rounded up to whole blocks, so threads past n must do nothing.
extern "C" __global__ void axpy(int n, float alpha, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}
