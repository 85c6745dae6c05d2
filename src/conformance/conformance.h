// The conformance harness (the pattern of ggml's test-backend-ops): every case x direction x implementation
// against the float64 reference in full, on Workloads (seeded random inputs, poisoned outputs, canaries,
// tolerance by type and math mode), plus the adjoint identity that ties the three directions together.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "src/harness/implementation.h"

namespace convtune::conformance {

struct Case {
  std::string name;
  ConvProblem problem;  // direction is set per check
};

// The standard case list: 1x1 to 11x11 filters, stride 1/2/4, padding 0/1/2, dilation 2, groups and depthwise,
// C=1 and C=3, odd and non-square sizes, N=1 and N>1; a selection of them again in the channels-last layout.
const std::vector<Case>& standard_cases();

// A forward convolution with a fused epilogue (bias, residual, ReLU or its clamp), checked against the float64
// convolution with the epilogue applied after it.
struct EpilogueCase {
  std::string name;
  ConvProblem problem;  // forward; the element type is set per check
  Epilogue epilogue;
};

// Both layouts, with and without a bias, ReLU and ReLU6, channels in whole 16-byte chunks and not.
const std::vector<EpilogueCase>& epilogue_cases();

// `impl` (set_epilogue the case's epilogue; then reset to none) on a workload of the case in full. Unsupported
// combinations come back as a Check whose message starts with "unsupported: ".
harness::Check check_epilogue(harness::Implementation& impl, Device& device, const EpilogueCase& c, ElementType type,
                              uint64_t seed);

// <fwd(x,w), dy> = <x, bwd_data(dy,w)> = <w, bwd_filter(x,dy)>, each direction computed by `impl` on `device`.
harness::Check check_adjoint(harness::Implementation& impl, Device& device, const ConvProblem& problem, uint64_t seed);

struct Target {
  std::string name;  // "cpu/cpu_direct[THREADS=1]", "opencl:0/implicit_gemm[TILE_M=64,...]"
  Device* device = nullptr;
  std::function<std::unique_ptr<harness::Implementation>()> make;
};

struct Summary {
  int checks = 0;
  int passed = 0;
  int skipped = 0;  // the target declared the problem unsupported
  std::vector<std::string> failures;
};

// Checks every target on every case, all three directions (in full) and the adjoint identity; failures and a line
// per case go to `log` if set.
Summary run(const std::vector<Target>& targets, const std::vector<Case>& cases, uint64_t seed, std::ostream* log);

}  // namespace convtune::conformance
