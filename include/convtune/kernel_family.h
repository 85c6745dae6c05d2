// KernelFamily: the one description of a kernel family (DESIGN.md convention 2) that the library, the tuner
// and the tests share: tunable parameters and their candidate values, named constraints, which problems it
// supports, its local-memory use, and how it turns a problem + parameters into launches.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/conv_problem.h"

namespace convtune {

// One parameter assignment: name -> value. Sorted, so it prints and hashes the same everywhere.
using Config = std::map<std::string, int64_t>;
std::string to_string(const Config& config);  // "TILE_K=8,THREADS_M=16"
// A configuration made to fit a problem other than the one it was tuned for, and what was changed
// ("SPLIT_K 32 -> 16"; empty when it fit as it was). See fit_config in convtune/plan.h.
struct FittedConfig {
  Config config;
  std::string changes;
};
Config parse_config(std::string_view text);    // the inverse; throws InvalidArgument

struct Parameter {
  std::string name;             // TILE_M, THREADS_N, VECTOR_WIDTH...
  std::vector<int64_t> values;  // candidates, in the order a search should try them
  std::string description;
};

// What a constraint may look at: the partial configuration (only parameters listed in `uses` are read),
// the problem and the device.
struct ConstraintContext {
  const Config& config;
  const ConvProblem& problem;
  const DeviceInfo& device;
};

struct Constraint {
  std::string name;               // "threads per work-group within the device limit"
  std::vector<std::string> uses;  // parameters it reads; it is checked as soon as all are assigned
  std::function<bool(const ConstraintContext&)> holds;
};

// Fused work after a forward convolution. Bias and ReLU apply per output element; pool 2 is a 2x2 max-pool
// with stride 2 after ReLU, so the pre-pool tensor never reaches global memory (seed 000's layer).
struct Epilogue {
  bool bias = false;
  bool relu = false;
  int pool = 1;  // 1: none, 2: 2x2 max-pool
  bool any() const { return bias || relu || pool > 1; }
  friend bool operator==(const Epilogue&, const Epilogue&) = default;
};
std::string to_string(const Epilogue& e);

// Shape of y after the epilogue (pooling shrinks P and Q).
int64_t pooled_extent(int64_t extent, const Epilogue& e);

// One kernel launch of a plan; arguments are bound by name: "x", "w", "y", "bias" or "workspaceN" are buffers
// (the plan's operands or its own scratch), anything else is looked up in `scalars`.
struct LaunchStep {
  std::string kernel;
  std::vector<std::string> args;
  std::map<std::string, KernelArg> scalars;
  LaunchGeometry geometry;
};

// What a family produces for one problem + configuration: the program to compile and the launches to run.
struct KernelRecipe {
  ProgramSource source;
  std::vector<size_t> workspace_bytes;  // scratch buffers the launches name workspace0, workspace1...
  std::vector<LaunchStep> steps;
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual std::string name() const = 0;  // "implicit_gemm", "direct_tiled", "im2col_gemm"
  virtual std::string description() const = 0;

  // Empty when the family computes this problem (with this epilogue) on this device; else why not.
  virtual std::string unsupported_reason(const ConvProblem& problem, const Epilogue& epilogue,
                                         const DeviceInfo& device) const = 0;
  virtual std::vector<Parameter> parameters(const ConvProblem& problem) const = 0;
  virtual std::vector<Constraint> constraints(const ConvProblem& problem) const = 0;
  // A configuration that is valid for the problem and device and reasonably fast without tuning.
  virtual Config default_config(const ConvProblem& problem, const DeviceInfo& device) const = 0;
  virtual size_t local_memory_bytes(const Config& config, const ConvProblem& problem) const = 0;
  // Why this family, untuned, is expected to run the problem far slower than another family would (empty when
  // it is not): a plan without tuning data then takes the next family that supports the problem.
  virtual std::string untuned_poor_fit(const ConvProblem& /*problem*/) const { return {}; }
  // A configuration tuned for `tuned_problem`, carried to `problem` (a nearest tuned shape's): parameters that
  // decompose the problem rather than shape the kernel may be recomputed for the new shape. Validity is not this
  // function's concern (fit_config in convtune/plan.h repairs that). Default: unchanged.
  virtual Config carry_config(const Config& tuned, const ConvProblem& /*tuned_problem*/,
                              const ConvProblem& /*problem*/, const DeviceInfo& /*device*/) const {
    return tuned;
  }
  // Program + launches for a valid configuration.
  virtual KernelRecipe recipe(const ConvProblem& problem, const Epilogue& epilogue, const Config& config,
                              const DeviceInfo& device) const = 0;
};

// Every family built into convtune, in the order a plan without tuning data tries them.
const std::vector<std::unique_ptr<KernelFamily>>& kernel_families();
const KernelFamily& kernel_family(std::string_view name);  // throws InvalidArgument listing the names

// Hash of the expanded kernel source a family compiles for this problem (its default configuration's recipe):
// the tuning database stores it with every entry, so results measured on other kernel code are not trusted.
std::string kernel_source_hash(const KernelFamily& family, const ConvProblem& problem, const DeviceInfo& device);

// The problem's shape as compile-time defines (N, C, H, W, K, R, S, P, Q, STRIDE_H, ..., GROUPS, and DIRECTION:
// 0 forward, 1 backward-data, 2 backward-filter, in Direction's order), shared by
// every family so each kernel sees the same names.
std::map<std::string, std::string> problem_defines(const ConvProblem& problem);

}  // namespace convtune
