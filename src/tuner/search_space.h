// SearchSpace: every valid configuration of a kernel family for one problem on one device, enumerated
// depth-first with each named constraint checked as soon as the parameters it uses are assigned, so whole
// subtrees are pruned before anything is compiled. Spaces beyond max_kept configurations keep a seeded uniform
// sample of that many (plus the family's default): a Config is a map of about 1 KB, and a Winograd space of
// 300,000 points took seconds and hundreds of MB to hold, more than any tuning budget can search.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune {

class SearchSpace {
 public:
  static constexpr size_t kMaxKept = 10000;
  // `keep`: an extra filter (tune --only); the space is then the valid configurations it keeps. `deadline`: the
  // enumeration stops there (a tuning run's budget; fft's spaces of millions of points took 1-6 s each on PoCL and
  // held short tunes past their budget), keeping what it found by then (stopped_early()).
  SearchSpace(const KernelFamily& family, const Problem& problem, const DeviceInfo& device,
              const std::function<bool(const Config&)>& keep = {}, size_t max_kept = kMaxKept,
              std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // Every configuration of the space, or a sample of max_kept of them when sampled().
  const std::vector<Config>& configs() const { return configs_; }
  size_t size() const { return count_; }  // valid configurations, sampled or not (found ones, when stopped early)
  bool stopped_early() const { return stopped_early_; }
  bool sampled() const { return count_ > configs_.size(); }
  double raw_size() const { return raw_size_; }  // product of the candidate counts
  // How many partial or full assignments each constraint rejected.
  const std::map<std::string, int64_t>& rejections() const { return rejections_; }

  // `count` distinct valid configurations drawn with a fixed seed from configs() (all of them when there are fewer).
  std::vector<Config> sample(size_t count, uint64_t seed) const;

 private:
  std::vector<Config> configs_;
  size_t count_ = 0;
  bool stopped_early_ = false;
  double raw_size_ = 1;
  std::map<std::string, int64_t> rejections_;
};

}  // namespace convtune
