// The FMA loop behind the CPU's measured FP32 ceiling, compiled per Highway target (AVX-512, AVX2, scalar) so the
// ceiling is measured with the widest vectors the CPU runs, as the convolution kernels use them.
#include "src/backend/cpu/hwy_targets.h"
// Highway re-includes this file once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/measure/cpu_fma.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include "src/measure/cpu_ceilings.h"

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu_measure {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// kChains independent accumulators: enough to cover FMA latency x FMA ports (4 x 2 on current x86) with room,
// while fitting 16 registers (AVX2). Returns the FLOPs done; `sink` keeps the result alive.
double FmaLoop(int64_t iterations, float* sink) {
  constexpr int kChains = 12;
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V acc[kChains];
#pragma GCC unroll 16
  for (int i = 0; i < kChains; ++i) acc[i] = hn::Set(d, 1.0f + 0.001f * static_cast<float>(i));
  // Values stay finite: x -> x * 0.9999999 + 1e-7 converges to 1.
  const V m = hn::Set(d, 0.9999999f);
  const V a = hn::Set(d, 1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = hn::MulAdd(acc[i], m, a);
  }
  V sum = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < kChains; ++i) sum = hn::Add(sum, acc[i]);
  *sink = hn::GetLane(hn::SumOfLanes(d, sum));
  return 2.0 * kChains * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iterations);
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu_measure
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "convtune/error.h"

namespace convtune::cpu_measure {

double fma_loop(cpu::Isa isa, int64_t iterations, float* sink) {
  switch (isa) {
#if HWY_TARGETS & HWY_AVX3
    case cpu::Isa::Avx512: return N_AVX3::FmaLoop(iterations, sink);
#endif
#if HWY_TARGETS & HWY_AVX2
    case cpu::Isa::Avx2: return N_AVX2::FmaLoop(iterations, sink);
#endif
#if HWY_TARGETS & HWY_SCALAR
    case cpu::Isa::Scalar: return N_SCALAR::FmaLoop(iterations, sink);
#elif HWY_TARGETS & HWY_EMU128
    case cpu::Isa::Scalar: return N_EMU128::FmaLoop(iterations, sink);
#endif
    default: break;
  }
  throw Unsupported("this binary has no FMA loop for that ISA");
}

}  // namespace convtune::cpu_measure
#endif  // HWY_ONCE
