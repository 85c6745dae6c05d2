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
#include "convtune/config.h"
#include "convtune/epilogue.h"
#include "convtune/problem.h"

namespace convtune {

class TuningDatabase;
// Declared in convtune/extension/kernel_family.h, the API for writing families: a plan's user names families by
// their name and needs neither type's definition.
class KernelFamily;
struct KernelRecipe;
// A family's name (KernelFamily::name), for code that holds one through the user API (PlanDescriptor::family,
// TuneTask::family) without its definition.
std::string family_name(const KernelFamily& family);

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
  size_t workspace_bytes() const;
  // Workspace and staging buffers together (KernelRecipe::memory_bytes): what the workspace limit bounds.
  size_t memory_bytes() const;
  const KernelRecipe& recipe() const;
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
  // Shared, never changed once made: copies of a descriptor are cheap, and the recipe's type stays out of this
  // header. Null only in a default-constructed descriptor (recipe() then answers an empty one).
  std::shared_ptr<const KernelRecipe> recipe_;
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
  double error_factor() const;
  // What one run computes, in floating-point operations (KernelFamily::performed_flops).
  double performed_flops() const;
  bool uses_tensor_cores() const;

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

// A kernel family as a plan's user sees it: PlanRequest::family takes its name.
struct FamilySummary {
  std::string name;  // "implicit_gemm", "direct_tiled", "gemm", "cpu_direct"...
  std::string description;
  Problem::Kind problem_kind = Problem::Kind::Convolution;  // convolutions or GEMMs
  bool runs_on_cpu_backend = false;
};
// Every family built into convtune, in the untuned order (the family objects themselves: kernel_families() in
// convtune/extension/kernel_family.h).
std::vector<FamilySummary> family_summaries();

// The process's tuning database: the user's file (TuningDatabase::default_user_file) plus the defaults shipped
// with convtune (shipped_tuning_dir()). Loaded once, on first use.
const TuningDatabase& default_tuning_database();
// The shipped defaults' folder: $CONVTUNE_SHIPPED_TUNING_DIR, else share/convtune/tuning beside the installed (or
// built) library; empty when neither exists.
std::filesystem::path shipped_tuning_dir();

}  // namespace convtune
