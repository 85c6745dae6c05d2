// Plans: how convtune runs a problem on a device. A PlanDescriptor is the decision (family, configuration, where
// the configuration came from, workspace size), cheap to make and to compare; a Plan is that decision compiled,
// with every launch argument resolved, ready to run on any operands of the right sizes.
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/backend.h"
#include "convtune/kernel_family.h"
#include "convtune/problem.h"

namespace convtune {

class TuningDatabase;

// The buffers an operation reads and writes, in Problem::operand order: a convolution's x, w, y (named after the
// forward pass; the direction says which is written) and, with an epilogue, its bias (K floats) and its residual
// (y's shape, layout and type); a GEMM's a, b, c.
struct Operands {
  std::array<const Buffer*, 5> buffers{};
  Operands() = default;
  Operands(const Buffer* first, const Buffer* second, const Buffer* third, const Buffer* bias = nullptr,
           const Buffer* residual = nullptr)
      : buffers{first, second, third, bias, residual} {}
  const Buffer* operator[](size_t index) const { return buffers[index]; }
};

// Where a plan's configuration came from, best first.
enum class ConfigTier {
  Given,           // the caller named it
  Exact,           // the tuning database: this device (and driver), this exact problem
  Nearest,         // this device, the nearest comparable tuned shape
  Architecture,    // another device of the same backend and architecture
  Vendor,          // another device of the same backend and vendor
  BuiltInDefault,  // nothing usable: the family's built-in default
};
std::string_view to_string(ConfigTier tier);  // "given", "exact", "nearest", "architecture", "vendor", "built-in default"

struct PlanRequest {
  Problem problem;
  Epilogue epilogue;
  std::string family;            // empty: the tuned family, else the first family that computes the problem
  std::optional<Config> config;  // empty: the tuned configuration, else the family's default
  // Tuned configurations come from the process's default database (the user's file plus the shipped defaults,
  // see default_tuning_database) unless `tuning` names another one; use_tuning = false asks for built-in defaults.
  bool use_tuning = true;
  const TuningDatabase* tuning = nullptr;
  // The scratch memory (bytes) the plan may take; 0 allows none. Empty: the device's (workspace_limit in
  // convtune/backend.h, by default min(1 GiB, memory / 8) on GPUs). Families refuse what cannot fit; a tuned entry or a
  // family's default over it is skipped for the next candidate, and explanation() names it with both sizes; a
  // given configuration over it is refused. Not part of the tuning database's keys.
  std::optional<uint64_t> workspace_limit;
};

// The decision for one problem on one device, made without compiling anything.
class PlanDescriptor {
 public:
  // Validates the request (the family computes the problem, the configuration satisfies every constraint) and
  // looks the configuration up. Throws InvalidArgument/Unsupported naming the family, the parameter or
  // constraint and the problem; a problem no family computes names every family's reason.
  static PlanDescriptor create(const DeviceInfo& device, const PlanRequest& request);
  // The same with a family object instead of request.family's name (a family outside the registry: tests).
  static PlanDescriptor create(const DeviceInfo& device, const KernelFamily& family, const PlanRequest& request);

  const Problem& problem() const { return problem_; }
  const Epilogue& epilogue() const { return epilogue_; }
  const KernelFamily& family() const { return *family_; }
  const Config& config() const { return config_; }
  ConfigTier tier() const { return tier_; }
  // In words: "given", "built-in default (...)", or the tuning database's explanation ("exact tuned entry ...",
  // "nearest tuned shape ... (distance 1.6)").
  const std::string& explanation() const { return explanation_; }
  size_t workspace_bytes() const { return recipe_.workspace_bytes; }
  // Workspace and staging buffers together (KernelRecipe::memory_bytes): what the workspace limit bounds.
  size_t memory_bytes() const { return recipe_.memory_bytes(); }
  const KernelRecipe& recipe() const { return recipe_; }
  std::string describe() const;  // "implicit_gemm[TILE_K=8,...]"
  // Bytes each operand (Problem::operand order, then the bias and the residual) must hold: y after the epilogue's
  // pooling; 0 for an operand the plan does not use.
  size_t operand_bytes(int index) const;

 private:
  static PlanDescriptor create_impl(const DeviceInfo& device, const PlanRequest& request, const KernelFamily* given);

  Problem problem_;
  Epilogue epilogue_;
  const KernelFamily* family_ = nullptr;
  Config config_;
  ConfigTier tier_ = ConfigTier::BuiltInDefault;
  std::string explanation_;
  KernelRecipe recipe_;
};

class Plan {
 public:
  // describe(), then compile through the program cache and (unless request-independent `external_workspace`)
  // allocate the workspace.
  static Plan create(Device& device, const PlanRequest& request);
  static Plan create(Device& device, const KernelFamily& family, const PlanRequest& request);
  // Compiles a decision already made. With external_workspace the caller passes a workspace of memory_bytes() to
  // every run (one buffer may serve several plans that never run at the same time; a widened plan's staging copies
  // are ranges of it, so CPU and CUDA devices only); otherwise the plan allocates its workspace and staging buffers.
  Plan(Device& device, PlanDescriptor descriptor, bool external_workspace = false);

  // Enqueues the plan's launches on `queue` (the device's own by default). Checks every operand the problem
  // needs is given and large enough, naming the operand, the bytes expected and given. `workspace` is required
  // (at least workspace_bytes()) with external_workspace and ignored otherwise.
  //
  // Safe to call from several threads at once, on one plan and its copies (docs/RELIABILITY.md, "Threads"): the
  // launches' arguments are bound and enqueued under the plan's lock. On the CPU device a run computes while it
  // holds the lock, so concurrent runs of one plan take turns (each uses the whole thread pool already). On kernel
  // devices runs on one queue share the plan's workspace in queue order; a run on another queue gets a workspace
  // and staging buffers of its own for that queue, at most kMaxQueues of them (beyond, Unsupported: make the plan
  // with external_workspace, each call then brings its own). Queues are told apart by address: a queue destroyed
  // while this plan's work on it may still run must not be replaced by one at the same address.
  void run(Queue& queue, const Operands& operands, const Buffer* workspace = nullptr) const;
  static constexpr size_t kMaxQueues = 8;
  void run(const Operands& operands, const Buffer* workspace = nullptr) const {
    run(device_->queue(), operands, workspace);
  }

  const PlanDescriptor& descriptor() const { return descriptor_; }
  const Problem& problem() const { return descriptor_.problem(); }
  const Epilogue& epilogue() const { return descriptor_.epilogue(); }
  const std::string& family() const { return family_name_; }
  const Config& config() const { return descriptor_.config(); }
  ConfigTier tier() const { return descriptor_.tier(); }
  const std::string& explanation() const { return descriptor_.explanation(); }
  size_t workspace_bytes() const { return descriptor_.workspace_bytes(); }
  // Workspace and staging together: what a caller's workspace must hold (external_workspace).
  size_t memory_bytes() const { return descriptor_.memory_bytes(); }
  bool compiled_from_cache() const { return from_cache_; }
  std::string describe() const { return descriptor_.describe(); }
  Device& device() const { return *device_; }
  // The family's error factor for this configuration (KernelFamily::error_factor).
  double error_factor() const { return descriptor_.family().error_factor(problem(), config()); }
  // What one run computes, in floating-point operations (KernelFamily::performed_flops).
  double performed_flops() const { return descriptor_.family().performed_flops(problem(), config()); }
  bool uses_tensor_cores() const { return descriptor_.family().uses_tensor_cores(); }

 private:
  Device* device_;
  PlanDescriptor descriptor_;
  std::string family_name_;
  bool from_cache_ = false;
  std::vector<std::shared_ptr<Program>> programs_;  // the recipe's source, then its extra sources
  bool external_workspace_;
  // The kernels (one per launch step, fixed arguments set) and owned buffers runs use, by queue, under a lock that
  // copies of the plan share (plan.cpp).
  struct Runs;
  std::shared_ptr<Runs> runs_;
};

// The process's tuning database: the user's file (TuningDatabase::default_user_file) plus the defaults shipped
// with convtune (shipped_tuning_dir()). Loaded once, on first use.
const TuningDatabase& default_tuning_database();
// The shipped defaults' folder: $CONVTUNE_SHIPPED_TUNING_DIR, else share/convtune/tuning beside the installed (or
// built) library; empty when neither exists.
std::filesystem::path shipped_tuning_dir();

// Checks a configuration against a family's parameters and constraints; empty when valid, else the reason
// naming the parameter or the constraint.
std::string config_problem(const KernelFamily& family, const Config& config, const Problem& problem,
                           const DeviceInfo& device);

// The valid configuration for `problem` closest to `config`: itself when it is valid; else the one with a
// single parameter moved to another candidate value, the smallest move in octaves; else two parameters, the
// smallest total move. nullopt when neither fits, or when `config` names other parameters than the family's.
// A nearest tuned shape's parameters go through this: a split-K or tile that divided the tuned shape's extents
// may leave the asked one's last slice empty, and one change keeps the rest of what tuning found.
std::optional<FittedConfig> fit_config(const KernelFamily& family, const Config& config, const Problem& problem,
                                       const DeviceInfo& device);
// A configuration tuned for `tuned_problem` made ready for `problem`: the family's carry_config (which may
// recompute a split for the new shape), then fit_config. `changes` lists every parameter that differs
// from `tuned`. This is how a nearest tuned shape's entry becomes a plan's configuration. Where the family's
// carry_refusal objects, the family's default_config for `problem`, `changes` saying why.
std::optional<FittedConfig> carry_config(const KernelFamily& family, const Config& tuned, const Problem& tuned_problem,
                                         const Problem& problem, const DeviceInfo& device);
// The first of the size parameters `sizes` whose tuned value its shape imposed rather than tuning chose, where
// `problem` frees it: no larger candidate value was valid for `tuned_problem` (the rest of `tuned` unchanged), a
// larger one is valid for `problem`. "VECS 1: the largest tuned_problem allowed; problem allows up to 4". Empty
// when there is none. A register block clamped to a small layer's one vector of channels says nothing of a wider
// layer's best block. Sizes only: a larger value of a choice (an orientation) is not a larger block.
std::string clamped_by_shape(const KernelFamily& family, const Config& tuned, const Problem& tuned_problem,
                             const Problem& problem, const DeviceInfo& device, const std::vector<std::string>& sizes);

}  // namespace convtune
