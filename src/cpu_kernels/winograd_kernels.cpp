// Winograd F(4x4, 3x3) tile transforms for the CPU module, compiled per Highway target (AVX-512, AVX2, scalar):
// each works on a vector's worth of channels at once, as 1-D transforms over rows and then columns.
#include "src/cpu_kernels/hwy_targets.h"
// Highway re-includes this file once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/cpu_kernels/winograd_kernels.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include "src/cpu_kernels/microkernels.h"

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu_blocked::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// The points 0, 1, -1, 2, -2 and infinity (Lavin and Gray's F(4, 3)).
// B^T x: 6 -> 6 (input tiles).
HWY_INLINE void InputTransform(D d, const V* x, V* y) {
  const V c4 = hn::Set(d, 4.0f), c5 = hn::Set(d, 5.0f), c2 = hn::Set(d, 2.0f);
  y[0] = hn::Add(hn::NegMulAdd(c5, x[2], hn::Mul(c4, x[0])), x[4]);
  const V a = hn::Sub(x[4], hn::Mul(c4, x[2]));  // x4 - 4 x2
  const V b = hn::Sub(x[3], hn::Mul(c4, x[1]));  // x3 - 4 x1
  y[1] = hn::Add(a, b);
  y[2] = hn::Sub(a, b);
  const V e = hn::Sub(x[4], x[2]);               // x4 - x2
  const V f = hn::Mul(c2, hn::Sub(x[3], x[1]));  // 2 (x3 - x1)
  y[3] = hn::Add(e, f);
  y[4] = hn::Sub(e, f);
  y[5] = hn::Add(hn::NegMulAdd(c5, x[3], hn::Mul(c4, x[1])), x[5]);
}

// A^T m: 6 -> 4 (output tiles).
HWY_INLINE void OutputTransform(D d, const V* m, V* o) {
  const V c2 = hn::Set(d, 2.0f), c4 = hn::Set(d, 4.0f), c8 = hn::Set(d, 8.0f);
  const V s12 = hn::Add(m[1], m[2]), d12 = hn::Sub(m[1], m[2]);
  const V s34 = hn::Add(m[3], m[4]), d34 = hn::Sub(m[3], m[4]);
  o[0] = hn::Add(hn::Add(m[0], s12), s34);
  o[1] = hn::MulAdd(c2, d34, d12);
  o[2] = hn::MulAdd(c4, s34, s12);
  o[3] = hn::Add(hn::MulAdd(c8, d34, d12), m[5]);
}

// A v: 4 -> 6 (gradient tiles, backward-filter).
HWY_INLINE void GradientTransform(D d, const V* v, V* z) {
  const V c2 = hn::Set(d, 2.0f), c4 = hn::Set(d, 4.0f), c8 = hn::Set(d, 8.0f);
  const V s02 = hn::Add(v[0], v[2]), s13 = hn::Add(v[1], v[3]);
  z[0] = v[0];
  z[1] = hn::Add(s02, s13);
  z[2] = hn::Sub(s02, s13);
  const V e = hn::MulAdd(c4, v[2], v[0]);   // v0 + 4 v2
  const V f = hn::MulAdd(c8, v[3], hn::Mul(c2, v[1]));  // 2 v1 + 8 v3
  z[3] = hn::Add(e, f);
  z[4] = hn::Sub(e, f);
  z[5] = v[3];
}

// G^T m: 6 -> 3 (filter gradients, backward-filter).
HWY_INLINE void FilterTransform(D d, const V* m, V* r) {
  const V q = hn::Set(d, 0.25f), s = hn::Set(d, 1.0f / 6.0f), t = hn::Set(d, 1.0f / 12.0f),
          u = hn::Set(d, 1.0f / 24.0f);
  const V s12 = hn::Add(m[1], m[2]), d12 = hn::Sub(m[2], m[1]);
  const V s34 = hn::Add(m[3], m[4]), d34 = hn::Sub(m[3], m[4]);
  r[0] = hn::MulAdd(u, s34, hn::NegMulAdd(s, s12, hn::Mul(q, m[0])));
  r[1] = hn::MulAdd(t, d34, hn::Mul(s, d12));
  r[2] = hn::Add(hn::Mul(s, hn::Sub(s34, s12)), m[5]);
}

// G g: 3 -> 6 (filters).
HWY_INLINE void WeightTransform(D d, const V* g, V* u) {
  const V q = hn::Set(d, 0.25f), s = hn::Set(d, 1.0f / 6.0f), t = hn::Set(d, 1.0f / 12.0f),
          w = hn::Set(d, 1.0f / 24.0f);
  const V s02 = hn::Add(g[0], g[2]);
  u[0] = hn::Mul(q, g[0]);
  u[1] = hn::Neg(hn::Mul(s, hn::Add(s02, g[1])));
  u[2] = hn::Mul(s, hn::Sub(g[1], s02));
  const V e = hn::MulAdd(w, g[0], hn::Mul(s, g[2]));  // g0 / 24 + g2 / 6
  u[3] = hn::MulAdd(t, g[1], e);
  u[4] = hn::NegMulAdd(t, g[1], e);
  u[5] = g[2];
}

void Weights(const float* src, float* dst, int64_t stride) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V t[18], g[3], u[6];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) g[j] = hn::LoadU(d, src + (i * 3 + j) * lanes);
    WeightTransform(d, g, u);
    for (int j = 0; j < 6; ++j) t[i * 6 + j] = u[j];
  }
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 3; ++i) g[i] = t[i * 6 + j];
    WeightTransform(d, g, u);
    for (int i = 0; i < 6; ++i) hn::StoreU(u[i], d, dst + (i * 6 + j) * stride);
  }
}

void Input(const float* src, int64_t row, int64_t col, float* dst, int64_t stride) {
  const D d;
  V t[36], x[6], y[6];
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) x[j] = hn::LoadU(d, src + i * row + j * col);
    InputTransform(d, x, y);
    for (int j = 0; j < 6; ++j) t[i * 6 + j] = y[j];
  }
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) x[i] = t[i * 6 + j];
    InputTransform(d, x, y);
    for (int i = 0; i < 6; ++i) hn::Stream(y[i], d, dst + (i * 6 + j) * stride);
  }
}

void Output(const float* src, int64_t stride, float* out) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V t[24], m[6], o[4];
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) m[j] = hn::LoadU(d, src + (i * 6 + j) * stride);
    OutputTransform(d, m, o);
    for (int j = 0; j < 4; ++j) t[i * 4 + j] = o[j];
  }
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 6; ++i) m[i] = t[i * 4 + j];
    OutputTransform(d, m, o);
    for (int i = 0; i < 4; ++i) hn::StoreU(o[i], d, out + (i * 4 + j) * lanes);
  }
}

void Dy(const float* src, int64_t row, int64_t col, float* dst, int64_t stride) {
  const D d;
  V t[24], v[4], z[6];
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) v[j] = hn::LoadU(d, src + i * row + j * col);
    GradientTransform(d, v, z);
    for (int j = 0; j < 6; ++j) t[i * 6 + j] = z[j];
  }
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 4; ++i) v[i] = t[i * 6 + j];
    GradientTransform(d, v, z);
    for (int i = 0; i < 6; ++i) hn::Stream(z[i], d, dst + (i * 6 + j) * stride);
  }
}

void Filter(const float* src, int64_t stride, float* out) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V t[18], m[6], r[3];
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) m[j] = hn::LoadU(d, src + (i * 6 + j) * stride);
    FilterTransform(d, m, r);
    for (int j = 0; j < 3; ++j) t[i * 3 + j] = r[j];
  }
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 6; ++i) m[i] = t[i * 3 + j];
    FilterTransform(d, m, r);
    for (int i = 0; i < 3; ++i) hn::StoreU(r[i], d, out + (i * 3 + j) * lanes);
  }
}

void Fill(WinogradFns& f) {
  f.weights = &Weights;
  f.input = &Input;
  f.output = &Output;
  f.dy = &Dy;
  f.filter = &Filter;
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu_blocked::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "convtune/error.h"

namespace convtune::cpu_blocked::detail {

void fill_winograd(Isa isa, WinogradFns& fns) {
  switch (isa) {
#if HWY_TARGETS & HWY_AVX3
    case Isa::Avx512: N_AVX3::Fill(fns); return;
#endif
#if HWY_TARGETS & HWY_AVX2
    case Isa::Avx2: N_AVX2::Fill(fns); return;
#endif
#if HWY_TARGETS & HWY_SCALAR
    case Isa::Scalar: N_SCALAR::Fill(fns); return;
#elif HWY_TARGETS & HWY_EMU128
    case Isa::Scalar: N_EMU128::Fill(fns); return;
#endif
    default: break;
  }
  throw Unsupported("this binary has no Winograd transforms for that ISA");
}

}  // namespace convtune::cpu_blocked::detail
#endif  // HWY_ONCE
