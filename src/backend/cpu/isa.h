// Which SIMD instruction set the CPU backend's vector code runs (the cpu_blocked family's kernels, the FMA
// ceiling): the best the CPU and binary have, or one forced by CONVTUNE_CPU_ISA / force_isa() so tests cover
// every path on one machine. Part of the CPU device's identity, so tuning results stay with their ISA.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace convtune::cpu {

enum class Isa { Avx512, Avx2, Scalar };

std::string_view to_string(Isa isa);  // "avx512", "avx2", "scalar"
Isa parse_isa(std::string_view text);  // the inverse; throws InvalidArgument naming the choices

// ISAs this CPU runs and this binary has kernels for, best first (scalar always last).
std::vector<Isa> available_isas();

// The ISA kernels use now: force_isa()'s choice if set, else CONVTUNE_CPU_ISA if set (read once), else the best
// available. Throws Unsupported when the forced ISA is not available here.
Isa active_isa();

// Overrides CONVTUNE_CPU_ISA for this process (std::nullopt: back to the environment or the best). For tests;
// plans prepared before the call keep the ISA they were prepared with.
void force_isa(std::optional<Isa> isa);

// Vector registers and floats per vector of an ISA.
int vector_registers(Isa isa);
int vector_lanes(Isa isa);

}  // namespace convtune::cpu
