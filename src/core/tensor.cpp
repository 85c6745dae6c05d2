// Tensor storage, NCHW indexing and seeded random fill.
#include "convtune/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <random>

#include "convtune/error.h"
#include "src/core/checked_math.h"
#include "src/core/resources.h"

namespace convtune {

Tensor::Tensor(std::vector<int64_t> shape, float value) : shape_(std::move(shape)) {
  int64_t count = 1;
  for (int64_t d : shape_) {
    if (d <= 0) throw InvalidArgument(fmt::format("tensor shape {} has a non-positive dimension", fmt::join(shape_, "x")));
    const auto product = checked_mul<int64_t>(count, d);
    if (!product || *product > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(sizeof(float))) {
      throw InvalidArgument(fmt::format("tensor shape {} holds more elements than memory can", fmt::join(shape_, "x")));
    }
    count = *product;
  }
  require_host_memory(static_cast<uint64_t>(count) * sizeof(float),
                      fmt::format("a host tensor of {} floats", fmt::join(shape_, "x")));
  data_.assign(static_cast<size_t>(count), value);
}

float& Tensor::at(int64_t n, int64_t c, int64_t h, int64_t w) {
  return data_[static_cast<size_t>(((n * shape_[1] + c) * shape_[2] + h) * shape_[3] + w)];
}

float Tensor::at(int64_t n, int64_t c, int64_t h, int64_t w) const {
  return data_[static_cast<size_t>(((n * shape_[1] + c) * shape_[2] + h) * shape_[3] + w)];
}

void Tensor::fill(float value) { std::fill(data_.begin(), data_.end(), value); }

void Tensor::fill_random(uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : data_) v = dist(rng);
}

std::string Tensor::shape_string() const { return fmt::format("{}", fmt::join(shape_, "x")); }

}  // namespace convtune
