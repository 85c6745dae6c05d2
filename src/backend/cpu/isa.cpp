// ISA choice for the CPU backend's SIMD code: Highway's CPU detection, narrowed by CONVTUNE_CPU_ISA or force_isa().
#include "src/backend/cpu/isa.h"

#include <fmt/format.h>

// The compiled target selection must be seen before Highway's headers.
#include "src/backend/cpu/hwy_targets.h"
#include <hwy/targets.h>

#include <cstdlib>
#include <mutex>

#include "convtune/error.h"
#include "src/core/environment.h"

namespace convtune::cpu {

namespace {

std::mutex isa_mutex;
std::optional<Isa> forced;

bool cpu_has(Isa isa) {
  // Detected once: CPUID is slow under a hypervisor (each call exits to it), and kernels ask per run.
  static const int64_t supported = hwy::SupportedTargets();
  switch (isa) {
    // Compiled in (HWY_TARGETS) and run by this CPU.
    case Isa::Avx512: return (supported & HWY_TARGETS & HWY_AVX3) != 0;
    case Isa::Avx2: return (supported & HWY_TARGETS & HWY_AVX2) != 0;
    case Isa::Scalar: return true;
  }
  return false;
}

std::optional<Isa> from_environment() {
  static const std::optional<Isa> value = parsed_variable<Isa>("CONVTUNE_CPU_ISA", parse_isa);
  return value;
}

}  // namespace

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Scalar: return "scalar";
  }
  return "?";
}

Isa parse_isa(std::string_view text) {
  for (Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Scalar})
    if (text == to_string(isa)) return isa;
  throw InvalidArgument(fmt::format("unknown CPU ISA '{}': expected avx512, avx2 or scalar", text));
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Scalar})
    if (cpu_has(isa)) out.push_back(isa);
  return out;
}

Isa active_isa() {
  std::optional<Isa> want;
  {
    std::lock_guard lock(isa_mutex);
    want = forced;
  }
  if (!want) want = from_environment();
  if (!want) return available_isas().front();
  if (!cpu_has(*want)) {
    throw Unsupported(fmt::format("CPU ISA {} was requested (CONVTUNE_CPU_ISA or force_isa) but this CPU lacks it",
                                  to_string(*want)));
  }
  return *want;
}

void force_isa(std::optional<Isa> isa) {
  std::lock_guard lock(isa_mutex);
  forced = isa;
}

int vector_registers(Isa isa) { return isa == Isa::Avx512 ? 32 : 16; }
int vector_lanes(Isa isa) { return isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 1; }

}  // namespace convtune::cpu
