// Test kernel for the tuner's candidate checks: a 1x1, one-channel forward convolution (y = w[0] * x) that is
// computed right for MODE 0, wrongly for MODE 1, and does not compile for MODE 2.
#if MODE == 2
#error "this candidate does not compile (on purpose)"
#endif

__kernel void fake_convolution(__global const float* x, __global const float* w, __global float* y, const int n) {
  const int i = (int)get_global_id(0);
  if (i < n) y[i] = w[0] * x[i] + (MODE == 1 ? 0.5f : 0.0f);
}
