// Forces the CPU backend's ISA (AVX-512, AVX2 or scalar) for one scope, so a test runs the same kernels on every
// Highway target this binary has.
#pragma once

#include <optional>

#include "src/backend/cpu/isa.h"

namespace convtune::test {

struct ForcedIsa {
  explicit ForcedIsa(cpu::Isa isa) { cpu::force_isa(isa); }
  ~ForcedIsa() { cpu::force_isa(std::nullopt); }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;
};

}  // namespace convtune::test
