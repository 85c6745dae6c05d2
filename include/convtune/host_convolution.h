// HostConvolution: a convolution implementation that works on host arrays. The CPU paths implement it
// directly; device plans are wrapped into it so the conformance harness and bench treat all alike.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/conv_problem.h"

namespace convtune {

// Operands named after the forward pass; problem.direction says which one is written:
// forward writes y from x and w, backward-data writes x (dx) from y (dy) and w, backward-filter writes w (dw)
// from x and y (dy). The written operand is overwritten, never accumulated into.
struct ConvOperands {
  float* x = nullptr;
  float* w = nullptr;
  float* y = nullptr;
};

class HostConvolution {
 public:
  virtual ~HostConvolution() = default;
  virtual std::string name() const = 0;
  // Empty when this implementation computes the problem; otherwise the reason it does not.
  virtual std::string unsupported_reason(const ConvProblem& problem) const;
  virtual void run(const ConvProblem& problem, const ConvOperands& operands) = 0;
};

// The CPU paths: "reference" (float64 accumulation, the oracle), "sequential" (plain FP32 loops, one thread,
// seed 000's test-seq baseline), "threaded" (the same loops on every core) and "blocked" (cpu_blocked's SIMD
// kernels, each problem's default configuration; "blocked[ORIENT=0,VECS=2,...]" fixes one configuration).
std::vector<std::string> cpu_convolution_names();
std::unique_ptr<HostConvolution> make_cpu_convolution(std::string_view name);

}  // namespace convtune
