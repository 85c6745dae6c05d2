// Carrying a tuned configuration to another problem: the family's rescaling (carry_config), then the valid
// configuration with the fewest and smallest parameter changes, so a nearest tuned shape's parameters still serve
// when a split or tile no longer fits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/tuning_db/shape_distance.h"

namespace convtune {

namespace {

// How far one parameter moves: octaves for sizes (16 -> 8 costs the same as 16 -> 32), and a whole step plus
// the difference where zero is involved (a flag or "no cap", which changes what the kernel does).
double change_cost(int64_t from, int64_t to) {
  if (from == to) return 0;
  if (from > 0 && to > 0) return std::abs(std::log2(double(to) / double(from)));
  return 1 + std::abs(std::log2(double(std::abs(to - from)) + 1));
}

// "SPLIT_K 32 -> 16, TILE_K 8 -> 4": every parameter of `from` whose value `to` changes, in name order.
std::string describe_changes(const Config& from, const Config& to) {
  std::string text;
  for (const auto& [name, value] : to) {
    const auto it = from.find(name);
    if (it != from.end() && it->second != value) {
      text += fmt::format("{}{} {} -> {}", text.empty() ? "" : ", ", name, it->second, value);
    }
  }
  return text;
}

}  // namespace

std::optional<FittedConfig> fit_config(const KernelFamily& family, const Config& config, const Problem& problem,
                                       const DeviceInfo& device) {
  if (config_problem(family, config, problem, device).empty()) return FittedConfig{config, {}};
  const std::vector<Parameter> parameters = family.parameters(problem);
  // Only value changes are repaired: a missing or unknown parameter means the entry is from other kernel code.
  if (config.size() != parameters.size()) return std::nullopt;
  for (const Parameter& p : parameters) {
    if (!config.count(p.name)) return std::nullopt;
  }
  struct Change {
    size_t parameter;
    int64_t value;
    double cost;
  };
  std::vector<Change> changes;  // every single-parameter move to another candidate value
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t from = config.at(parameters[i].name);
    for (int64_t to : parameters[i].values) {
      if (to != from) changes.push_back({i, to, change_cost(from, to)});
    }
  }
  // Stable: equal moves keep the family's parameter and candidate order, so the result does not vary by library.
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) { return a.cost < b.cost; });
  // One parameter changed, the smallest move first.
  for (const Change& c : changes) {
    Config moved = config;
    moved[parameters[c.parameter].name] = c.value;
    if (config_problem(family, moved, problem, device).empty()) {
      return FittedConfig{moved, describe_changes(config, moved)};
    }
  }
  // Two parameters (a tile and the thread count that divides it, say): the smallest total move.
  double best_cost = std::numeric_limits<double>::infinity();
  std::optional<FittedConfig> best;
  for (size_t a = 0; a < changes.size(); ++a) {
    for (size_t b = a + 1; b < changes.size(); ++b) {
      const Change &x = changes[a], &y = changes[b];
      if (x.parameter == y.parameter || x.cost + y.cost >= best_cost) continue;
      Config moved = config;
      moved[parameters[x.parameter].name] = x.value;
      moved[parameters[y.parameter].name] = y.value;
      if (config_problem(family, moved, problem, device).empty()) {
        best_cost = x.cost + y.cost;
        best = FittedConfig{moved, describe_changes(config, moved)};
      }
    }
  }
  return best;
}

std::optional<FittedConfig> carry_config(const KernelFamily& family, const Config& tuned,
                                         const Problem& tuned_problem, const Problem& problem,
                                         const DeviceInfo& device) {
  // An entry of this very shape (in a mode that serves this one) runs as it was tuned: only a nearest shape's
  // configuration is carried. Before this check winograd's exact entries ran with the default's chunk and slices,
  // not their own (a tuned 0.884 ms configuration ran at 1.57 ms once its tile was replaced as well).
  const bool exact = same_shape(tuned_problem, problem);
  // A shape the family judges to be in another regime keeps the entry's word that the family is fast here, not its
  // configuration: the family's built-in default runs (without it, a refused cpu_blocked entry left the tuned
  // cpu_direct baseline of the same shape to serve fmnist2 at 30x the default's time).
  if (!exact) {
    if (std::string why = family.carry_refusal(tuned, tuned_problem, problem, device); !why.empty())
      return FittedConfig{family.default_config(problem, device), fmt::format("the built-in default instead ({})", why)};
  }
  const Config carried = exact ? tuned : family.carry_config(tuned, tuned_problem, problem, device);
  std::optional<FittedConfig> fitted = fit_config(family, carried, problem, device);
  // Described against what was tuned: the rescaling and the repair are one change to the user.
  if (fitted) fitted->changes = describe_changes(tuned, fitted->config);
  return fitted;
}

std::string clamped_by_shape(const KernelFamily& family, const Config& tuned, const Problem& tuned_problem,
                             const Problem& problem, const DeviceInfo& device, const std::vector<std::string>& sizes) {
  for (const Parameter& p : family.parameters(tuned_problem)) {
    if (std::find(sizes.begin(), sizes.end(), p.name) == sizes.end()) continue;
    const auto it = tuned.find(p.name);
    if (it == tuned.end()) continue;
    const int64_t value = it->second;
    int64_t freed = value;  // the largest larger value `problem` admits
    bool tuned_had_larger = false;
    for (int64_t candidate : p.values) {
      if (candidate <= value) continue;
      Config moved = tuned;
      moved[p.name] = candidate;
      if (config_problem(family, moved, tuned_problem, device).empty()) {
        tuned_had_larger = true;
        break;
      }
      if (config_problem(family, moved, problem, device).empty()) freed = std::max(freed, candidate);
    }
    if (!tuned_had_larger && freed > value) {
      return fmt::format("{} {}: the largest {} allowed; {} allows up to {}", p.name, value,
                         tuned_problem.to_string(), problem.to_string(), freed);
    }
  }
  return {};
}

}  // namespace convtune
