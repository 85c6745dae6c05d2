// ShuffledOrder: indices 0..n-1 in a seeded random order, shuffled lazily, skipping ones already taken.
#pragma once

#include <cstddef>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

namespace convtune {

class ShuffledOrder {
 public:
  explicit ShuffledOrder(size_t count) : order_(count) { std::iota(order_.begin(), order_.end(), size_t{0}); }

  // The next index in random order for which taken(index) is false; nullopt when none is left. An index that
  // is skipped as taken never comes back, which is right because taken never becomes false again.
  template <typename Taken>
  std::optional<size_t> next(std::mt19937_64& rng, const Taken& taken) {
    while (drawn_ < order_.size()) {
      // One Fisher-Yates step per draw, so a short search over a huge space shuffles only what it uses.
      std::uniform_int_distribution<size_t> pick(drawn_, order_.size() - 1);
      std::swap(order_[drawn_], order_[pick(rng)]);
      const size_t index = order_[drawn_++];
      if (!taken(index)) return index;
    }
    return std::nullopt;
  }

 private:
  std::vector<size_t> order_;
  size_t drawn_ = 0;
};

}  // namespace convtune
