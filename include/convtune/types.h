// Element types of tensors and math modes of operations: what a problem computes in, declared once for every
// kind of problem, the tuning database's keys and the tolerance the results are checked with.
#pragma once

#include <string_view>

namespace convtune {

// How each element of a tensor is stored.
enum class ElementType {
  F32,   // IEEE binary32
  F16,   // IEEE binary16
  BF16,  // bfloat16: binary32's exponent, 8 significant bits
};

// How the multiplications of an operation are done; accumulation is always in FP32 or wider.
enum class MathMode {
  FP32,    // every multiply in full FP32 (FMA units; tensor cores off)
  TF32,    // inputs rounded to TF32 (10 explicit mantissa bits) for the multiplies, e.g. tensor cores
  TF32x3,  // each FP32 input split into a TF32 high part and a TF32 residual, three products: FP32 accuracy
};

std::string_view to_string(ElementType type);  // "fp32", "fp16", "bf16"
std::string_view to_string(MathMode mode);     // "fp32", "tf32", "3xtf32"
// Throw InvalidArgument naming the text and the accepted spellings.
ElementType parse_element_type(std::string_view text);
MathMode parse_math_mode(std::string_view text);
int bytes_per_element(ElementType type);

// The relative rounding error of one multiply-add of this type in this mode: 2^-24 for FP32 (and the split
// TF32x3 mode, which is built to match it), 2^-11 for TF32 and FP16 inputs, 2^-8 for BF16 inputs. Tolerances
// of every check scale from it.
double unit_roundoff(ElementType type, MathMode mode);

}  // namespace convtune
