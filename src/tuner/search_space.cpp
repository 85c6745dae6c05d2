// Depth-first enumeration with early constraint checks, and seeded sampling.
#include "src/tuner/search_space.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>

namespace convtune {

SearchSpace::SearchSpace(const KernelFamily& family, const Problem& problem, const DeviceInfo& device,
                         const std::function<bool(const Config&)>& keep, size_t max_kept,
                         std::optional<std::chrono::steady_clock::time_point> deadline) {
  const std::vector<Parameter> parameters = family.parameters(problem);
  const std::vector<Constraint> constraints = family.constraints(problem);
  for (const auto& p : parameters) raw_size_ *= static_cast<double>(p.values.size());

  // Each constraint is attached to the depth at which its last parameter is assigned.
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < parameters.size(); ++i) index_of.emplace(parameters[i].name, i);
  // A constraint reads only the parameters it names (ParameterTable hands it those and zeros), so its verdict is a
  // function of their values: remembered in a table indexed by their value positions, it is computed once per
  // combination. fft's spaces (13-55 million points) took 5-22 s here and 17-44 s on an H100 host, most of it in
  // the map lookups of constraints evaluated again for every deeper assignment.
  struct Check {
    const Constraint* constraint;
    std::vector<size_t> uses;     // parameter indices
    std::vector<size_t> strides;  // of their value positions in `verdicts`
    std::vector<int8_t> verdicts;  // -1 not yet computed, 0 fails, 1 holds; empty: not remembered
  };
  constexpr size_t kMaxVerdicts = size_t{1} << 20;
  std::vector<std::vector<Check>> at_depth(parameters.size() + 1);
  for (const Constraint& c : constraints) {
    size_t depth = 0;
    Check check{&c, {}, {}, {}};
    bool all_known = !c.uses.empty();
    for (const std::string& used : c.uses) {
      const auto it = index_of.find(used);
      if (it == index_of.end()) {
        all_known = false;
        continue;
      }
      depth = std::max(depth, it->second + 1);
      if (std::find(check.uses.begin(), check.uses.end(), it->second) == check.uses.end())
        check.uses.push_back(it->second);
    }
    // A constraint naming no parameter (or an unknown one) is checked on complete configurations.
    if (c.uses.empty()) depth = parameters.size();
    size_t combinations = 1;
    for (size_t u : check.uses) {
      check.strides.push_back(combinations);
      combinations *= std::max<size_t>(1, parameters[u].values.size());
      if (combinations > kMaxVerdicts) all_known = false;
    }
    if (all_known) check.verdicts.assign(combinations, -1);
    at_depth[depth].push_back(std::move(check));
  }

  // Every parameter holds a slot in the map from the start (its first value until assigned), so that assigning one
  // writes through a kept iterator instead of searching the map by name.
  Config config;
  std::vector<Config::iterator> slot(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    slot[i] = config.emplace(parameters[i].name, parameters[i].values.empty() ? 0 : parameters[i].values.front()).first;
  }
  std::vector<size_t> position(parameters.size(), 0);  // each assigned parameter's value position
  const ConstraintContext context{config, problem, device};
  auto holds_at = [&](size_t depth) {
    for (Check& check : at_depth[depth]) {
      bool holds;
      if (check.verdicts.empty()) {
        holds = check.constraint->holds(context);
      } else {
        size_t key = 0;
        for (size_t i = 0; i < check.uses.size(); ++i) key += position[check.uses[i]] * check.strides[i];
        int8_t& verdict = check.verdicts[key];
        if (verdict < 0) verdict = check.constraint->holds(context) ? 1 : 0;
        holds = verdict == 1;
      }
      if (!holds) {
        ++rejections_[check.constraint->name];
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
      } else if (const uint64_t place = rng() % count_; place < max_kept) {
        configs_[place] = config;
      }
      return;
    }
    const Parameter& p = parameters[depth];
    for (size_t v = 0; v < p.values.size(); ++v) {
      slot[depth]->second = p.values[v];
      position[depth] = v;
      if (holds_at(depth + 1)) assign(depth + 1);
    }
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
