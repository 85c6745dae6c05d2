// Tensor storage, NCHW indexing and seeded random fill.
#include "convtune/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <random>

#include "convtune/error.h"

namespace convtune {

Tensor::Tensor(std::vector<int64_t> shape, float value) : shape_(std::move(shape)) {
  int64_t count = 1;
  for (int64_t d : shape_) {
    if (d <= 0) throw InvalidArgument(fmt::format("tensor shape {} has a non-positive dimension", fmt::join(shape_, "x")));
    count *= d;
  }
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
