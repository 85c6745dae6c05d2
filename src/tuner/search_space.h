// SearchSpace: every valid configuration of a kernel family for one problem on one device, enumerated
// depth-first with each named constraint checked as soon as the parameters it uses are assigned, so whole
// subtrees are pruned before anything is compiled.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "convtune/kernel_family.h"

namespace convtune {

class SearchSpace {
 public:
  SearchSpace(const KernelFamily& family, const Problem& problem, const DeviceInfo& device);

  const std::vector<Config>& configs() const { return configs_; }
  size_t size() const { return configs_.size(); }
  double raw_size() const { return raw_size_; }  // product of the candidate counts
  // How many partial or full assignments each constraint rejected.
  const std::map<std::string, int64_t>& rejections() const { return rejections_; }

  // `count` distinct valid configurations drawn with a fixed seed (all of them when there are fewer).
  std::vector<Config> sample(size_t count, uint64_t seed) const;

 private:
  std::vector<Config> configs_;
  double raw_size_ = 1;
  std::map<std::string, int64_t> rejections_;
};

}  // namespace convtune
