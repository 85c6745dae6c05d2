// Conversions between FP32 and the narrower formats tensor cores read (BF16, FP16 storage; TF32 multiplies), with
// IEEE round-to-nearest-even, as the host does them: preparing 16-bit tensors, and checking what a kernel in a
// narrower mode may differ by.
#pragma once

#include <cstddef>
#include <cstdint>

#include "convtune/types.h"

namespace convtune {

// bfloat16 (FP32's sign and 8-bit exponent, 7 explicit mantissa bits) as its bit pattern. Round-to-nearest-even;
// values past the largest finite bfloat16 become infinities; a NaN stays a (quiet) NaN of the same sign.
uint16_t fp32_to_bf16(float x);
float bf16_to_fp32(uint16_t bits);  // exact

// IEEE binary16 (5-bit exponent, 10 explicit mantissa bits) as its bit pattern. Round-to-nearest-even, subnormals
// kept (down to 2^-24), magnitudes from 65520 up become infinities; a NaN stays a (quiet) NaN of the same sign.
uint16_t fp32_to_fp16(float x);
float fp16_to_fp32(uint16_t bits);  // exact

// x rounded to TF32 (FP32's exponent range, 10 explicit mantissa bits), kept in a float. Round-to-nearest-even. The
// tensor-core kernels convert with the PTX instruction cvt.rna (ties away from zero): the two differ only on exact
// ties, by one TF32 unit in the last place.
float round_to_tf32(float x);

// x as `type` would store it, back in FP32 (the identity for F32).
float round_to_type(ElementType type, float x);
// Every element of data[0, count) rounded in place to `type`.
void round_to_type(ElementType type, float* data, size_t count);

// count floats stored as `type` at dst (bytes_per_element(type) each; 16-bit types as their bit patterns, rounded to
// nearest even), and back: what moves host values into and out of a device buffer of that type.
void encode_elements(ElementType type, const float* src, void* dst, size_t count);
void decode_elements(ElementType type, const void* src, float* dst, size_t count);

}  // namespace convtune
