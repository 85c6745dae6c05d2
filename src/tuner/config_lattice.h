// ConfigLattice: the valid configurations as points on the grid of each parameter's sorted candidate values,
// for strategies that move between neighbours or fit a model over parameter values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune {

class ConfigLattice {
 public:
  // Throws InvalidArgument when the configurations do not all assign the same parameters.
  explicit ConfigLattice(std::span<const Config> configs);

  size_t size() const { return positions_.size(); }
  size_t dimensions() const { return names_.size(); }
  const std::vector<std::string>& parameter_names() const { return names_; }
  // Sorted distinct values parameter `dim` takes across the valid configurations.
  const std::vector<int64_t>& values(size_t dim) const { return values_[dim]; }
  // Position of configuration `index` along each parameter axis (an index into values(dim)).
  const std::vector<uint32_t>& position(size_t index) const { return positions_[index]; }

  // Valid configurations that differ from `index` in one parameter, moved to the adjacent candidate value.
  std::vector<size_t> neighbours(size_t index) const;

  // Coordinates where powers of two are evenly spaced: log2 of each value for parameters whose values are all
  // positive (tile sizes, widths), the value itself otherwise (flags, offsets). Each axis is then rescaled to
  // [0, 1] so no parameter dominates a distance or a regression by its units.
  const std::vector<double>& coordinates(size_t index) const { return coordinates_[index]; }

 private:
  struct PositionHash {
    size_t operator()(const std::vector<uint32_t>& p) const;
  };
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> values_;
  std::vector<std::vector<uint32_t>> positions_;
  std::vector<std::vector<double>> coordinates_;
  std::unordered_map<std::vector<uint32_t>, size_t, PositionHash> index_of_;
};

}  // namespace convtune
