// AnnealingSearcher: simulated annealing over the parameter lattice. A move changes one parameter to the
// adjacent candidate value and must land on a valid configuration; worse moves are accepted with a probability
// that shrinks as the temperature cools. Nothing is measured twice: a walk through already-measured
// neighbours reuses their times.
#pragma once

#include <limits>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "src/tuner/config_lattice.h"
#include "src/tuner/searcher.h"
#include "src/tuner/shuffled_order.h"

namespace convtune {

class AnnealingSearcher final : public Searcher {
 public:
  AnnealingSearcher(std::span<const Config> configs, const SearcherOptions& options);
  std::string name() const override { return "annealing"; }

  double temperature() const { return temperature_; }

 protected:
  std::optional<size_t> choose() override;
  void learn(size_t index, std::optional<double> ms) override;

 private:
  static constexpr double kUnmeasured = -1.0;
  static constexpr double kFailed = std::numeric_limits<double>::infinity();
  // A few random starting points before the walk, so it does not start in whatever corner the seed hits.
  static constexpr size_t kStartingSamples = 4;

  bool accept(double from_ms, double to_ms);
  bool unproposed(size_t i) const { return !was_proposed(i); }
  std::optional<size_t> restart_point();

  ConfigLattice lattice_;
  std::mt19937_64 rng_;
  ShuffledOrder random_order_;
  std::vector<double> time_ms_;  // kUnmeasured, kFailed or the measured time
  // Successful configurations by time that may still have unproposed neighbours: the restart candidates.
  // Ones found boxed in are dropped for good, since proposals are never taken back.
  std::set<std::pair<double, size_t>> frontier_;
  std::optional<size_t> current_;
  size_t results_ = 0;
  double temperature_;
  double cooling_;
};

}  // namespace convtune
