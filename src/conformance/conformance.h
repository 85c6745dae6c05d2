// The conformance harness (the pattern of ggml's test-backend-ops): every case x direction x implementation
// against the CPU reference, seeded random inputs, tolerance by precision, canaries after each output, plus
// the adjoint identity that ties the three directions together.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/host_convolution.h"

namespace convtune::conformance {

struct Case {
  std::string name;
  ConvProblem problem;  // direction is set per check
};

// The standard case list: 1x1 to 11x11 filters, stride 1/2/4, padding 0/1/2, dilation 2, groups and depthwise,
// C=1 and C=3, odd and non-square sizes, N=1 and N>1.
const std::vector<Case>& standard_cases();

// Allowed relative L2 error ||out - ref|| / ||ref|| for a problem: the precision's unit roundoff, grown with
// the square root of the reduction length as rounding errors of random-sign sums do.
double tolerance(const ConvProblem& problem);
int64_t reduction_length(const ConvProblem& problem);

struct Result {
  bool passed = false;
  double rel_l2_error = 0;
  double max_abs_error = 0;
  std::string message;  // why it failed, or a one-line summary
};

// Reference outputs for one problem and seed, computed once and shared by every implementation checked.
struct Inputs {
  std::vector<float> x, w, y;  // the operands the direction reads, random; the written one unused
  std::vector<float> expected;  // the reference's output
};
Inputs make_inputs(const ConvProblem& problem, uint64_t seed);

// Runs `impl` on copies of the inputs with its output poisoned (NaN) and followed by canary values, and compares.
Result check(HostConvolution& impl, const ConvProblem& problem, const Inputs& inputs);

// Checks the written operand of full-size `operands` (computed by any implementation) against the reference at
// `samples` random elements plus the first and last: how bench verifies layers too large for the full reference.
Result check_sampled(const ConvProblem& problem, const ConvOperands& operands, int samples, uint64_t seed);

// The same check with the reference values computed once, for checking many candidates on the same inputs (the
// tuner): the operands' inputs are read at construction; check() reads only the written operand it is given.
class SampledReference {
 public:
  SampledReference(const ConvProblem& problem, const ConvOperands& inputs, int samples, uint64_t seed);
  Result check(const float* written) const;
  size_t size() const { return positions_.size(); }

 private:
  ConvProblem problem_;
  std::vector<int64_t> positions_;
  std::vector<double> expected_;
};

// <fwd(x,w), dy> = <x, bwd_data(dy,w)> = <w, bwd_filter(x,dy)>, each direction computed by `impl`.
Result check_adjoint(HostConvolution& impl, const ConvProblem& problem, uint64_t seed);

struct Target {
  std::string name;  // "cpu/sequential", "opencl:0/implicit_gemm[TILE_M=64,...]"
  std::function<std::unique_ptr<HostConvolution>()> make;
};

struct Summary {
  int checks = 0;
  int passed = 0;
  int skipped = 0;  // the target declared the problem unsupported
  std::vector<std::string> failures;
};

// Checks every target on every case, all three directions and the adjoint identity; progress to `log` if set.
Summary run(const std::vector<Target>& targets, const std::vector<Case>& cases, uint64_t seed, std::ostream* log);

}  // namespace convtune::conformance
