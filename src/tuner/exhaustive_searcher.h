// ExhaustiveSearcher: every configuration in the space's order (the order the family lists its candidates).
#pragma once

#include "src/tuner/searcher.h"

namespace convtune {

class ExhaustiveSearcher final : public Searcher {
 public:
  explicit ExhaustiveSearcher(std::span<const Config> configs) : Searcher(configs) {}
  std::string name() const override { return "exhaustive"; }

 protected:
  std::optional<size_t> choose() override {
    if (next_ >= size()) return std::nullopt;
    return next_++;
  }
  void learn(size_t, std::optional<double>) override {}

 private:
  size_t next_ = 0;
};

}  // namespace convtune
