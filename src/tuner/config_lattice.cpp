// Maps configurations to grid positions and back, so a neighbour is one hash lookup.
#include "src/tuner/config_lattice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "convtune/error.h"
#include "src/core/hash.h"

namespace convtune {

size_t ConfigLattice::PositionHash::operator()(const std::vector<uint32_t>& p) const {
  return static_cast<size_t>(fnv1a64(p.data(), p.size() * sizeof(uint32_t)));
}

ConfigLattice::ConfigLattice(std::span<const Config> configs) {
  if (configs.empty()) return;
  for (const auto& [name, value] : configs.front()) names_.push_back(name);
  std::vector<std::set<int64_t>> seen(names_.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& config = configs[i];
    size_t dim = 0;
    bool same_names = config.size() == names_.size();
    for (auto it = config.begin(); same_names && it != config.end(); ++it, ++dim) {
      same_names = it->first == names_[dim];
      if (same_names) seen[dim].insert(it->second);
    }
    if (!same_names)
      throw InvalidArgument(fmt::format("configuration {} ({}) does not assign the same parameters as the first ({})",
                                        i, to_string(config), to_string(configs.front())));
  }
  for (const auto& s : seen) values_.emplace_back(s.begin(), s.end());

  std::vector<bool> logarithmic(names_.size());
  std::vector<double> low(names_.size()), high(names_.size());
  for (size_t d = 0; d < names_.size(); ++d) {
    logarithmic[d] = values_[d].front() > 0;
    auto coordinate = [&](int64_t v) { return logarithmic[d] ? std::log2(static_cast<double>(v)) : double(v); };
    low[d] = coordinate(values_[d].front());
    high[d] = coordinate(values_[d].back());
  }

  positions_.reserve(configs.size());
  coordinates_.reserve(configs.size());
  index_of_.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    std::vector<uint32_t> position(names_.size());
    std::vector<double> coordinate(names_.size());
    size_t d = 0;
    for (const auto& [name, value] : configs[i]) {
      const auto& vs = values_[d];
      position[d] = static_cast<uint32_t>(std::lower_bound(vs.begin(), vs.end(), value) - vs.begin());
      const double c = logarithmic[d] ? std::log2(static_cast<double>(value)) : static_cast<double>(value);
      coordinate[d] = high[d] > low[d] ? (c - low[d]) / (high[d] - low[d]) : 0.0;
      ++d;
    }
    index_of_.emplace(position, i);
    positions_.push_back(std::move(position));
    coordinates_.push_back(std::move(coordinate));
  }
}

std::vector<size_t> ConfigLattice::neighbours(size_t index) const {
  std::vector<size_t> out;
  std::vector<uint32_t> probe = positions_[index];
  for (size_t d = 0; d < probe.size(); ++d) {
    const uint32_t here = probe[d];
    for (int step : {-1, 1}) {
      if (step < 0 && here == 0) continue;
      if (step > 0 && here + 1 >= values_[d].size()) continue;
      probe[d] = here + step;
      if (auto it = index_of_.find(probe); it != index_of_.end()) out.push_back(it->second);
    }
    probe[d] = here;
  }
  return out;
}

}  // namespace convtune
