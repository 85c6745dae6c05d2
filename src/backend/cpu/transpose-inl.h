// TransposeSquare: a lanes x lanes tile of floats transposed in registers (AVX-512 16 x 16, AVX2 8 x 8), for the
// CPU backend's Highway kernels that move channels between planes and pixel-interleaved blocks. Included once per
// Highway target by files that foreach_target re-includes (the guard toggles with HWY_TARGET_TOGGLE), after
// <hwy/highway.h>. Defines CONVTUNE_HAVE_TRANSPOSE on the targets that have it (x86's AVX-512 and AVX2).
#if defined(CONVTUNE_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONVTUNE_TRANSPOSE_INL_H_
#undef CONVTUNE_TRANSPOSE_INL_H_
#else
#define CONVTUNE_TRANSPOSE_INL_H_
#endif

#include <hwy/highway.h>

#undef CONVTUNE_HAVE_TRANSPOSE
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
#define CONVTUNE_HAVE_TRANSPOSE 1

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu {
namespace HWY_NAMESPACE {

// Transposes r[0..lanes) (row i: lanes floats) in place: afterwards r[j] holds element j of every row. The
// unpack / shuffle network of 32-bit, 64-bit and 128-bit steps (AVX2 8 x 8, AVX-512 16 x 16).
HWY_INLINE void TransposeSquare(hwy::HWY_NAMESPACE::Vec<hwy::HWY_NAMESPACE::ScalableTag<float>>* r) {
#if HWY_TARGET <= HWY_AVX3
  __m512 u[16];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512 a = r[4 * g].raw, b = r[4 * g + 1].raw, c = r[4 * g + 2].raw, e = r[4 * g + 3].raw;
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(a, b)), t1 = _mm512_castps_pd(_mm512_unpackhi_ps(a, b));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(c, e)), t3 = _mm512_castps_pd(_mm512_unpackhi_ps(c, e));
    // Lane L of u[4g + k]: rows 4g..4g+3 at column 4L + k.
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512 wa = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), wb = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd);
    const __m512 xa = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88),
                 xb = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
    r[k].raw = _mm512_shuffle_f32x4(wa, xa, 0x88);       // column k
    r[4 + k].raw = _mm512_shuffle_f32x4(wb, xb, 0x88);   // column 4 + k
    r[8 + k].raw = _mm512_shuffle_f32x4(wa, xa, 0xdd);   // column 8 + k
    r[12 + k].raw = _mm512_shuffle_f32x4(wb, xb, 0xdd);  // column 12 + k
  }
#else
  __m256 u[8];
#pragma GCC unroll 2
  for (int g = 0; g < 2; ++g) {
    const __m256 a = r[4 * g].raw, b = r[4 * g + 1].raw, c = r[4 * g + 2].raw, e = r[4 * g + 3].raw;
    const __m256 t0 = _mm256_unpacklo_ps(a, b), t1 = _mm256_unpackhi_ps(a, b);
    const __m256 t2 = _mm256_unpacklo_ps(c, e), t3 = _mm256_unpackhi_ps(c, e);
    // Lane L of u[4g + k]: rows 4g..4g+3 at column 4L + k.
    u[4 * g] = _mm256_shuffle_ps(t0, t2, 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t0, t2, 0xee);
    u[4 * g + 2] = _mm256_shuffle_ps(t1, t3, 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t1, t3, 0xee);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    r[k].raw = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[4 + k].raw = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu
HWY_AFTER_NAMESPACE();

#endif  // x86 AVX-512 / AVX2
#endif  // include guard
