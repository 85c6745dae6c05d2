// Overflow-checked integer arithmetic and float-to-integer conversion for sizes and offsets that come from files
// and command lines, where a plain +, * or cast could wrap around or be undefined behaviour.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace convtune {

// a + b, or nullopt when the exact result does not fit in T.
template <typename T>
std::optional<T> checked_add(T a, T b) {
  T result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// a - b, or nullopt when the exact result does not fit in T.
template <typename T>
std::optional<T> checked_sub(T a, T b) {
  T result;
  if (__builtin_sub_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// a * b, or nullopt when the exact result does not fit in T.
template <typename T>
std::optional<T> checked_mul(T a, T b) {
  T result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// The integer equal to `value` when it is a whole number within T's range; else nullopt. (Converting a NaN, an
// infinity or an out-of-range double to an integer type is undefined behaviour, not a wrap-around.)
template <typename T>
std::optional<T> exact_integer(double value) {
  static_assert(std::is_integral_v<T>);
  // Both bounds are powers of two (or zero), so they are exact doubles: min <= value < max + 1.
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2.0;
  if (!(value >= lo && value < hi) || std::trunc(value) != value) return std::nullopt;
  return static_cast<T>(value);
}

}  // namespace convtune
