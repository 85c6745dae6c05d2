// What the CPU backend's families share: their support rule, the THREADS parameter, and the recipe of one host
// program call that hands the problem and configuration over as defines.
#pragma once

#include <fmt/format.h>

#include <string>

#include "convtune/kernel_family.h"
#include "src/core/parallel_for.h"

namespace convtune {

// THREADS=0 means every hardware thread.
inline unsigned cpu_threads(int64_t threads) { return threads <= 0 ? hardware_threads() : static_cast<unsigned>(threads); }

inline Parameter threads_parameter() {
  return {"THREADS", {0, 1}, "host threads: 0 every core, 1 one thread (the sequential baseline)"};
}

inline std::string cpu_family_unsupported(std::string_view family, Problem::Kind kind, const Problem& problem,
                                          const Epilogue& epilogue, const DeviceInfo& device) {
  if (problem.kind() != kind) {
    return kind == Problem::Kind::Gemm ? "computes matrix products, not convolutions"
                                       : "computes convolutions, not matrix products";
  }
  if (device.backend != BackendKind::Cpu) {
    return fmt::format("runs on the CPU backend (device cpu), not on {}", device.id);
  }
  if (std::string why = fp32_only_reason(family, problem); !why.empty()) return why;
  if (epilogue.any()) return fmt::format("no fused epilogue ({}) is implemented", to_string(epilogue));
  return {};
}

// One launch of `kernel` in host program `program` on the problem's three operands; the problem's text and the
// configuration travel as defines (PROBLEM and each parameter), read once when the program is built.
inline KernelRecipe cpu_recipe(const std::string& program, const std::string& kernel, const Problem& problem,
                               const Config& config) {
  KernelRecipe recipe;
  recipe.source.file = program;
  recipe.source.defines["PROBLEM"] = problem.to_string();
  for (const auto& [name, value] : config) recipe.source.defines[name] = std::to_string(value);
  recipe.steps.push_back({kernel, {ArgSource::of_operand(0), ArgSource::of_operand(1), ArgSource::of_operand(2)}, {}});
  return recipe;
}

}  // namespace convtune
