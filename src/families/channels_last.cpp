// The channels-last wrapper (channels_last.h): a family's NCHW kernels between transposes of the operands.
#include "src/families/channels_last.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/families/wrapped_family.h"

namespace convtune {

namespace families {

Problem nchw_twin(const Problem& problem) {
  if (!problem.is_conv() || problem.conv().layout == Layout::NCHW) return problem;
  return Problem(problem.conv().with_layout(Layout::NCHW));
}

}  // namespace families

namespace {

constexpr const char* kTransposeProgram = "common/layout.cl";
constexpr const char* kTransposeHostProgram = "host/layout_transpose";
constexpr const char* kTransposeKernel = "transpose_batched";
constexpr int kTransposeTile = 32;

// The CPU backend's transpose: [batch][rows][cols] -> [batch][cols][rows] in 32 x 32 blocks over the pool's threads.
template <class T>
void transpose_blocks(const T* src, T* dst, int64_t rows, int64_t cols, int64_t batch) {
  const int64_t row_blocks = (rows + kTransposeTile - 1) / kTransposeTile;
  parallel_for(batch * row_blocks, hardware_threads(), [&](int64_t item) {
    const int64_t b = item / row_blocks, r0 = (item % row_blocks) * kTransposeTile;
    const int64_t r1 = std::min(rows, r0 + kTransposeTile);
    const T* from = src + b * rows * cols;
    T* to = dst + b * rows * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kTransposeTile) {
      const int64_t c1 = std::min(cols, c0 + kTransposeTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) to[c * rows + r] = from[r * cols + c];
    }
  });
}

void register_host_transpose() {
  static std::once_flag once;
  std::call_once(once, [] {
    cpu::register_host_program(kTransposeHostProgram, [](const ProgramSource& source) {
      const int64_t bytes = cpu::define_int(source, "ELEMENT_BYTES");
      std::map<std::string, cpu::HostKernel> kernels;
      kernels[kTransposeKernel] = [bytes](const std::vector<KernelArg>& a) {
        const auto n = [&](size_t i) { return static_cast<int64_t>(std::get<int32_t>(a.at(i))); };
        const void* from = cpu::host_floats(a.at(0), "source");
        void* to = cpu::host_floats(a.at(1), "destination");
        if (bytes == 2)
          transpose_blocks(static_cast<const uint16_t*>(from), static_cast<uint16_t*>(to), n(2), n(3), n(4));
        else
          transpose_blocks(static_cast<const uint32_t*>(from), static_cast<uint32_t*>(to), n(2), n(3), n(4));
      };
      return kernels;
    });
  });
}

// One operand's two layouts as a batch of matrices: NHWC is [batch][pixels][channels], NCHW [batch][channels][pixels].
struct OperandShape {
  int64_t batch = 1, channels = 1, pixels = 1;
  // A single channel or a single pixel: both layouts are the same bytes, nothing to transpose.
  bool same_in_both() const { return channels == 1 || pixels == 1; }
  int64_t elements() const { return batch * channels * pixels; }
};

OperandShape operand_shape(const ConvProblem& pb, int operand) {
  switch (operand) {
    case 0: return {pb.n, pb.c, pb.h * pb.w};
    case 1: return {pb.k, pb.c_per_group(), pb.r * pb.s};
    default: return {pb.n, pb.k, pb.p() * pb.q()};
  }
}

class ChannelsLastFamily final : public KernelFamily {
 public:
  explicit ChannelsLastFamily(std::unique_ptr<KernelFamily> inner) : inner_(std::move(inner)) {
    if (inner_->runs_on_cpu_backend()) register_host_transpose();
  }

  std::string name() const override { return inner_->name(); }
  std::string description() const override {
    return inner_->description() + " (channels-last problems on NCHW copies of the operands)";
  }
  Problem::Kind problem_kind() const override { return inner_->problem_kind(); }
  bool runs_on_cpu_backend() const override { return inner_->runs_on_cpu_backend(); }
  bool computes_nhwc() const override { return false; }
  bool uses_tensor_cores() const override { return inner_->uses_tensor_cores(); }
  std::string seed_family() const override { return inner_->seed_family(); }
  // The transposes move bits and never change a result: the wrapped family's kernels decide.
  int kernel_version() const override { return inner_->kernel_version(); }

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!nhwc(problem)) return inner_->unsupported_reason(problem, epilogue, device);
    if (epilogue.pool > 1) return "a pooling epilogue on channels-last tensors is not computed";
    const ConvProblem& pb = problem.conv();
    for (int i = 0; i < Problem::kOperands; ++i) {
      if (operand_shape(pb, i).elements() > INT32_MAX)
        return fmt::format("operand {} has more elements than the transposes count", problem.operand(i).name);
    }
    const uint64_t limit = workspace_limit(device), staging = staging_bytes(problem);
    if (staging > limit) {
      return fmt::format("its NCHW copies of the channels-last operands ({} bytes) are over the workspace limit ({} "
                         "bytes)",
                         staging, limit);
    }
    if (std::string why = inner_->unsupported_reason(families::nchw_twin(problem), epilogue,
                                                     inner_device(problem, device));
        !why.empty())
      return why;
    return {};
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return inner_->parameters(families::nchw_twin(problem));
  }

  // The wrapped family's constraints on the NCHW twin, seeing the device with the copies taken off its workspace
  // limit; each still reads only the parameters it names.
  std::vector<Constraint> constraints(const Problem& problem) const override {
    if (!nhwc(problem)) return inner_->constraints(problem);
    return families::constraints_on_twin(*inner_, families::nchw_twin(problem), staging_bytes(problem));
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    return inner_->default_config(families::nchw_twin(problem), inner_device(problem, device));
  }
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo& device) const override {
    return inner_->untuned_poor_fit(families::nchw_twin(problem), inner_device(problem, device));
  }
  std::string untuned_claim(const Problem& problem, const DeviceInfo& device) const override {
    return inner_->untuned_claim(families::nchw_twin(problem), inner_device(problem, device));
  }
  Config carry_config(const Config& tuned, const Problem& tuned_problem, const Problem& problem,
                      const DeviceInfo& device) const override {
    return inner_->carry_config(tuned, families::nchw_twin(tuned_problem), families::nchw_twin(problem),
                                inner_device(problem, device));
  }
  std::string carry_refusal(const Config& tuned, const Problem& tuned_problem, const Problem& problem,
                            const DeviceInfo& device) const override {
    return inner_->carry_refusal(tuned, families::nchw_twin(tuned_problem), families::nchw_twin(problem),
                                 inner_device(problem, device));
  }
  double error_factor(const Problem& problem, const Config& config) const override {
    return inner_->error_factor(families::nchw_twin(problem), config);
  }
  double performed_flops(const Problem& problem, const Config& config) const override {
    return inner_->performed_flops(families::nchw_twin(problem), config);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    if (!nhwc(problem)) return inner_->recipe(problem, epilogue, config, device);
    const ConvProblem& pb = problem.conv();
    KernelRecipe inner = inner_->recipe(families::nchw_twin(problem), epilogue, config, inner_device(problem, device));
    KernelRecipe r;
    r.source = std::move(inner.source);
    r.extra_sources = std::move(inner.extra_sources);
    const int element_bytes = bytes_per_element(pb.type);
    ProgramSource transposes{runs_on_cpu_backend() ? kTransposeHostProgram : kTransposeProgram, {}, {}, false};
    transposes.defines["ELEMENT_BYTES"] = std::to_string(element_bytes);
    r.extra_sources.push_back(std::move(transposes));
    const int program = static_cast<int>(r.extra_sources.size());
    r.workspace_bytes = inner.workspace_bytes;
    r.host_bytes = inner.host_bytes;
    r.staging_bytes = std::move(inner.staging_bytes);
    // Operand i's NCHW copy, where it needs one: staging(copy[i]).
    int copy[Problem::kOperands] = {-1, -1, -1};
    for (int i = 0; i < Problem::kOperands; ++i) {
      const OperandShape shape = operand_shape(pb, i);
      if (shape.same_in_both()) continue;
      copy[i] = static_cast<int>(r.staging_bytes.size());
      r.staging_bytes.push_back(static_cast<size_t>(shape.elements()) * static_cast<size_t>(element_bytes));
    }
    const auto transpose = [&](ArgSource from, ArgSource to, int64_t rows, int64_t cols, int64_t batch) {
      LaunchStep step;
      step.kernel = kTransposeKernel;
      step.program = program;
      step.args = {std::move(from), std::move(to), ArgSource::fixed(static_cast<int32_t>(rows)),
                   ArgSource::fixed(static_cast<int32_t>(cols)), ArgSource::fixed(static_cast<int32_t>(batch))};
      const int64_t tiles = batch * ((rows + kTransposeTile - 1) / kTransposeTile) * ((cols + kTransposeTile - 1) / kTransposeTile);
      step.geometry.dims = 2;
      step.geometry.local = {static_cast<size_t>(kTransposeTile), 8, 1};
      step.geometry.global = {static_cast<size_t>(std::max<int64_t>(tiles, 1)) * kTransposeTile, 8, 1};
      return step;
    };
    for (int i = 0; i < Problem::kOperands; ++i) {
      if (copy[i] < 0 || !problem.operand(i).read) continue;
      const OperandShape s = operand_shape(pb, i);  // NHWC [batch][pixels][channels] -> NCHW
      r.steps.push_back(transpose(ArgSource::of_operand(i), ArgSource::staging(copy[i]), s.pixels, s.channels, s.batch));
    }
    for (LaunchStep& step : inner.steps) {
      for (ArgSource& arg : step.args) {
        if (arg.kind == ArgSource::Kind::Operand && arg.operand < Problem::kOperands && copy[arg.operand] >= 0)
          arg = ArgSource::staging(copy[arg.operand]);  // the bias (operand 3) is per channel: no layout
      }
      r.steps.push_back(std::move(step));
    }
    const int written = problem.written_operand();
    if (copy[written] >= 0) {
      const OperandShape s = operand_shape(pb, written);  // NCHW [batch][channels][pixels] -> NHWC
      r.steps.push_back(
          transpose(ArgSource::staging(copy[written]), ArgSource::of_operand(written), s.channels, s.pixels, s.batch));
    }
    return r;
  }

 private:
  static bool nhwc(const Problem& problem) { return problem.is_conv() && problem.conv().layout == Layout::NHWC; }

  // The copies as a plan lays them out (KernelRecipe::staging_offset), so a workspace within the limit this leaves
  // keeps memory_bytes() within it.
  static uint64_t staging_bytes(const Problem& problem) {
    if (!nhwc(problem)) return 0;
    const uint64_t align = KernelRecipe::kStagingAlignment;
    uint64_t total = align;  // the workspace's rounding up
    for (int i = 0; i < Problem::kOperands; ++i) {
      const OperandShape shape = operand_shape(problem.conv(), i);
      if (shape.same_in_both()) continue;
      const uint64_t bytes = static_cast<uint64_t>(shape.elements()) * bytes_per_element(problem.type());
      total += (bytes + align - 1) / align * align;
    }
    return total;
  }
  static DeviceInfo inner_device(const Problem& problem, const DeviceInfo& device) {
    return nhwc(problem) ? families::less_staging(device, staging_bytes(problem)) : device;
  }

  std::unique_ptr<KernelFamily> inner_;
  friend const KernelFamily& families::without_channels_last(const KernelFamily&);
};

}  // namespace

const KernelFamily& families::without_channels_last(const KernelFamily& family) {
  const auto* wrapper = dynamic_cast<const ChannelsLastFamily*>(&family);
  return wrapper ? *wrapper->inner_ : family;
}

void families::add_channels_last_support(std::vector<std::unique_ptr<KernelFamily>>& list) {
  for (auto& family : list) {
    if (family->problem_kind() != Problem::Kind::Convolution || family->computes_nhwc()) continue;
    family = std::make_unique<ChannelsLastFamily>(std::move(family));
  }
}

}  // namespace convtune
