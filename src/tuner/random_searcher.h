// RandomSearcher: configurations in a seeded random order, each at most once.
#pragma once

#include <random>

#include "src/tuner/searcher.h"
#include "src/tuner/shuffled_order.h"

namespace convtune {

class RandomSearcher final : public Searcher {
 public:
  RandomSearcher(std::span<const Config> configs, uint64_t seed)
      : Searcher(configs), order_(configs.size()), rng_(seed) {}
  std::string name() const override { return "random"; }

 protected:
  std::optional<size_t> choose() override {
    return order_.next(rng_, [this](size_t i) { return was_proposed(i); });
  }
  void learn(size_t, std::optional<double>) override {}

 private:
  ShuffledOrder order_;
  std::mt19937_64 rng_;
};

}  // namespace convtune
