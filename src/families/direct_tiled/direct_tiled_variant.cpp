// Helpers shared by the direct_tiled family's output-tiled and filter-tiled halves.
#include "src/families/direct_tiled/direct_tiled_variant.h"

#include <algorithm>

namespace convtune {

namespace direct_tiled {

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t local_memory_limit(const DeviceInfo& device) {
  return std::min<int64_t>(static_cast<int64_t>(device.local_memory_bytes), kMaxStaticLocalBytes);
}

std::vector<Config> default_candidates(const Config& tuned, const Config& ones_overrides) {
  std::vector<Config> candidates;
  for (int64_t v : {4, 2}) {
    Config vectorised = tuned;
    vectorised["VECTOR_WIDTH"] = v;
    candidates.push_back(vectorised);
  }
  candidates.push_back(tuned);
  Config ones = tuned;
  for (auto& [name, value] : ones) value = 1;
  ones["USE_LOCAL"] = 0;
  for (const auto& [name, value] : ones_overrides) ones[name] = value;
  candidates.push_back(ones);
  return candidates;
}

Config first_valid(const std::vector<Config>& candidates, const std::vector<Parameter>& parameters,
                   const std::vector<Constraint>& constraints, const ConvProblem& problem, const DeviceInfo& device) {
  for (const Config& config : candidates) {
    const bool values_ok = std::all_of(parameters.begin(), parameters.end(), [&](const Parameter& p) {
      const auto it = config.find(p.name);
      return it != config.end() && std::find(p.values.begin(), p.values.end(), it->second) != p.values.end();
    });
    const ConstraintContext context{config, problem, device};
    if (values_ok &&
        std::all_of(constraints.begin(), constraints.end(), [&](const Constraint& c) { return c.holds(context); })) {
      return config;
    }
  }
  return candidates.back();
}

void fit_extent(Config& config, const std::string& tile, const std::string& threads, int64_t extent) {
  while (config[tile] * config[threads] > pow2_ceil(extent)) {
    if (config[threads] > 1) {
      config[threads] /= 2;
    } else {
      config[tile] /= 2;
    }
  }
}

std::map<std::string, std::string> kernel_defines(const ConvProblem& problem, const Config& config) {
  auto defines = problem_defines(problem);
  for (const auto& [name, value] : config) defines[name] = std::to_string(value);
  return defines;
}

}  // namespace direct_tiled

}  // namespace convtune
