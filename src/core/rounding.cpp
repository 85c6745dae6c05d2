// FP32 <-> BF16 / FP16 / TF32 conversions with round-to-nearest-even, on the bit patterns (the rounding of each
// format's dropped mantissa bits, carries into the exponent and up to infinity included).
#include "convtune/rounding.h"

#include "src/core/bf16_inline.h"

#include <cmath>
#include <cstring>

namespace convtune {

namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// u with its low `dropped` bits rounded away to nearest, ties to the even neighbour (the bits are then zero); a carry
// runs into the exponent, and from the largest finite value to infinity, as IEEE's rounding does.
uint32_t round_low_bits(uint32_t u, int dropped) {
  const uint32_t half = (1u << (dropped - 1)) - 1;
  const uint32_t lsb = (u >> dropped) & 1u;
  return (u + half + lsb) & ~((1u << dropped) - 1u);
}

}  // namespace

uint16_t fp32_to_bf16(float x) { return fp32_to_bf16_bits(x); }

float bf16_to_fp32(uint16_t bits) { return bf16_bits_to_fp32(bits); }

uint16_t fp32_to_fp16(float x) {
  const uint32_t u = bits_of(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // quiet NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 65520 and up (and infinity): infinity
  if (a >= 0x38800000u) {  // 2^-14 and up: a normal binary16, exponent rebiased from 127 to 15
    return static_cast<uint16_t>(sign | (round_low_bits(a - 0x38000000u, 13) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // up to 2^-25 (a tie with zero, which is even): zero
  // A subnormal binary16: the value in units of 2^-24, rounded; reaching 0x400 makes it the smallest normal.
  const uint32_t exponent = a >> 23;  // 102..112 here
  const uint32_t mantissa = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = static_cast<int>(126 - exponent);  // 14..24
  uint32_t q = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

float fp16_to_fp32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign | 0x7F800000u | (mantissa << 13));  // infinity or NaN
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in FP32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

float round_to_tf32(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;  // infinity and NaN as they are
  return float_of(round_low_bits(u, 13));
}

float round_to_type(ElementType type, float x) {
  switch (type) {
    case ElementType::F32: return x;
    case ElementType::BF16: return bf16_to_fp32(fp32_to_bf16(x));
    case ElementType::F16: return fp16_to_fp32(fp32_to_fp16(x));
  }
  return x;
}

void round_to_type(ElementType type, float* data, size_t count) {
  if (type == ElementType::F32) return;
  for (size_t i = 0; i < count; ++i) data[i] = round_to_type(type, data[i]);
}

void encode_elements(ElementType type, const float* src, void* dst, size_t count) {
  if (type == ElementType::F32) {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  auto* out = static_cast<uint16_t*>(dst);
  if (type == ElementType::BF16) {
    for (size_t i = 0; i < count; ++i) out[i] = fp32_to_bf16(src[i]);
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = fp32_to_fp16(src[i]);
  }
}

void decode_elements(ElementType type, const void* src, float* dst, size_t count) {
  if (type == ElementType::F32) {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  const auto* in = static_cast<const uint16_t*>(src);
  if (type == ElementType::BF16) {
    for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_fp32(in[i]);
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = fp16_to_fp32(in[i]);
  }
}

}  // namespace convtune
