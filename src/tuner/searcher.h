// Searcher: the interface every search strategy implements (propose candidates, receive measurements), and the
// factory that builds a strategy by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune {

// Knobs shared by all strategies; each reads the ones it understands.
struct SearcherOptions {
  uint64_t seed = 1;
  // Annealing: temperature in units of log(time), so 0.1 first accepts a ~10% slower neighbour with
  // probability 1/e; it decays by `cooling` per measurement.
  double initial_temperature = 0.1;
  double cooling = 0.98;
  // Model: random configurations measured before the model is trusted (0: twice the model's coefficient
  // count, but no more than 2% of the space or 2 * parameters + 2, whichever is larger), and the probability
  // of a random proposal afterwards.
  size_t initial_random = 0;
  double exploration = 0.1;
};

// Proposes indices into a fixed list of valid configurations and learns from measured times.
// The configuration list is borrowed (a SearchSpace's configs()): it must outlive the searcher.
// No strategy ever proposes the same index twice, so no configuration is measured twice.
class Searcher {
 public:
  explicit Searcher(std::span<const Config> configs)
      : configs_(configs), proposed_(configs.size(), false), recorded_(configs.size(), false) {}
  virtual ~Searcher() = default;
  Searcher(const Searcher&) = delete;
  Searcher& operator=(const Searcher&) = delete;

  virtual std::string name() const = 0;

  // The next configuration to measure, or nullopt when every configuration has been proposed. May be called
  // several times before the results come back (a batch compiled in parallel).
  std::optional<size_t> next();
  // Up to `count` proposals at once.
  std::vector<size_t> next_batch(size_t count);
  // The measured time of a proposed configuration in ms; nullopt when it failed (compile, verification, launch).
  // Throws InvalidArgument for a configuration never proposed or already recorded.
  void record(size_t index, std::optional<double> ms);
  // A result known before the search (a default or a tuned neighbour measured earlier): marked proposed and
  // recorded, so the strategy learns from it and never proposes it again.
  void prime(size_t index, std::optional<double> ms);

  std::span<const Config> configs() const { return configs_; }
  size_t size() const { return configs_.size(); }
  size_t proposed_count() const { return proposed_count_; }
  bool was_proposed(size_t index) const { return proposed_[index]; }

 protected:
  // Strategy hooks: choose() returns an index not yet proposed (or nullopt when it has none left);
  // learn() sees each result once.
  virtual std::optional<size_t> choose() = 0;
  virtual void learn(size_t index, std::optional<double> ms) = 0;

 private:
  std::span<const Config> configs_;
  std::vector<bool> proposed_;
  std::vector<bool> recorded_;
  size_t proposed_count_ = 0;
};

// "exhaustive", "random", "annealing" or "model"; throws InvalidArgument listing the names otherwise.
std::unique_ptr<Searcher> make_searcher(std::string_view name, std::span<const Config> configs,
                                        const SearcherOptions& options = {});
const std::vector<std::string>& searcher_names();

}  // namespace convtune
