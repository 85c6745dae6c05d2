// Optimisers: update parameters from their gradients, on the parameters' device (kernels) or on the host.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convtune/nn/layer.h"

namespace convtune::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One update of every parameter from its current gradient.
  virtual void step(Runtime& runtime, const std::vector<Parameter*>& parameters) = 0;
};

// Seed 002's rule: v = momentum * v - lr * grad; w += v (momentum 0: plain SGD).
std::unique_ptr<Optimizer> make_sgd(double learning_rate, double momentum);
// Adam (Kingma & Ba) with bias correction.
std::unique_ptr<Optimizer> make_adam(double learning_rate, double beta1 = 0.9, double beta2 = 0.999,
                                     double epsilon = 1e-8);

}  // namespace convtune::nn
