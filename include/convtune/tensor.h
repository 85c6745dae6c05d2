// Tensor: a host-memory array with a shape, NCHW layout, FP32 storage.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "convtune/types.h"

namespace convtune {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, float value = 0.0f);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }
  size_t bytes() const { return data_.size() * sizeof(float); }
  // The element type of its storage: FP32 (the only one host tensors hold so far).
  ElementType type() const { return ElementType::F32; }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }

  // NCHW element (4-D tensors only).
  float& at(int64_t n, int64_t c, int64_t h, int64_t w);
  float at(int64_t n, int64_t c, int64_t h, int64_t w) const;

  void fill(float value);
  // Uniform values in [lo, hi) from a fixed seed; used so inputs are never all zero and failures reproduce.
  void fill_random(uint64_t seed, float lo = -1.0f, float hi = 1.0f);

  std::string shape_string() const;  // "2x3x4x5"

 private:
  std::vector<int64_t> shape_;
  std::vector<float> data_;
};

}  // namespace convtune
