// The cpu_depthwise family's row kernels (row_kernels.h), compiled once per Highway target by foreach_target:
// weighted sums of rows over whole planes in register blocks of 1, 2 or 4 vectors along a row (one broadcast weight
// per filter tap), and dot products of rows.
#include "src/backend/cpu/hwy_targets.h"
// Highway re-includes this file once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/families/cpu_depthwise/row_kernels.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>

#include "src/families/cpu_depthwise/row_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu_depthwise {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

template <int NV>
void PlaneSumRows(const float* base, const int64_t* offsets, const float* weights, int64_t taps, int64_t rows,
                  int64_t in_stride, int64_t count, float* out, int64_t out_stride) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = base + r * in_stride;
    float* o = out + r * out_stride;
    int64_t i = 0;
    for (; i + NV * lanes <= count; i += NV * lanes) {
      V acc[NV];
      for (int v = 0; v < NV; ++v) acc[v] = hn::Zero(d);
      for (int64_t t = 0; t < taps; ++t) {
        const V w = hn::Set(d, weights[t]);
        const float* row = in + offsets[t] + i;
        for (int v = 0; v < NV; ++v) acc[v] = hn::MulAdd(w, hn::LoadU(d, row + v * lanes), acc[v]);
      }
      for (int v = 0; v < NV; ++v) hn::StoreU(acc[v], d, o + i + v * lanes);
    }
    for (; i < count; i += lanes) {
      V acc = hn::Zero(d);
      for (int64_t t = 0; t < taps; ++t) acc = hn::MulAdd(hn::Set(d, weights[t]), hn::LoadU(d, in + offsets[t] + i), acc);
      if (i + lanes <= count) {
        hn::StoreU(acc, d, o + i);
      } else {
        hn::BlendedStore(acc, hn::FirstN(d, static_cast<size_t>(count - i)), d, o + i);
      }
    }
  }
}

void Deinterleave2(const float* in, int64_t count, float* even, float* odd) {
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (; 2 * (i + lanes) <= count; i += lanes) {
    const V lo = hn::LoadU(d, in + 2 * i), hi = hn::LoadU(d, in + 2 * i + lanes);
    hn::StoreU(hn::ConcatEven(d, hi, lo), d, even + i);
    hn::StoreU(hn::ConcatOdd(d, hi, lo), d, odd + i);
  }
#endif
  for (; 2 * i < count; ++i) {
    even[i] = in[2 * i];
    if (2 * i + 1 < count) odd[i] = in[2 * i + 1];
  }
}

// Four taps at a time share each load of b; every tap's products stay in one vector over the whole plane.
void PlaneDotRows(const float* base, const int64_t* offsets, int64_t taps, int64_t rows, int64_t in_stride,
                  const float* b, int64_t b_stride, int64_t count, double* sums) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t full = count / lanes * lanes;
  const auto tail = hn::FirstN(d, static_cast<size_t>(count - full));
  for (int64_t t0 = 0; t0 < taps; t0 += 4) {
    const int64_t nt = std::min<int64_t>(4, taps - t0);
    V acc[4] = {hn::Zero(d), hn::Zero(d), hn::Zero(d), hn::Zero(d)};
    for (int64_t i = 0; i < rows; ++i) {
      const float* in = b + i * b_stride;
      const float* row = base + i * in_stride;
      for (int64_t x = 0; x < full; x += lanes) {
        const V v = hn::LoadU(d, in + x);
        for (int64_t j = 0; j < nt; ++j) acc[j] = hn::MulAdd(hn::LoadU(d, row + offsets[t0 + j] + x), v, acc[j]);
      }
      if (full < count) {
        const V v = hn::MaskedLoad(tail, d, in + full);
        for (int64_t j = 0; j < nt; ++j) acc[j] = hn::MulAdd(hn::LoadU(d, row + offsets[t0 + j] + full), v, acc[j]);
      }
    }
    for (int64_t j = 0; j < nt; ++j) sums[t0 + j] += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, acc[j])));
  }
}

void FillTable(RowKernels& k) {
  k.lanes = static_cast<int>(hn::Lanes(D()));
  k.plane_sum[0] = &PlaneSumRows<1>, k.plane_sum[1] = &PlaneSumRows<2>, k.plane_sum[2] = &PlaneSumRows<4>;
  k.plane_dot = &PlaneDotRows;
  k.deinterleave2 = &Deinterleave2;
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu_depthwise
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <fmt/format.h>

#include <mutex>

#include "convtune/error.h"

namespace convtune::cpu_depthwise {

const RowKernels& row_kernels(cpu::Isa isa) {
  static RowKernels tables[3];
  static std::once_flag once[3];
  const int index = static_cast<int>(isa);
  std::call_once(once[index], [&] {
    switch (isa) {
#if HWY_TARGETS & HWY_AVX3
      case cpu::Isa::Avx512: N_AVX3::FillTable(tables[index]); return;
#endif
#if HWY_TARGETS & HWY_AVX2
      case cpu::Isa::Avx2: N_AVX2::FillTable(tables[index]); return;
#endif
#if HWY_TARGETS & HWY_SCALAR
      case cpu::Isa::Scalar: N_SCALAR::FillTable(tables[index]); return;
#elif HWY_TARGETS & HWY_EMU128
      case cpu::Isa::Scalar: N_EMU128::FillTable(tables[index]); return;
#endif
      default: break;
    }
    throw Unsupported(fmt::format("this binary has no {} kernels (Highway target not compiled)", cpu::to_string(isa)));
  });
  return tables[index];
}

}  // namespace convtune::cpu_depthwise
#endif  // HWY_ONCE
