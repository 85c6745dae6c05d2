// BenchTarget: what bench times for one layer and direction — a CPU path on host arrays, or a device Plan on
// device buffers — behind one interface, so verification and timing are done the same way for both.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/kernel_family.h"
#include "src/reference_libs/reference_library.h"

namespace convtune::cli {

class BenchTarget {
 public:
  virtual ~BenchTarget() = default;
  // Empty when the target computes the problem; else why not.
  virtual std::string unsupported_reason(const ConvProblem& problem) const = 0;
  // Compiles/allocates for the problem and fills the inputs with seeded random values (never all zero).
  virtual void prepare(const ConvProblem& problem) = 0;
  // Runs once and checks the written operand at sampled elements against the float64 reference;
  // returns the relative L2 error, throws Error when it exceeds the tolerance.
  virtual double verify() = 0;
  virtual Timing time(int warmup, int repeats) = 0;
  // Runs once more and returns the written operand on the host: what references are compared with.
  virtual std::vector<float> output() = 0;
  // The inputs as a reference library should see them: host copies, and the device buffers themselves when
  // the target runs on a device (so cuDNN and CLBlast read the very buffers convtune read).
  virtual reference::SharedOperands shared_operands() = 0;
  // What ran: "threaded", "implicit_gemm[TILE_M=64,...]".
  virtual std::string algorithm() const = 0;
};

// The CPU backend's paths: "reference", "sequential", "threaded".
std::unique_ptr<BenchTarget> make_cpu_target(Device& device, const std::string& algorithm);
// A device plan: a named family (or empty for the plan's own choice) and optional parameters.
std::unique_ptr<BenchTarget> make_plan_target(Device& device, const std::string& family,
                                              const std::optional<Config>& config);

}  // namespace convtune::cli
