// Extension API, for writing families (user code needs none of it: plans, configurations and epilogues are in the
// user headers convtune/convtune.h includes).
// KernelFamily: the one description of a way to compute problems that the library, the tuner and the tests share
// (DESIGN.md convention 2): tunable parameters and their candidate values, named constraints, which problems and
// devices it supports, and how it turns a problem + parameters into launches. Device kernels (OpenCL/CUDA) and
// the CPU backend's C++ code are families alike: on the CPU backend a "kernel" is a host function.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
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

struct Parameter {
  std::string name;             // TILE_M, THREADS_N, VECTOR_WIDTH...
  std::vector<int64_t> values;  // candidates, in the order a search should try them
  std::string description;
};

// What a constraint may look at: the partial configuration (only parameters listed in `uses` are read),
// the problem and the device.
struct ConstraintContext {
  const Config& config;
  const Problem& problem;
  const DeviceInfo& device;
};

struct Constraint {
  std::string name;               // "threads per work-group within the device limit"
  std::vector<std::string> uses;  // parameters it reads; it is checked as soon as all are assigned
  // Must read no parameter outside `uses` (besides the problem and the device): a search space remembers its verdict
  // per combination of those values, and the other parameters may hold any value when it is asked.
  std::function<bool(const ConstraintContext&)> holds;
};

// Where a launch argument comes from. Names are resolved once, when a plan is made, never per launch:
// an operand of the problem (0, 1, 2 in Problem::operand order; 3 the epilogue's bias, 4 its residual), the plan's workspace, one of
// the plan's staging buffers (KernelRecipe::staging_bytes), or a value fixed by the recipe.
struct ArgSource {
  enum class Kind { Operand, Workspace, Staging, Value };
  Kind kind = Kind::Value;
  int operand = 0;  // Kind::Operand: the operand; Kind::Staging: the staging buffer
  KernelArg value;  // Kind::Value
  static ArgSource of_operand(int index) { return {Kind::Operand, index, {}}; }
  static ArgSource workspace() { return {Kind::Workspace, 0, {}}; }
  static ArgSource staging(int index) { return {Kind::Staging, index, {}}; }
  static ArgSource fixed(KernelArg v) { return {Kind::Value, 0, std::move(v)}; }
};

// One kernel launch of a plan.
struct LaunchStep {
  std::string kernel;
  std::vector<ArgSource> args;
  LaunchGeometry geometry;
  int program = 0;  // 0: the recipe's source; i > 0: its extra_sources[i - 1]
};

// What a family produces for one problem + configuration: the program to compile and the launches to run.
struct KernelRecipe {
  ProgramSource source;
  // Further programs some steps launch from (LaunchStep::program): a widened family's conversions beside the kernels
  // of the family it widens (src/families/widened.h).
  std::vector<ProgramSource> extra_sources;
  size_t workspace_bytes = 0;  // scratch memory the launches take as ArgSource::workspace()
  // Buffers for ArgSource::staging(i), one per entry (a widened family's FP32 copies of the operands): the plan's
  // own, or with a caller's workspace (Plan's external_workspace) ranges of it after the workspace proper, each at
  // a multiple of kStagingAlignment. The workspace limit counts them with the workspace.
  std::vector<size_t> staging_bytes;
  std::vector<LaunchStep> steps;
  static constexpr size_t kStagingAlignment = 256;
  // Where staging buffer i starts in a caller's workspace.
  size_t staging_offset(size_t index) const {
    const auto align = [](size_t v) { return (v + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment; };
    size_t offset = align(workspace_bytes);
    for (size_t i = 0; i < index; ++i) offset += align(staging_bytes[i]);
    return offset;
  }
  // The device memory a plan of this recipe takes, workspace and staging buffers laid out as a caller's workspace
  // holds them: what a caller's workspace must hold.
  size_t memory_bytes() const {
    return staging_bytes.empty() ? workspace_bytes : staging_offset(staging_bytes.size());
  }
  // Host memory a CPU family's program keeps beside the plan's buffers (a copy of the weights it packed, per-thread
  // planes): never part of a caller's workspace, but the workspace limit counts it.
  size_t host_bytes = 0;
  // What the workspace limit bounds: memory_bytes() and host_bytes.
  size_t limited_bytes() const { return memory_bytes() + host_bytes; }
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual std::string name() const = 0;  // "implicit_gemm", "direct_tiled", "gemm", "cpu_direct"...
  virtual std::string description() const = 0;
  // Which problems it computes (convolutions or GEMMs) and where: families of the CPU backend run host code,
  // the others compiled kernels.
  virtual Problem::Kind problem_kind() const = 0;
  virtual bool runs_on_cpu_backend() const { return false; }
  // True when the family's kernels read and write channels-last (NHWC) convolutions themselves; its
  // unsupported_reason then judges NHWC problems too. The other convolution families compute NHWC problems on NCHW
  // copies of the operands (src/families/channels_last.h wraps them, keeping their names), which plans say in
  // their explanation.
  virtual bool computes_nhwc() const { return false; }
  // True when the family's kernels add an epilogue's residual and clamp its ReLU (Epilogue::residual, relu_max)
  // themselves; its unsupported_reason then judges those epilogues too. The other convolution families run them, and
  // any epilogue part they refuse, as one elementwise pass after their kernels (src/families/fused_epilogue.h).
  virtual bool fuses_residual() const { return false; }

  // Empty when the family computes this problem (with this epilogue) on this device; else why not.
  virtual std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                         const DeviceInfo& device) const = 0;
  virtual std::vector<Parameter> parameters(const Problem& problem) const = 0;
  virtual std::vector<Constraint> constraints(const Problem& problem) const = 0;
  // A configuration that is valid for the problem and device and reasonably fast without tuning.
  virtual Config default_config(const Problem& problem, const DeviceInfo& device) const = 0;
  // Why this family, untuned, is expected to run the problem far slower than another family would on this device
  // (empty when it is not): a plan without tuning data then takes the next family that supports the problem. The
  // device matters where measurement split by it (depthwise backward-data loses to direct_tiled on an H200's wide
  // images and wins on PoCL).
  virtual std::string untuned_poor_fit(const Problem& /*problem*/, const DeviceInfo& /*device*/) const { return {}; }
  // Why this family, untuned, is expected to run the problem several times faster on this device than the families
  // ranked before it (empty when it is not): where no cost model answers, a plan tries the claiming families first
  // (in rank order, poor fits left out), then the rank order.
  virtual std::string untuned_claim(const Problem& /*problem*/, const DeviceInfo& /*device*/) const { return {}; }
  // A configuration tuned for `tuned_problem`, carried to `problem` (a nearest tuned shape's): parameters that
  // decompose the problem rather than shape the kernel may be recomputed for the new shape. Validity is not this
  // function's concern (fit_config below repairs that). Default: unchanged.
  virtual Config carry_config(const Config& tuned, const Problem& /*tuned_problem*/, const Problem& /*problem*/,
                              const DeviceInfo& /*device*/) const {
    return tuned;
  }
  // Why a configuration tuned for `tuned_problem` is not to be carried to `problem`, another shape (empty when it
  // may be): the tuned shape put the family in another regime than this one, so its choice is no guide here. The
  // entry then serves with the family's built-in default (carry_config below): its time still says
  // how fast the family is near this shape. Default: always carried.
  virtual std::string carry_refusal(const Config& /*tuned*/, const Problem& /*tuned_problem*/,
                                    const Problem& /*problem*/, const DeviceInfo& /*device*/) const {
    return {};
  }
  // The family whose tuned configurations for the same shape in another element type or math mode a tune of this
  // family starts from (timed as candidates, after the defaults): itself, or for a widened family the FP32 family
  // it widens, whose FP32 and tf32 entries are the best first guesses for 16-bit tensors.
  virtual std::string seed_family() const { return name(); }
  // How many times the direct sum's tolerance this configuration's results are held to (Winograd's transforms add
  // rounding error that does not shrink with short reductions): every check against the float64 reference
  // multiplies its tolerance by it. 1 for direct summation.
  virtual double error_factor(const Problem& /*problem*/, const Config& /*config*/) const { return 1.0; }
  // The floating-point operations one run of this configuration performs, for `% peak` columns: the direct sum's
  // Problem::flops() unless the algorithm does less arithmetic (Winograd's transformed products), so a fraction
  // of the device's FMA ceiling stays at most 100%. GFLOP/s columns keep counting Problem::flops() (effective).
  virtual double performed_flops(const Problem& problem, const Config& /*config*/) const { return problem.flops(); }
  // True when the family multiplies on tensor cores (mma.sync, wgmma): its rate is not comparable with the FP32 FMA
  // ceiling `convtune peak` measures, so bench's `% peak` leaves its rows out.
  virtual bool uses_tensor_cores() const { return false; }
  // The version of the kernels this family runs (MIOpen's stable solver ids, in spirit): the tuning database stores
  // it with every entry, and an entry of another version is stale (never trusted for a plan, timed again by a tune).
  // Bump it when a change to the family's kernels or recipe changes its results or its speed on problems it
  // computed before; a change that leaves both alone (a comment, a merge of shared code, a layout or element type
  // added beside the old ones) keeps it, so tuned entries stay valid. The program cache keys compiled binaries by
  // the expanded source text itself, so no stale binary runs either way.
  virtual int kernel_version() const { return 1; }
  // Program + launches for a valid configuration.
  virtual KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                              const DeviceInfo& device) const = 0;
};

// Every family built into convtune, in the untuned order (src/families/untuned_order.cpp). The list is generated from the folders under
// src/families (each folder is one family and defines families::make_<folder>()), so adding a family is adding
// its folder; a folder without its make function fails the link.
const std::vector<std::unique_ptr<KernelFamily>>& kernel_families();
const KernelFamily& kernel_family(std::string_view name);  // throws InvalidArgument listing the names


// A convolution's shape as compile-time defines (N, C, H, W, K, R, S, P, Q, STRIDE_H, ..., GROUPS, and DIRECTION:
// 0 forward, 1 backward-data, 2 backward-filter, in Direction's order), shared by every family so each kernel
// sees the same names.
std::map<std::string, std::string> problem_defines(const ConvProblem& problem);

// The refusal every FP32 (SIMT) family gives for an element type it does not implement ("implicit_gemm computes
// fp32 tensors (in fp32 math), not bf16 tensors"); empty for FP32 tensors in any math mode: FP32 math is at least
// as accurate as tf32 and 3xtf32 ask, so these families compete with the tensor-core ones there.
std::string fp32_only_reason(std::string_view family, const Problem& problem);
// The refusals every FP32 (SIMT) convolution family for kernel devices starts with: a matrix product, a device that
// compiles no kernels, then fp32_only_reason; empty when none applies.
std::string fp32_kernel_conv_reason(std::string_view family, const Problem& problem, const DeviceInfo& device);

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
