// HostConvolution defaults and the registry of CPU paths by name.
#include "convtune/host_convolution.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "convtune/error.h"
#include "src/backend/cpu/cpu_convolutions.h"
#include "src/core/parallel_for.h"

namespace convtune {

std::string HostConvolution::unsupported_reason(const ConvProblem& problem) const {
  if (problem.precision != Precision::FP32) {
    return fmt::format("{} computes fp32 only, not {}", name(), to_string(problem.precision));
  }
  return {};
}

std::vector<std::string> cpu_convolution_names() { return {"reference", "sequential", "threaded", "blocked"}; }

std::unique_ptr<HostConvolution> make_cpu_convolution(std::string_view name) {
  if (name == "reference") return cpu::make_reference_convolution();
  if (name == "sequential") return cpu::make_direct_convolution(1, "sequential");
  if (name == "threaded") return cpu::make_direct_convolution(hardware_threads(), "threaded");
  if (name == "blocked") return cpu::make_blocked_convolution(std::nullopt);
  // "blocked[ORIENT=0,VECS=2,...]": one configuration of cpu_blocked for every problem (sweeps, tests).
  if (name.starts_with("blocked[") && name.ends_with("]")) {
    return cpu::make_blocked_convolution(parse_config(name.substr(8, name.size() - 9)));
  }
  throw InvalidArgument(fmt::format("unknown CPU convolution '{}': expected one of {} (or blocked[CONFIG])", name,
                                    fmt::join(cpu_convolution_names(), ", ")));
}

}  // namespace convtune
