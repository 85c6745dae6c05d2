// Layer: one step of a network with explicit forward and backward passes on any backend, and its parameters.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convtune/nn/runtime.h"

namespace convtune::nn {

// A trainable tensor and its gradient (same shape), both on the layer's device.
struct Parameter {
  std::string name;  // "conv1.weight"
  DeviceTensor value;
  DeviceTensor grad;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;

  const std::string& name() const { return name_; }
  virtual std::string kind() const = 0;  // "conv2d", "dense", "relu"...
  // Everything that fixes the layer's parameter shapes and arithmetic ("conv2d 1->32 5x5 pad 2"): model
  // files store it, and loading checks it.
  virtual std::string spec() const = 0;
  // Output shape for an input shape; both include the batch as their first extent.
  virtual std::vector<int64_t> output_shape(const std::vector<int64_t>& input) const = 0;

  // y = f(x); y is allocated by the caller with output_shape(x.shape).
  virtual void forward(const DeviceTensor& x, const DeviceTensor& y) = 0;
  // From dL/dy: the parameters' gradients (overwritten, for this batch) and dL/dx when dx is not null
  // (the first layer needs none). x and y are what forward saw and produced.
  virtual void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy,
                        const DeviceTensor* dx) = 0;

  virtual std::vector<Parameter*> parameters() { return {}; }
  // Seeded initialisation on the host (identical on every backend), then uploaded.
  virtual void initialize(uint64_t /*seed*/) {}
  // True when y is x under another shape (Flatten): the network passes the same buffer through.
  virtual bool aliases_input() const { return false; }

 private:
  std::string name_;
};

}  // namespace convtune::nn
