// Losses over a batch of outputs and integer class labels: the mean loss and dL/d(output) in one pass.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "convtune/nn/runtime.h"

namespace convtune::nn {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string name() const = 0;
  // Mean over the batch of the per-sample loss; writes grad = d(mean loss)/d(output). labels holds N int32
  // class indices on the same device; output and grad are N x classes.
  virtual double forward_backward(Runtime& runtime, const DeviceTensor& output, const Buffer& labels,
                                  const DeviceTensor& grad) = 0;
};

// Softmax over the classes, then cross-entropy -log p[label] (the output is logits).
std::unique_ptr<Loss> make_softmax_cross_entropy();
// 1/2 sum_c (output_c - onehot(label)_c)^2 per sample (seed 002's squared error).
std::unique_ptr<Loss> make_squared_error();

}  // namespace convtune::nn
