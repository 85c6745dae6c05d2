// Forces the CPU backend's ISA (AVX-512, AVX2 or scalar) or the cache sizes its planners size blocks by for one
// scope, so a test runs the same kernels on every Highway target this binary has, and plans for other CPUs' caches.
#pragma once

#include <optional>

#include "src/backend/cpu/caches.h"
#include "src/backend/cpu/isa.h"

namespace convtune::test {

struct ForcedIsa {
  explicit ForcedIsa(cpu::Isa isa) { cpu::force_isa(isa); }
  ~ForcedIsa() { cpu::force_isa(std::nullopt); }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;
};

struct ForcedCaches {
  explicit ForcedCaches(cpu::CacheSizes caches) { cpu::force_cache_sizes(caches); }
  ~ForcedCaches() { cpu::force_cache_sizes(std::nullopt); }
  ForcedCaches(const ForcedCaches&) = delete;
  ForcedCaches& operator=(const ForcedCaches&) = delete;
};

}  // namespace convtune::test
