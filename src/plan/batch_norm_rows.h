// The FP32 inner loops of the CPU backend's batch norm (batch_norm_host.cpp): one NCHW channel plane (coefficients
// of one channel) or one NHWC row (a channel's coefficients per value), compiled for AVX-512, AVX2 and baseline
// x86-64 and picked when the library loads. The arithmetic is the kernels' (kernels/common/batch_norm.cl), with
// multiply-adds unfused in every variant, so every CPU gives the same results.
#pragma once

#include <cstdint>

namespace convtune::bn_rows {

// The activation's gradient mask: the ReLU's output strictly inside (0, hi), everything without a ReLU.
struct Mask {
  bool relu = false;
  float hi = 0;
};

// Forward sums: lane l of s1 / s2 (16 lanes) gains (y[i] - shift) and its square for the i = l mod 16 of a plane.
void plane_sums(const float* y, int64_t count, float shift, float* s1, float* s2);
// Backward sums: dz = da where the mask is open, else 0; s1 gains dz, s2 dz (y - mean), lanes as plane_sums.
void plane_grad_sums(const float* da, const float* a, const float* y, int64_t count, float mean, Mask mask, float* s1,
                     float* s2);
// The same over one NHWC row of `c` channels, channel k into s1[k] / s2[k] with shift[k] / mean[k].
void row_sums(const float* y, int64_t c, const float* shift, float* s1, float* s2);
void row_grad_sums(const float* da, const float* a, const float* y, int64_t c, const float* mean, Mask mask, float* s1,
                   float* s2);

// out = clamp(y scale + shift (+ residual), lo, hi); residual may be null.
void plane_apply(const float* y, const float* residual, float* out, int64_t count, float scale, float shift, float lo,
                 float hi);
void row_apply(const float* y, const float* residual, float* out, int64_t c, const float* scale, const float* shift,
               float lo, float hi);

// dy = c0 dz + (c1 (y - mean) + c2) with dz as in the sums; dresidual (may be null) = dz.
struct GradCoeffs {
  float mean, c0, c1, c2;
};
void plane_grad(const float* da, const float* a, const float* y, float* dy, float* dresidual, int64_t count,
                GradCoeffs k, Mask mask);
// Per channel: mean[k], c0[k], c1[k], c2[k].
void row_grad(const float* da, const float* a, const float* y, float* dy, float* dresidual, int64_t c,
              const float* mean, const float* c0, const float* c1, const float* c2, Mask mask);

}  // namespace convtune::bn_rows
