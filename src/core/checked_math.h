// Overflow-checked integer arithmetic for sizes and offsets that come from files and command lines, where a plain
// + or * could wrap around (unsigned) or be undefined behaviour (signed).
#pragma once

#include <cstdint>
#include <optional>

namespace convtune {

// a + b, or nullopt when the exact result does not fit in T.
template <typename T>
std::optional<T> checked_add(T a, T b) {
  T result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// a * b, or nullopt when the exact result does not fit in T.
template <typename T>
std::optional<T> checked_mul(T a, T b) {
  T result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

}  // namespace convtune
