// Plan: problem + device + (family, parameters) -> compiled, bound, runnable. The one path that tests, bench,
// the tuner and the network layers use to run a convolution on a device.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/host_convolution.h"
#include "convtune/kernel_family.h"

namespace convtune {

// The device buffers a plan reads and writes, named after the forward pass as in ConvOperands.
struct DeviceOperands {
  const Buffer* x = nullptr;
  const Buffer* w = nullptr;
  const Buffer* y = nullptr;
  const Buffer* bias = nullptr;  // K floats, when the epilogue adds a bias
};

class TuningDatabase;

struct PlanRequest {
  ConvProblem problem;
  Epilogue epilogue;
  std::string family;            // empty: the tuned family, else the first family that supports the problem
  std::optional<Config> config;  // empty: the tuned configuration, else the family's default
  // Where tuned configurations come from when `config` is empty: exact entry -> nearest tuned shape ->
  // architecture -> vendor -> the family's built-in default (see src/tuning_db). nullptr: built-in defaults only.
  const TuningDatabase* tuning = nullptr;
};

class Plan {
 public:
  // Validates the request (the family supports the problem, the configuration satisfies every constraint),
  // compiles through the program cache and allocates the workspace. Throws InvalidArgument/Unsupported
  // naming the family, the parameter or constraint and the problem.
  static Plan create(Device& device, const PlanRequest& request);
  // The same with a family object instead of request.family's name (a family outside the registry: tests).
  static Plan create(Device& device, const KernelFamily& family, const PlanRequest& request);

  void run(Queue& queue, const DeviceOperands& operands) const;
  void run(const DeviceOperands& operands) const { run(device_->queue(), operands); }

  const ConvProblem& problem() const { return problem_; }
  const Epilogue& epilogue() const { return epilogue_; }
  const std::string& family() const { return family_; }
  const Config& config() const { return config_; }
  bool compiled_from_cache() const { return from_cache_; }
  // Where the configuration came from: "given", "built-in default", or the tuning database's explanation
  // ("exact tuned entry ...", "nearest tuned shape ... (distance 1.6)").
  const std::string& config_source() const { return config_source_; }
  // "exact", "nearest", "architecture", "vendor", "built-in default" or "given".
  const std::string& config_tier() const { return config_tier_; }
  size_t workspace_bytes() const;
  std::string describe() const;  // "implicit_gemm[TILE_K=8,...]"

  // Elements of each operand as the plan sees it (y is pooled when the epilogue pools).
  int64_t y_elements() const;

 private:
  static Plan create_impl(Device& device, const PlanRequest& request, const KernelFamily* given);

  Device* device_ = nullptr;
  ConvProblem problem_;
  Epilogue epilogue_;
  std::string family_;
  Config config_;
  bool from_cache_ = false;
  std::string config_source_, config_tier_;
  std::shared_ptr<Program> program_;
  std::vector<std::shared_ptr<Kernel>> kernels_;
  std::vector<LaunchStep> steps_;
  std::vector<std::shared_ptr<Buffer>> workspace_;
};

// The process's tuning database: the user's file (TuningDatabase::default_user_file) plus the defaults shipped
// with convtune ($CONVTUNE_SHIPPED_TUNING_DIR, else the installed or source tree's tuning/ folder). Loaded once.
const TuningDatabase& default_tuning_database();
// The shipped defaults' folder: $CONVTUNE_SHIPPED_TUNING_DIR, else the source tree's tuning/ if it exists, else empty.
std::filesystem::path shipped_tuning_dir();

// Checks a configuration against a family's parameters and constraints; empty when valid, else the reason
// naming the parameter or the constraint.
std::string config_problem(const KernelFamily& family, const Config& config, const ConvProblem& problem,
                           const DeviceInfo& device);

// The valid configuration for `problem` closest to `config`: itself when it is valid; else the one with a
// single parameter moved to another candidate value, the smallest move in octaves; else two parameters, the
// smallest total move. nullopt when neither fits, or when `config` names other parameters than the family's.
// A nearest tuned shape's parameters go through this: a split-K or tile that divided the tuned shape's extents
// may leave the asked one's last slice empty, and one change keeps the rest of what tuning found.
std::optional<FittedConfig> fit_config(const KernelFamily& family, const Config& config, const ConvProblem& problem,
                                       const DeviceInfo& device);
// A configuration tuned for `tuned_problem` made ready for `problem`: the family's carry_config (which may
// recompute a split for the new shape), then fit_config. `changes` lists every parameter that differs
// from `tuned`. This is how a nearest tuned shape's entry becomes a plan's configuration.
std::optional<FittedConfig> carry_config(const KernelFamily& family, const Config& tuned,
                                         const ConvProblem& tuned_problem, const ConvProblem& problem,
                                         const DeviceInfo& device);

// A plan behind the host-array interface: uploads the operands, runs, downloads the written one. This is how
// the conformance harness checks device kernels against the reference.
std::unique_ptr<HostConvolution> make_device_convolution(Device& device, std::string family,
                                                         std::optional<Config> config, Epilogue epilogue = {});

}  // namespace convtune
