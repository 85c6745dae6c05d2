// What the CPU backend's families share: a base class with their support rule, the THREADS parameter, and the
// recipe of one host program call that hands the problem and configuration over as defines.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "convtune/extension/kernel_family.h"
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

// A family of the CPU backend computing one kind of problem: where it runs and what it supports (FP32, no fused
// epilogue) are the same for all of them, so each family states only its kind.
class CpuFamily : public KernelFamily {
 public:
  explicit CpuFamily(Problem::Kind kind) : kind_(kind) {}
  Problem::Kind problem_kind() const final { return kind_; }
  bool runs_on_cpu_backend() const final { return true; }
  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    return cpu_family_unsupported(name(), kind_, problem, epilogue, device);
  }

 private:
  Problem::Kind kind_;
};

// Why a CPU family's untuned plan would take memory out of proportion to the problem (empty when it would not): its
// memory (workspace and host memory, KernelRecipe::limited_bytes) beyond 16 times the operands and 256 MiB. The
// CPU backend's workspace limit is the host's memory, so without this a one-pixel layer at stride 16384 took 4.2 GB
// (backward-data) and one of 40000 rows at stride 40000 6.4 GB (backward-filter); a family that needs less serves
// them untuned instead. A named family still runs them within the limit.
inline std::string memory_out_of_proportion(const KernelRecipe& recipe, const Problem& problem) {
  double operands = 0;
  for (int i = 0; i < Problem::kOperands; ++i)
    operands += static_cast<double>(problem.operand(i).elements) * bytes_per_element(problem.type());
  const double bytes = static_cast<double>(recipe.limited_bytes());
  if (bytes <= std::max(16 * operands, double(uint64_t{256} << 20))) return {};
  return fmt::format("its memory ({} bytes) is {:.0f} times its operands' ({} bytes)", recipe.limited_bytes(),
                     bytes / std::max(operands, 1.0), static_cast<uint64_t>(operands));
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
