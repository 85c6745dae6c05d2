// Depth-first enumeration with early constraint checks, and seeded sampling.
#include "src/tuner/search_space.h"

#include <algorithm>
#include <functional>
#include <random>

namespace convtune {

SearchSpace::SearchSpace(const KernelFamily& family, const Problem& problem, const DeviceInfo& device) {
  const std::vector<Parameter> parameters = family.parameters(problem);
  const std::vector<Constraint> constraints = family.constraints(problem);
  for (const auto& p : parameters) raw_size_ *= static_cast<double>(p.values.size());

  // Each constraint is attached to the depth at which its last parameter is assigned.
  std::vector<std::vector<const Constraint*>> at_depth(parameters.size() + 1);
  for (const Constraint& c : constraints) {
    size_t depth = 0;
    for (const std::string& used : c.uses) {
      for (size_t i = 0; i < parameters.size(); ++i)
        if (parameters[i].name == used) depth = std::max(depth, i + 1);
    }
    // A constraint naming no parameter (or an unknown one) is checked on complete configurations.
    if (c.uses.empty()) depth = parameters.size();
    at_depth[depth].push_back(&c);
  }

  Config config;
  const ConstraintContext context{config, problem, device};
  auto holds_at = [&](size_t depth) {
    for (const Constraint* c : at_depth[depth]) {
      if (!c->holds(context)) {
        ++rejections_[c->name];
        return false;
      }
    }
    return true;
  };
  if (!holds_at(0)) return;
  std::function<void(size_t)> assign = [&](size_t depth) {
    if (depth == parameters.size()) {
      configs_.push_back(config);
      return;
    }
    const Parameter& p = parameters[depth];
    for (int64_t value : p.values) {
      config[p.name] = value;
      if (holds_at(depth + 1)) assign(depth + 1);
    }
    config.erase(p.name);
  };
  assign(0);
}

std::vector<Config> SearchSpace::sample(size_t count, uint64_t seed) const {
  if (count >= configs_.size()) return configs_;
  std::vector<size_t> index(configs_.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(index.begin(), index.end(), rng);
  index.resize(count);
  std::sort(index.begin(), index.end());
  std::vector<Config> out;
  for (size_t i : index) out.push_back(configs_[i]);
  return out;
}

}  // namespace convtune
