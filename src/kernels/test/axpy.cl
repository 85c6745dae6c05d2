// Test kernel for the backends: y = SCALE * a * x + y, one work-item per element, bounds-checked so the global
// size may be rounded up to a multiple of the work-group size.
#ifndef SCALE
#define SCALE 1.0f  // compile-time factor, to show -D parameters reach the compiler
#endif

__kernel void axpy(__global const float* x, __global float* y, const float a, const int n) {
  const int i = (int)get_global_id(0);
  if (i < n) y[i] = (SCALE) * a * x[i] + y[i];
}
