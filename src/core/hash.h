// 64-bit FNV-1a hashing, for cache keys and checksums (not for security).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace convtune {

inline uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline uint64_t fnv1a64(std::string_view text) { return fnv1a64(text.data(), text.size()); }

inline std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace convtune
