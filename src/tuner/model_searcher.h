// ModelSearcher: fits a cost model to the measured configurations and proposes the unmeasured one with the
// best predicted time. The model is a ridge least-squares fit of log(time) on a quadratic in the lattice
// coordinates (log2 of each parameter, rescaled): constant, linear, squares and pairwise products, which can
// describe a bowl with tilted axes. Exploration: random configurations first, then a random one with a
// fixed probability.
#pragma once

#include <random>
#include <vector>

#include "src/tuner/config_lattice.h"
#include "src/tuner/searcher.h"
#include "src/tuner/shuffled_order.h"

namespace convtune {

class ModelSearcher final : public Searcher {
 public:
  ModelSearcher(std::span<const Config> configs, const SearcherOptions& options);
  std::string name() const override { return "model"; }

  // Predicted time in ms of configuration `index` under the current fit (refits if results arrived).
  double predicted_ms(size_t index);
  size_t feature_count() const { return feature_count_; }
  size_t initial_random() const { return initial_random_; }

 protected:
  std::optional<size_t> choose() override;
  void learn(size_t index, std::optional<double> ms) override;

 private:
  void features(size_t index, std::vector<double>& out) const;
  double predict_log(size_t index, std::vector<double>& scratch) const;
  void fit();

  ConfigLattice lattice_;
  std::mt19937_64 rng_;
  ShuffledOrder random_order_;
  size_t feature_count_;
  size_t initial_random_;
  double exploration_;
  std::vector<size_t> measured_;     // successful configurations, in the order their results came
  std::vector<double> measured_log_;  // their log(ms)
  std::vector<double> coefficients_;
  bool fitted_ = false;
};

}  // namespace convtune
