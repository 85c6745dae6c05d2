// cpu_blocked: FP32 convolution on the CPU for every direction, stride, padding, dilation and group count, from
// register-blocked SIMD micro-kernels (Highway: AVX-512, AVX2, scalar) over packed, padded operand copies, split
// over the persistent thread pool. The narrow interface a CPU kernel family wraps: tunable parameters and named
// constraints, a default configuration, and a Convolution prepared once per problem + configuration.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/kernel_family.h"
#include "src/cpu_kernels/isa.h"

namespace convtune::cpu_blocked {

// Tunable parameters and their candidates (in the order a search should try them):
//   ALGO       0 = direct convolution, 1 = Winograd F(4x4, 3x3) (3x3 filters, stride 1, dilation 1): 36 GEMMs over
//              channels in VECS x COLS blocks; the other parameters then stay at their first value
//   ORIENT     forward/backward-data: 0 = vectors over output channels (weights loaded as vectors, input pixels
//              broadcast), 1 = vectors over output pixels (input rows loaded, weights broadcast).
//              backward-filter: 0 = vectors over input channels (broadcast kernel), 1 = vectors along output rows
//              (dot kernel, lanes summed at the end), 2 = vectors over output channels (dy copied channel-
//              interleaved), x broadcast along a row of filter taps.
//   VECS       vectors in the register block (backward-filter ORIENT 1: output channels, one dot product each)
//   COLS       broadcast columns in the register block: output pixels (ORIENT 0) or output channels (ORIENT 1);
//              backward-filter: output channels (ORIENT 0) or filter taps along a row (ORIENT 1, 2)
//   ROW_BLOCK  output rows per work item handed to a thread (backward-filter: rows per reduction tile); 0 = all
//   ORDER      forward/backward-data: 0 = channel blocks outside row blocks (weights stay in cache), 1 = rows
//              outside channel blocks (input rows stay in cache). backward-filter: 0 = threads split the output
//              tiles, 1 = threads split the reduction (each sums into its own copy, added at the end)
//   LAYOUT     forward/backward-data with ORIENT 0: the input copy, 0 = planar (padded NCHW), 1 = channel-
//              blocked (a vector of input channels per pixel: nChw16c on AVX-512, nChw8c on AVX2). backward-filter: 0
//   IC_CHUNK   forward/backward-data: input channels per pass over a row block (0 = all), so a pass's filter
//              slab and input rows stay in L2; later passes add to the outputs. backward-filter: 0
std::vector<Parameter> parameters(const ConvProblem& problem);
// Named constraints over those parameters for the problem on the active ISA (register file, compiled blocks,
// unit-stride rows for pixel vectors). Constraints read ISA facts, not the DeviceInfo they are given.
std::vector<Constraint> constraints(const ConvProblem& problem);
// A valid configuration that is reasonably fast without tuning.
Config default_config(const ConvProblem& problem);
// Empty when the module computes the problem; otherwise why not (only the precision: every FP32 problem that
// ConvProblem::validate() accepts is computed).
std::string unsupported_reason(const ConvProblem& problem);
// Empty when `config` sets every parameter to a candidate and meets every constraint; else the first problem,
// naming the parameter and what was expected.
std::string invalid_reason(const ConvProblem& problem, const Config& config);
// Every valid configuration for the problem on the active ISA (a few hundred), in parameter order: for sweeps and
// tests until the tuner's SearchSpace enumerates the family.
std::vector<Config> valid_configs(const ConvProblem& problem);

// Where a run's time went, host clock: the edge conversions (padded / channel-blocked input copies, the
// backward-filter result's conversion to KCRS), weight packing, and the micro-kernels.
struct StageTimes {
  double input_ms = 0;
  double weights_ms = 0;
  double compute_ms = 0;
  double output_ms = 0;
};

struct Plan;  // internal: geometry, packing layouts and the work split

// One problem + configuration, prepared once (layouts, work split, the ISA's kernels) and run many times.
class Convolution {
 public:
  // Throws InvalidArgument naming the parameter when `config` is invalid (invalid_reason), Unsupported when the
  // problem is not FP32.
  Convolution(const ConvProblem& problem, const Config& config);
  ~Convolution();
  Convolution(Convolution&&) noexcept;
  Convolution& operator=(Convolution&&) noexcept;

  // Scratch run() needs: packed weights, padded input copies, per-thread partial sums. Bounded by a small
  // multiple of the operands' sizes (about one input copy plus the weights).
  size_t workspace_bytes() const;

  // NCHW / KCRS operands named after the forward pass, as ConvOperands: forward writes y from x and w,
  // backward-data writes x from y and w, backward-filter writes w from x and y. The written operand is
  // overwritten; the others are only read. `workspace` holds workspace_bytes() bytes (any alignment).
  void run(float* x, float* w, float* y, void* workspace);

  // Packs `w` once into memory the Convolution owns; later runs use that copy and skip packing (weights that do
  // not change between runs: inference, benchmarks). Call again after w changes; forget_weights() goes back to
  // packing on every run. No effect for backward-filter, which writes the weights.
  void pack_weights(const float* w);
  void forget_weights();

  const StageTimes& last_times() const;
  Isa isa() const;
  const ConvProblem& problem() const;
  // "avx512, vectors over output channels, 2x14 block, ..." for logs and tables.
  std::string describe() const;

 private:
  std::unique_ptr<Plan> plan_;
};

}  // namespace convtune::cpu_blocked
