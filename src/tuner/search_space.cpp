// Depth-first enumeration with early constraint checks, and seeded sampling.
#include "src/tuner/search_space.h"

#include <algorithm>
#include <functional>
#include <random>

namespace convtune {

SearchSpace::SearchSpace(const KernelFamily& family, const Problem& problem, const DeviceInfo& device,
                         const std::function<bool(const Config&)>& keep, size_t max_kept,
                         std::optional<std::chrono::steady_clock::time_point> deadline) {
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
  // Reservoir sampling (Knuth's algorithm R): after n configurations each is kept with probability max_kept / n.
  // Assigning over a kept map reuses its nodes, so a full reservoir allocates nothing.
  std::mt19937_64 rng(0x5eed);
  uint64_t nodes = 0;  // the deadline is read every 4096 nodes (a clock read costs about what a node does)
  std::function<void(size_t)> assign = [&](size_t depth) {
    if (deadline && (++nodes & 4095) == 0 && std::chrono::steady_clock::now() > *deadline) stopped_early_ = true;
    if (stopped_early_) return;
    if (depth == parameters.size()) {
      if (keep && !keep(config)) return;
      ++count_;
      if (configs_.size() < max_kept) {
        configs_.push_back(config);
      } else if (const uint64_t slot = rng() % count_; slot < max_kept) {
        configs_[slot] = config;
      }
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
  if (!sampled() || configs_.empty()) return;
  // The default belongs in every sample that could hold it: the tuner starts from it.
  Config default_config;
  try {
    default_config = family.default_config(problem, device);
  } catch (const std::exception&) {
    return;
  }
  if (std::find(configs_.begin(), configs_.end(), default_config) != configs_.end()) return;
  if (keep && !keep(default_config)) return;
  for (const Parameter& p : parameters) {
    const auto it = default_config.find(p.name);
    if (it == default_config.end() || std::find(p.values.begin(), p.values.end(), it->second) == p.values.end()) return;
  }
  const ConstraintContext full{default_config, problem, device};
  for (const Constraint& c : constraints)
    if (!c.holds(full)) return;
  configs_.front() = default_config;
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
