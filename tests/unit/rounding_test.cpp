// FP32 -> BF16 / FP16 / TF32 rounding against an independent reference (the nearest representable value computed in
// double with ties to even), the exact widening back, and the special values: zeros, subnormals, the overflow
// threshold, infinities and NaNs.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "convtune/rounding.h"

using namespace convtune;

namespace {

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The value of a format with `mantissa_bits` explicit mantissa bits, smallest normal exponent `min_exponent` and
// largest finite value `max_finite` nearest to x, ties to even; infinity from the overflow threshold (halfway between
// max_finite and the next power of two's step) up. Computed in double, where every step is exact.
double reference_round(double x, int mantissa_bits, int min_exponent, double max_finite) {
  if (x == 0) return x;
  const double magnitude = std::fabs(x);
  const int exponent = std::max(std::ilogb(magnitude), min_exponent);  // below the normals: the subnormals' step
  const double step = std::ldexp(1.0, exponent - mantissa_bits);
  const double rounded = std::nearbyint(magnitude / step) * step;  // the default mode rounds ties to even
  const double threshold = max_finite + std::ldexp(1.0, std::ilogb(max_finite) - mantissa_bits) / 2;
  const double result = magnitude >= threshold ? std::numeric_limits<double>::infinity() : rounded;
  return std::copysign(result, x);
}

// Floats spread over every exponent: all sign/exponent pairs with mantissas near the rounding boundaries and random
// ones.
std::vector<float> probe_values() {
  std::vector<float> out;
  std::mt19937 rng(7);
  for (uint32_t sign_exponent = 0; sign_exponent < 0x1FF; ++sign_exponent) {
    if ((sign_exponent & 0xFF) == 0xFF) continue;  // infinities and NaNs: tested on their own
    for (uint32_t low : {0x0u, 0x1u, 0xFFFu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u,
                         0x7FFFFFu, 0x7FE000u, 0x7FF000u}) {
      out.push_back(float_of((sign_exponent << 23) | low));
    }
    for (int i = 0; i < 40; ++i) out.push_back(float_of((sign_exponent << 23) | (rng() & 0x7FFFFFu)));
  }
  return out;
}

}  // namespace

TEST(Rounding, Bf16IsTheNearestWithTiesToEven) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (float x : probe_values()) {
    const double want = reference_round(x, 7, -126, bf16_to_fp32(0x7F7F));
    const float got = bf16_to_fp32(fp32_to_bf16(x));
    ASSERT_EQ(static_cast<double>(got), want) << "x = " << x << " (bits " << std::hex << bits_of(x) << ")";
  }
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(float_of(0x3F808000)), 0x3F80);  // a tie: to the even 1.0
  EXPECT_EQ(fp32_to_bf16(float_of(0x3F818000)), 0x3F82);  // a tie: up to the even neighbour
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // past bf16's largest: infinity
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
}

TEST(Rounding, Fp16IsTheNearestWithTiesToEvenSubnormalsIncluded) {
  for (float x : probe_values()) {
    const double want = reference_round(x, 10, -14, 65504.0);
    const float got = fp16_to_fp32(fp32_to_fp16(x));
    ASSERT_EQ(static_cast<double>(got), want) << "x = " << x << " (bits " << std::hex << bits_of(x) << ")";
  }
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // the tie with 65536 goes to the even: infinity
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // its half: a tie, to the even zero
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
}

TEST(Rounding, Tf32IsTheNearestWithTiesToEven) {
  for (float x : probe_values()) {
    const double want = reference_round(x, 10, -126, std::ldexp(2.0 - std::ldexp(1.0, -10), 127));
    ASSERT_EQ(static_cast<double>(round_to_tf32(x)), want) << "x = " << x << " (bits " << std::hex << bits_of(x) << ")";
  }
  EXPECT_EQ(bits_of(round_to_tf32(float_of(0x3F801000))), 0x3F800000u);  // a tie: to the even
  EXPECT_EQ(bits_of(round_to_tf32(float_of(0x3F803000))), 0x3F804000u);  // a tie: up to the even
}

TEST(Rounding, WideningIsExactAndRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const bool bf16_nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F);
    const bool fp16_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    if (!bf16_nan) ASSERT_EQ(fp32_to_bf16(bf16_to_fp32(bits)), bits) << std::hex << h;
    if (!fp16_nan) ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(bits)), bits) << std::hex << h;
  }
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
}

TEST(Rounding, InfinitiesAndNaNsKeepTheirKindAndSign) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(fp32_to_bf16(inf), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(-inf), 0xFF80);
  EXPECT_EQ(fp32_to_fp16(inf), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-inf), 0xFC00);
  EXPECT_TRUE(std::isinf(round_to_tf32(-inf)));
  for (float x : {nan, -nan, float_of(0x7F800001)}) {  // a signalling NaN whose payload sits in the dropped bits
    EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(x))));
    EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(x))));
    EXPECT_TRUE(std::isnan(round_to_tf32(x)));
    EXPECT_EQ(std::signbit(bf16_to_fp32(fp32_to_bf16(x))), std::signbit(x));
    EXPECT_EQ(std::signbit(fp16_to_fp32(fp32_to_fp16(x))), std::signbit(x));
  }
}

TEST(Rounding, RoundToTypeRoundsArraysInPlace) {
  std::vector<float> v = {1.0f, 1.00390625f + 1e-7f, 70000.0f, 3.14159265f};
  round_to_type(ElementType::F32, v.data(), v.size());
  EXPECT_EQ(v[3], 3.14159265f);
  round_to_type(ElementType::F16, v.data(), v.size());
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_TRUE(std::isinf(v[2]));
  EXPECT_EQ(v[3], 3.140625f);
  EXPECT_EQ(round_to_type(ElementType::BF16, 3.14159265f), 3.140625f);
}
