// Element types and math modes: names, parsing, sizes and unit roundoff.
#include "convtune/types.h"

#include <fmt/format.h>

#include <cmath>

#include "convtune/error.h"

namespace convtune {

std::string_view to_string(ElementType type) {
  switch (type) {
    case ElementType::F32: return "fp32";
    case ElementType::F16: return "fp16";
    case ElementType::BF16: return "bf16";
  }
  return "?";
}

std::string_view to_string(MathMode mode) {
  switch (mode) {
    case MathMode::FP32: return "fp32";
    case MathMode::TF32: return "tf32";
    case MathMode::TF32x3: return "3xtf32";
    case MathMode::FP32Fast: return "fp32-fast";
  }
  return "?";
}

ElementType parse_element_type(std::string_view text) {
  if (text == "fp32" || text == "f32" || text == "float32") return ElementType::F32;
  if (text == "fp16" || text == "f16" || text == "float16" || text == "half") return ElementType::F16;
  if (text == "bf16" || text == "bfloat16") return ElementType::BF16;
  throw InvalidArgument(fmt::format("unknown element type '{}': expected fp32, fp16 or bf16", text));
}

MathMode parse_math_mode(std::string_view text) {
  if (text == "fp32") return MathMode::FP32;
  if (text == "tf32") return MathMode::TF32;
  if (text == "3xtf32" || text == "tf32x3") return MathMode::TF32x3;
  if (text == "fp32-fast") return MathMode::FP32Fast;
  throw InvalidArgument(fmt::format("unknown math mode '{}': expected fp32, tf32, 3xtf32 or fp32-fast", text));
}

int bytes_per_element(ElementType type) { return type == ElementType::F32 ? 4 : 2; }

Precision parse_precision(std::string_view text) {
  if (text == "bf16" || text == "bfloat16") return {ElementType::BF16, MathMode::FP32};
  if (text == "fp16" || text == "f16" || text == "float16" || text == "half") return {ElementType::F16, MathMode::FP32};
  if (text == "fp32" || text == "tf32" || text == "3xtf32" || text == "tf32x3" || text == "fp32-fast") {
    return {ElementType::F32, parse_math_mode(text)};
  }
  throw InvalidArgument(
      fmt::format("unknown math mode '{}': expected fp32, tf32, 3xtf32, fp32-fast, bf16 or fp16", text));
}

std::string_view to_string(Precision precision) {
  return precision.type == ElementType::F32 ? to_string(precision.math) : to_string(precision.type);
}

void validate_precision(ElementType type, MathMode math) {
  if (type != ElementType::F32 && math != MathMode::FP32) {
    throw InvalidArgument(fmt::format("type={} takes math=fp32 (16-bit products are exact in FP32 and summed in FP32), "
                                      "not math={}",
                                      to_string(type), to_string(math)));
  }
}

double unit_roundoff(ElementType type, MathMode mode) {
  // Inputs stored in fewer bits round there first, whatever the math mode.
  if (type == ElementType::BF16) return std::ldexp(1.0, -8);
  if (type == ElementType::F16) return std::ldexp(1.0, -11);
  // fp32-fast multiplies in FP32 too: what it loosens is the algorithm's bound (max_error_factor), not the arithmetic.
  return mode == MathMode::TF32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24);
}

double max_error_factor(ElementType type, MathMode mode) {
  if (mode == MathMode::FP32Fast) return kFp32FastErrorFactor;
  return unit_roundoff(type, mode) / unit_roundoff(ElementType::F32, MathMode::FP32);
}

}  // namespace convtune
