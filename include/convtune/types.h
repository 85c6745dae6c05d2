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
  // Every multiply in full FP32, and algorithms whose own rounding exceeds the direct sum's FP32 tolerance allowed
  // within a declared bound (kFp32FastErrorFactor times it: Winograd's alpha-8 tiles).
  FP32Fast,
};

std::string_view to_string(ElementType type);  // "fp32", "fp16", "bf16"
std::string_view to_string(MathMode mode);     // "fp32", "tf32", "3xtf32", "fp32-fast"
// Throw InvalidArgument naming the text and the accepted spellings.
ElementType parse_element_type(std::string_view text);
MathMode parse_math_mode(std::string_view text);
int bytes_per_element(ElementType type);

// What the command line's --math (and the Python package's math=) names: an element type and a math mode together.
// "fp32", "tf32", "3xtf32" and "fp32-fast" are FP32 tensors in that math mode; "bf16" and "fp16" are 16-bit tensors
// whose products are exact in FP32 and summed in FP32 (math fp32).
struct Precision {
  ElementType type = ElementType::F32;
  MathMode math = MathMode::FP32;
};
// Throws InvalidArgument naming the text and the six accepted spellings.
Precision parse_precision(std::string_view text);
std::string_view to_string(Precision precision);  // "bf16", "fp16", or the math mode's name for FP32 tensors
// Throws InvalidArgument when a problem may not combine the two: 16-bit tensors take math fp32 only (their
// products are exact in FP32; tf32 would round nothing and name a second tuning key for the same arithmetic).
void validate_precision(ElementType type, MathMode math);

// The relative rounding error of one multiply-add of this type in this mode: 2^-24 for FP32 (and the split
// TF32x3 mode, which is built to match it), 2^-11 for TF32 and FP16 inputs, 2^-8 for BF16 inputs. Tolerances
// of every check scale from it.
double unit_roundoff(ElementType type, MathMode mode);

// The most an algorithm's declared error bound (KernelFamily::error_factor: a multiple of the direct sum's FP32
// tolerance) may be for a result in fp32-fast math.
inline constexpr double kFp32FastErrorFactor = 4;

// The largest error factor a result of this type and mode may carry: a mode states the accuracy a result needs at
// least, so fp32 and 3xtf32 take 1 (FP32's own direct-sum tolerance), fp32-fast kFp32FastErrorFactor, and tf32 (or
// 16-bit inputs) the ratio of its unit roundoff to FP32's, as its inputs' rounding dwarfs the algorithm's.
double max_error_factor(ElementType type, MathMode mode);

}  // namespace convtune
