// BF16 <-> FP32 as inline functions, for host loops the compiler should vectorise (the CPU backend's batch norm and
// epilogue passes); convtune/rounding.h's bf16_to_fp32 and fp32_to_bf16 are these, out of line.
#pragma once

#include <cstdint>
#include <cstring>

namespace convtune {

// Exact: BF16 is FP32's upper half.
inline float bf16_bits_to_fp32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Round to nearest, ties to even (a carry runs into the exponent, up to infinity); a NaN stays a quiet NaN with its
// sign and top payload.
inline uint16_t fp32_to_bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace convtune
