// Widened families (widened.h): a 16-bit problem's FP32 twin computed by an FP32 family between exact conversions of
// the inputs into FP32 staging copies and the output's rounding back to 16 bits.
#include "src/families/widened.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "convtune/error.h"
#include "convtune/rounding.h"
#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/families/channels_last.h"
#include "src/families/fused_epilogue.h"
#include "src/families/wrapped_family.h"

namespace convtune {

namespace {

// The families that compute FP32 tensors only, and the math their FP32 twin runs in: fp32-fast where the family
// multiplies in FP32 (a 16-bit result admits far more than fp32-fast's 4x FP32 tolerance, so Winograd's larger tiles
// may serve it); tf32 for the tensor-core families that multiply in TF32 only (bf16 and fp16 values are TF32 values,
// so products of inputs stay exact; what an FFT or Winograd transform computes from them is rounded to TF32: bf16
// results absorb that, fp16 results do not, so those twins serve bf16 only (unsupported_reason below).
struct WidenedSpec {
  const char* family;
  MathMode twin_math;
};
constexpr WidenedSpec kWidenedFamilies[] = {
    {"implicit_gemm", MathMode::FP32Fast}, {"depthwise", MathMode::FP32Fast}, {"direct_tiled", MathMode::FP32Fast},
    {"im2col_gemm", MathMode::FP32Fast},   {"fft", MathMode::FP32Fast},       {"fft_tc", MathMode::TF32},
    {"winograd", MathMode::FP32Fast},      {"winograd_tc", MathMode::TF32},   {"gemm", MathMode::FP32Fast},
    {"cpu_blocked", MathMode::FP32Fast},   {"cpu_direct", MathMode::FP32Fast}, {"cpu_gemm", MathMode::FP32Fast},
};

// The conversions: nn.cl's (the 16-bit layers of FP32 networks use them too) on devices that compile kernels, the same
// two as host functions on the CPU backend. Arguments: source, destination, count, bf16 (1) or fp16 (0), scaled (0
// here), a buffer the unscaled conversions never read.
constexpr const char* kKernelProgram = "nn/nn.cl";
constexpr const char* kHostProgram = "host/widened_conversions";
constexpr const char* kWiden = "convert_from_16";
constexpr const char* kNarrow = "convert_to_16";

void register_host_conversions() {
  static std::once_flag once;
  std::call_once(once, [] {
    cpu::register_host_program(kHostProgram, [](const ProgramSource&) {
      const auto count = [](const KernelArg& a) { return static_cast<size_t>(std::get<int32_t>(a)); };
      const auto type = [](const KernelArg& a) { return std::get<int32_t>(a) ? ElementType::BF16 : ElementType::F16; };
      // Split over the pool's threads in runs of 64K elements: a layer's output is millions of elements, and one
      // thread converting them took several times the FP32 convolution (fmnist1 forward at batch 100).
      const auto split = [](size_t n, const std::function<void(size_t, size_t)>& run) {
        constexpr size_t kRun = size_t{1} << 16;
        parallel_for(static_cast<int64_t>((n + kRun - 1) / kRun), hardware_threads(), [&](int64_t i) {
          const size_t begin = static_cast<size_t>(i) * kRun;
          run(begin, std::min(n, begin + kRun) - begin);
        });
      };
      std::map<std::string, cpu::HostKernel> kernels;
      kernels[kWiden] = [=](const std::vector<KernelArg>& a) {
        const auto* from = reinterpret_cast<const uint16_t*>(cpu::host_floats(a.at(0), "source"));
        float* to = cpu::host_floats(a.at(1), "destination");
        split(count(a.at(2)), [&](size_t begin, size_t n) { decode_elements(type(a.at(3)), from + begin, to + begin, n); });
      };
      kernels[kNarrow] = [=](const std::vector<KernelArg>& a) {
        const float* from = cpu::host_floats(a.at(0), "source");
        auto* to = reinterpret_cast<uint16_t*>(cpu::host_floats(a.at(1), "destination"));
        split(count(a.at(2)), [&](size_t begin, size_t n) { encode_elements(type(a.at(3)), from + begin, to + begin, n); });
      };
      return kernels;
    });
  });
}

class WidenedFamily final : public KernelFamily {
 public:
  WidenedFamily(const KernelFamily& inner, MathMode twin_math)
      : inner_(inner), twin_math_(twin_math), name_("widened_" + inner.name()) {
    if (inner_.runs_on_cpu_backend()) register_host_conversions();
  }

  std::string name() const override { return name_; }
  std::string description() const override {
    return fmt::format("{} on FP32 copies of bf16/fp16 tensors: inputs widened exactly, the FP32 twin computed in {} "
                       "math, the output rounded to nearest even. {}: {}",
                       inner_.name(), to_string(twin_math_), inner_.name(), inner_.description());
  }
  Problem::Kind problem_kind() const override { return inner_.problem_kind(); }
  bool runs_on_cpu_backend() const override { return inner_.runs_on_cpu_backend(); }
  bool uses_tensor_cores() const override { return inner_.uses_tensor_cores(); }

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (problem.kind() != inner_.problem_kind()) return inner_.unsupported_reason(problem, epilogue, device);
    if (problem.type() == ElementType::F32) {
      return fmt::format("widens bf16 and fp16 tensors for {}; fp32 tensors go to {} itself", inner_.name(),
                         inner_.name());
    }
    // A TF32 twin rounds what its transforms compute to 2^-11, fp16's own unit roundoff, and the transform amplifies
    // it: measured on an H100, widened_winograd_tc's fp16 results were 2.3-3.8e-3 off float64 where fp16's tolerance
    // is about 1e-3. bf16's (2^-8) absorbs it (3.2e-3 against 7.8e-3).
    if (twin_math_ == MathMode::TF32 &&
        unit_roundoff(ElementType::F32, MathMode::TF32) > unit_roundoff(problem.type(), problem.math()) / 4) {
      return fmt::format("{} multiplies in tf32 (unit roundoff 2^-11), too coarse for {} results (unit roundoff "
                         "2^-11): {} tensors take the widened FP32 families",
                         inner_.name(), to_string(problem.type()), to_string(problem.type()));
    }
    for (int i = 0; i < Problem::kOperands; ++i) {
      if (problem.operand(i).elements > INT32_MAX) {
        return fmt::format("operand {} has {} elements, more than the conversions count ({})", problem.operand(i).name,
                           problem.operand(i).elements, INT32_MAX);
      }
    }
    const uint64_t limit = workspace_limit(device);
    if (staging_bytes(problem) > limit) {
      return fmt::format("its FP32 copies of the operands ({} bytes) are over the workspace limit ({} bytes)",
                         staging_bytes(problem), limit);
    }
    if (std::string why = inner_.unsupported_reason(twin(problem), epilogue, inner_device(problem, device));
        !why.empty()) {
      return fmt::format("{} on the FP32 twin: {}", inner_.name(), why);
    }
    return {};
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return inner_.parameters(twin(problem));
  }

  // The wrapped family's constraints on the twin, seeing the device with the staging copies taken off its workspace
  // limit; each still reads only the parameters it names.
  std::vector<Constraint> constraints(const Problem& problem) const override {
    return families::constraints_on_twin(inner_, twin(problem), staging_bytes(problem));
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    return inner_.default_config(twin(problem), inner_device(problem, device));
  }
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo& device) const override {
    return inner_.untuned_poor_fit(twin(problem), inner_device(problem, device));
  }
  std::string seed_family() const override { return inner_.name(); }
  // The conversions are exact and never change a result: the wrapped family's kernels decide.
  int kernel_version() const override { return inner_.kernel_version(); }
  // No claims: the wrapped families' claims were measured against FP32 competitors, not against 16-bit kernels.
  // Tuning entries and the cost model decide where a widened family runs a 16-bit layer.
  Config carry_config(const Config& tuned, const Problem& tuned_problem, const Problem& problem,
                      const DeviceInfo& device) const override {
    return inner_.carry_config(tuned, twin(tuned_problem), twin(problem), inner_device(problem, device));
  }
  // The twin's error bound is a multiple of its own tolerance, which scales with its unit roundoff; the 16-bit
  // result's tolerance scales with the 16-bit type's. Products of 16-bit inputs are exact in either twin math.
  double error_factor(const Problem& problem, const Config& config) const override {
    const Problem t = twin(problem);
    const double ratio = unit_roundoff(t.type(), t.math()) / unit_roundoff(problem.type(), problem.math());
    return std::max(1.0, inner_.error_factor(t, config) * ratio);
  }
  double performed_flops(const Problem& problem, const Config& config) const override {
    return inner_.performed_flops(twin(problem), config);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    KernelRecipe inner = inner_.recipe(twin(problem), epilogue, config, inner_device(problem, device));
    KernelRecipe r;
    r.source = std::move(inner.source);
    r.extra_sources = std::move(inner.extra_sources);
    r.extra_sources.push_back(ProgramSource{runs_on_cpu_backend() ? kHostProgram : kKernelProgram, {}, {}, false});
    const int conversions = static_cast<int>(r.extra_sources.size());
    r.workspace_bytes = inner.workspace_bytes;
    r.host_bytes = inner.host_bytes;
    r.staging_bytes = std::move(inner.staging_bytes);
    const int copies = static_cast<int>(r.staging_bytes.size());  // our copy of operand i: staging(copies + i)
    for (int i = 0; i < Problem::kOperands; ++i) r.staging_bytes.push_back(operand_elements(problem, i) * sizeof(float));

    const int32_t bf16 = problem.type() == ElementType::BF16 ? 1 : 0;
    const auto convert = [&](const char* kernel, ArgSource from, ArgSource to, int64_t count) {
      LaunchStep step;
      step.kernel = kernel;
      step.program = conversions;
      ArgSource unread = from;  // the max_bits argument: read only by scaled conversions
      step.args = {std::move(from), std::move(to), ArgSource::fixed(static_cast<int32_t>(count)), ArgSource::fixed(bf16),
                   ArgSource::fixed(int32_t{0}), std::move(unread)};
      const size_t local = std::min<size_t>(256, std::max<size_t>(1, device.max_work_group_size));
      step.geometry.dims = 1;
      step.geometry.local = {local, 1, 1};
      step.geometry.global = {(static_cast<size_t>(std::max<int64_t>(count, 1)) + local - 1) / local * local, 1, 1};
      return step;
    };
    // The inputs, and a GEMM's C even when it is only written: its copy then carries the rows' padding (ldc) back
    // unchanged, where an unwidened copy would write whatever the staging buffer held into it.
    for (int i = 0; i < Problem::kOperands; ++i) {
      if (problem.operand(i).read || (problem.is_gemm() && problem.operand(i).written)) {
        r.steps.push_back(convert(kWiden, ArgSource::of_operand(i), ArgSource::staging(copies + i),
                                  problem.operand(i).elements));
      }
    }
    for (LaunchStep& step : inner.steps) {
      for (ArgSource& arg : step.args) {
        if (arg.kind == ArgSource::Kind::Operand && arg.operand < Problem::kOperands) {
          arg = ArgSource::staging(copies + arg.operand);  // the bias (operand 3) is FP32 already
        }
      }
      r.steps.push_back(std::move(step));
    }
    const int written = problem.written_operand();
    r.steps.push_back(convert(kNarrow, ArgSource::staging(copies + written), ArgSource::of_operand(written),
                              written_elements(problem, epilogue)));
    return r;
  }

 private:
  Problem twin(const Problem& problem) const { return problem.with_precision({ElementType::F32, twin_math_}); }

  // Elements of operand i's FP32 copy: the whole operand (a pooling epilogue writes fewer; the copy is sized for the
  // problem, not the epilogue, so that constraints and support checks, which see no epilogue, count the same bytes).
  static size_t operand_elements(const Problem& problem, int i) {
    return static_cast<size_t>(problem.operand(i).elements);
  }
  // The copies as a plan lays them out (KernelRecipe::staging_offset: each at an aligned offset after the workspace,
  // itself rounded up to the alignment), so a workspace within the limit this leaves keeps memory_bytes() within it.
  static size_t staging_bytes(const Problem& problem) {
    const size_t align = KernelRecipe::kStagingAlignment;
    size_t total = align;  // the workspace's rounding up
    for (int i = 0; i < Problem::kOperands; ++i)
      total += (operand_elements(problem, i) * sizeof(float) + align - 1) / align * align;
    return total;
  }
  // The output's elements after the epilogue: y pooled when the forward epilogue pools.
  static int64_t written_elements(const Problem& problem, const Epilogue& epilogue) {
    if (!problem.is_conv() || epilogue.pool <= 1) return problem.written_elements();
    const ConvProblem& c = problem.conv();
    return c.n * c.k * pooled_extent(c.p(), epilogue) * pooled_extent(c.q(), epilogue);
  }
  DeviceInfo inner_device(const Problem& problem, const DeviceInfo& device) const {
    return families::less_staging(device, staging_bytes(problem));
  }

  const KernelFamily& inner_;
  MathMode twin_math_;
  std::string name_;
};

}  // namespace

bool families::is_widened(const KernelFamily& family) {
  return dynamic_cast<const WidenedFamily*>(
             &families::without_channels_last(families::without_fused_epilogue(family))) != nullptr;
}

void families::add_widened_families(std::vector<std::unique_ptr<KernelFamily>>& list) {
  std::vector<std::unique_ptr<KernelFamily>> widened;
  for (const WidenedSpec& spec : kWidenedFamilies) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const auto& f) { return f->name() == spec.family; });
    if (it == list.end()) throw Error(fmt::format("widened families: no family named {} to widen", spec.family));
    widened.push_back(std::make_unique<WidenedFamily>(**it, spec.twin_math));
  }
  for (auto& f : widened) list.push_back(std::move(f));
}

}  // namespace convtune
