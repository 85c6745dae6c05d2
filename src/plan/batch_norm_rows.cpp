// The FP32 inner loops of the CPU backend's batch norm (batch_norm_rows.h): simple loops over restrict pointers that
// GCC vectorises, cloned per ISA (target_clones) since the library is built for baseline x86-64.
#include "src/plan/batch_norm_rows.h"

namespace convtune::bn_rows {

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CONVTUNE_BN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CONVTUNE_BN_CLONES
#endif

namespace {

constexpr int kLanes = 16;

// Whether the gradient passes at a: everywhere without a ReLU, strictly inside (0, hi) with one (a select, so the
// loops stay branch-free).
inline bool open_at(float a, float hi) { return (a > 0.0f) & (a < hi); }

}  // namespace

CONVTUNE_BN_CLONES
void plane_sums(const float* __restrict y, int64_t count, float shift, float* __restrict s1, float* __restrict s2) {
  float l1[kLanes], l2[kLanes];
  for (int l = 0; l < kLanes; ++l) l1[l] = s1[l], l2[l] = s2[l];
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float v = y[i + l] - shift;
      l1[l] += v;
      l2[l] += v * v;
    }
  for (int l = 0; i < count; ++i, ++l) {
    const float v = y[i] - shift;
    l1[l] += v;
    l2[l] += v * v;
  }
  for (int l = 0; l < kLanes; ++l) s1[l] = l1[l], s2[l] = l2[l];
}

CONVTUNE_BN_CLONES
void plane_grad_sums(const float* __restrict da, const float* __restrict a, const float* __restrict y, int64_t count,
                     float mean, Mask mask, float* __restrict s1, float* __restrict s2) {
  float l1[kLanes], l2[kLanes];
  for (int l = 0; l < kLanes; ++l) l1[l] = s1[l], l2[l] = s2[l];
  const float hi = mask.hi;
  int64_t i = 0;
  if (mask.relu) {
    for (; i + kLanes <= count; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float dz = open_at(a[i + l], hi) ? da[i + l] : 0.0f;
        l1[l] += dz;
        l2[l] += dz * (y[i + l] - mean);
      }
  } else {
    for (; i + kLanes <= count; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float dz = da[i + l];
        l1[l] += dz;
        l2[l] += dz * (y[i + l] - mean);
      }
  }
  for (int l = 0; i < count; ++i, ++l) {
    const float dz = !mask.relu || open_at(a[i], hi) ? da[i] : 0.0f;
    l1[l] += dz;
    l2[l] += dz * (y[i] - mean);
  }
  for (int l = 0; l < kLanes; ++l) s1[l] = l1[l], s2[l] = l2[l];
}

CONVTUNE_BN_CLONES
void row_sums(const float* __restrict y, int64_t c, const float* __restrict shift, float* __restrict s1,
              float* __restrict s2) {
  for (int64_t k = 0; k < c; ++k) {
    const float v = y[k] - shift[k];
    s1[k] += v;
    s2[k] += v * v;
  }
}

CONVTUNE_BN_CLONES
void row_grad_sums(const float* __restrict da, const float* __restrict a, const float* __restrict y, int64_t c,
                   const float* __restrict mean, Mask mask, float* __restrict s1, float* __restrict s2) {
  const float hi = mask.hi;
  if (mask.relu) {
    for (int64_t k = 0; k < c; ++k) {
      const float dz = open_at(a[k], hi) ? da[k] : 0.0f;
      s1[k] += dz;
      s2[k] += dz * (y[k] - mean[k]);
    }
  } else {
    for (int64_t k = 0; k < c; ++k) {
      s1[k] += da[k];
      s2[k] += da[k] * (y[k] - mean[k]);
    }
  }
}

CONVTUNE_BN_CLONES
void plane_apply(const float* __restrict y, const float* __restrict residual, float* __restrict out, int64_t count,
                 float scale, float shift, float lo, float hi) {
  if (residual != nullptr) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = y[i] * scale + shift + residual[i];
      out[i] = v < lo ? lo : (v > hi ? hi : v);
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      const float v = y[i] * scale + shift;
      out[i] = v < lo ? lo : (v > hi ? hi : v);
    }
  }
}

CONVTUNE_BN_CLONES
void row_apply(const float* __restrict y, const float* __restrict residual, float* __restrict out, int64_t c,
               const float* __restrict scale, const float* __restrict shift, float lo, float hi) {
  if (residual != nullptr) {
    for (int64_t k = 0; k < c; ++k) {
      const float v = y[k] * scale[k] + shift[k] + residual[k];
      out[k] = v < lo ? lo : (v > hi ? hi : v);
    }
  } else {
    for (int64_t k = 0; k < c; ++k) {
      const float v = y[k] * scale[k] + shift[k];
      out[k] = v < lo ? lo : (v > hi ? hi : v);
    }
  }
}

CONVTUNE_BN_CLONES
void plane_grad(const float* __restrict da, const float* __restrict a, const float* __restrict y, float* __restrict dy,
                float* __restrict dresidual, int64_t count, GradCoeffs k, Mask mask) {
  const float hi = mask.hi;
  for (int64_t i = 0; i < count; ++i) {
    const float dz = !mask.relu || open_at(a[i], hi) ? da[i] : 0.0f;
    dy[i] = k.c0 * dz + (k.c1 * (y[i] - k.mean) + k.c2);
  }
  if (dresidual != nullptr) {
    for (int64_t i = 0; i < count; ++i) dresidual[i] = !mask.relu || open_at(a[i], hi) ? da[i] : 0.0f;
  }
}

CONVTUNE_BN_CLONES
void row_grad(const float* __restrict da, const float* __restrict a, const float* __restrict y, float* __restrict dy,
              float* __restrict dresidual, int64_t c, const float* __restrict mean, const float* __restrict c0,
              const float* __restrict c1, const float* __restrict c2, Mask mask) {
  const float hi = mask.hi;
  for (int64_t k = 0; k < c; ++k) {
    const float dz = !mask.relu || open_at(a[k], hi) ? da[k] : 0.0f;
    dy[k] = c0[k] * dz + (c1[k] * (y[k] - mean[k]) + c2[k]);
  }
  if (dresidual != nullptr) {
    for (int64_t k = 0; k < c; ++k) dresidual[k] = !mask.relu || open_at(a[k], hi) ? da[k] : 0.0f;
  }
}

}  // namespace convtune::bn_rows
