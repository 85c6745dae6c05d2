// The fused-epilogue wrapper (fused_epilogue.h): a family's kernels, then the epilogue parts they leave, in one pass.
#include "src/families/fused_epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <cstdint>
#include <mutex>
#include <string>

#include "convtune/rounding.h"
#include "src/core/bf16_inline.h"
#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"

namespace convtune {

namespace {

constexpr const char* kPassProgram = "common/epilogue.cl";
constexpr const char* kPassHostProgram = "host/conv_epilogue";
constexpr const char* kPassKernel = "conv_epilogue";
constexpr int kPassLocal = 256;
constexpr int64_t kPassMaxGroups = 16384;  // a grid-stride loop covers the rest

bool residual_or_clamp(const Epilogue& e) { return e.residual || e.relu_max > 0; }

// The pass's defines: what it adds and clamps, the element type and the layout.
ProgramSource pass_source(bool host, const ConvProblem& pb, const Epilogue& pass) {
  ProgramSource source{host ? kPassHostProgram : kPassProgram, {}, {}, false};
  auto& d = source.defines;
  d["ELEM"] = pb.type == ElementType::F32 ? "0" : pb.type == ElementType::BF16 ? "1" : "2";
  d["LAYOUT_NHWC"] = pb.layout == Layout::NHWC ? "1" : "0";
  d["HAS_BIAS"] = pass.bias ? "1" : "0";
  d["HAS_RESIDUAL"] = pass.residual ? "1" : "0";
  d["HAS_RELU"] = pass.relu ? "1" : "0";
  d["HAS_RELU_MAX"] = pass.relu && pass.relu_max > 0 ? "1" : "0";
  d["RELU_MAX"] = families::relu_max_literal(pass);
  return source;
}

// The CPU backend's pass, the kernel's arithmetic on the host, in loops the compiler vectorises: NCHW one channel
// plane at a time (its bias a constant), NHWC one pixel's channels at a time (the bias a vector). The ReLU and its
// clamp as one clamp to [lo, hi] (the whole line without them).
template <class T, class Load, class Store>
void host_pass(const ProgramSource& source, const std::vector<KernelArg>& a, Load load, Store store) {
  const bool bias = cpu::define_int(source, "HAS_BIAS") != 0, residual = cpu::define_int(source, "HAS_RESIDUAL") != 0;
  const bool relu = cpu::define_int(source, "HAS_RELU") != 0, nhwc = cpu::define_int(source, "LAYOUT_NHWC") != 0;
  const float cap = cpu::define_int(source, "HAS_RELU_MAX") != 0 ? std::stof(source.defines.at("RELU_MAX")) : 0.0f;
  const float lo = relu ? 0.0f : -std::numeric_limits<float>::infinity();
  const float hi = cap > 0 ? cap : std::numeric_limits<float>::infinity();
  size_t next = 0;
  T* y = reinterpret_cast<T*>(cpu::host_floats(a.at(next++), "y"));
  const float* b = bias ? cpu::host_floats(a.at(next++), "bias") : nullptr;
  const T* r = residual ? reinterpret_cast<const T*>(cpu::host_floats(a.at(next++), "residual")) : nullptr;
  const auto arg = [&](size_t i) { return static_cast<int64_t>(std::get<int32_t>(a.at(i))); };
  const int64_t count = arg(next), channels = arg(next + 1), pixels = arg(next + 2);
  // Segments of `length` contiguous elements: NCHW planes (channel fixed), NHWC rows (channel = position).
  const int64_t length = nhwc ? channels : pixels, segments = count / length;
  const int64_t per_task = std::max<int64_t>(1, 16384 / length);
  // One thread below about 64K elements, where waking the pool costs more than the pass.
  const unsigned threads = count < (int64_t{1} << 16) ? 1u : hardware_threads();
  parallel_for((segments + per_task - 1) / per_task, threads, [&](int64_t task) {
    for (int64_t seg = task * per_task; seg < std::min(segments, (task + 1) * per_task); ++seg) {
      const int64_t base = seg * length;
      const float plane_bias = b && !nhwc ? b[seg % channels] : 0.0f;
      for (int64_t j = 0; j < length; ++j) {
        float v = load(y, base + j) + (b ? (nhwc ? b[j] : plane_bias) : 0.0f);
        if (r) v += load(r, base + j);
        store(y, base + j, std::min(std::max(v, lo), hi));
      }
    }
  });
}

void register_host_pass() {
  static std::once_flag once;
  std::call_once(once, [] {
    cpu::register_host_program(kPassHostProgram, [](const ProgramSource& source) {
      const int64_t elem = cpu::define_int(source, "ELEM");
      std::map<std::string, cpu::HostKernel> kernels;
      kernels[kPassKernel] = [source, elem](const std::vector<KernelArg>& a) {
        if (elem == 0) {
          host_pass<float>(source, a, [](const float* p, int64_t i) { return p[i]; },
                           [](float* p, int64_t i, float v) { p[i] = v; });
        } else if (elem == 1) {
          host_pass<uint16_t>(source, a, [](const uint16_t* p, int64_t i) { return bf16_bits_to_fp32(p[i]); },
                              [](uint16_t* p, int64_t i, float v) { p[i] = fp32_to_bf16_bits(v); });
        } else {
          host_pass<uint16_t>(source, a, [](const uint16_t* p, int64_t i) { return fp16_to_fp32(p[i]); },
                              [](uint16_t* p, int64_t i, float v) { p[i] = fp32_to_fp16(v); });
        }
      };
      return kernels;
    });
  });
}

class FusedEpilogueFamily final : public KernelFamily {
 public:
  explicit FusedEpilogueFamily(std::unique_ptr<KernelFamily> inner) : inner_(std::move(inner)) {
    if (inner_->runs_on_cpu_backend()) register_host_pass();
  }

  std::string name() const override { return inner_->name(); }
  std::string description() const override { return inner_->description(); }
  Problem::Kind problem_kind() const override { return inner_->problem_kind(); }
  bool runs_on_cpu_backend() const override { return inner_->runs_on_cpu_backend(); }
  bool computes_nhwc() const override { return inner_->computes_nhwc(); }
  bool fuses_residual() const override { return false; }
  bool uses_tensor_cores() const override { return inner_->uses_tensor_cores(); }
  std::string seed_family() const override { return inner_->seed_family(); }
  // The pass adds and clamps in FP32 with one rounding, as the kernels' own epilogues do: the family's kernels decide.
  int kernel_version() const override { return inner_->kernel_version(); }

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!problem.is_conv() || !epilogue.any()) return inner_->unsupported_reason(problem, epilogue, device);
    if (families::fused_part(*inner_, problem, epilogue, device) == epilogue) return {};
    if (epilogue.pool > 1) return inner_->unsupported_reason(problem, epilogue, device);
    const ConvProblem& pb = problem.conv();
    if (pb.direction != Direction::Forward) {
      const std::string why = inner_->unsupported_reason(problem, epilogue, device);  // the family's own words
      return why.empty() ? "epilogues apply to the forward direction only" : why;
    }
    if (pb.y_elements() > INT32_MAX) return "y has more elements than the epilogue pass counts";
    return inner_->unsupported_reason(problem, Epilogue{}, device);
  }

  std::vector<Parameter> parameters(const Problem& problem) const override { return inner_->parameters(problem); }
  std::vector<Constraint> constraints(const Problem& problem) const override { return inner_->constraints(problem); }
  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    return inner_->default_config(problem, device);
  }
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo& device) const override {
    return inner_->untuned_poor_fit(problem, device);
  }
  std::string untuned_claim(const Problem& problem, const DeviceInfo& device) const override {
    return inner_->untuned_claim(problem, device);
  }
  Config carry_config(const Config& tuned, const Problem& tuned_problem, const Problem& problem,
                      const DeviceInfo& device) const override {
    return inner_->carry_config(tuned, tuned_problem, problem, device);
  }
  std::string carry_refusal(const Config& tuned, const Problem& tuned_problem, const Problem& problem,
                            const DeviceInfo& device) const override {
    return inner_->carry_refusal(tuned, tuned_problem, problem, device);
  }
  double error_factor(const Problem& problem, const Config& config) const override {
    return inner_->error_factor(problem, config);
  }
  double performed_flops(const Problem& problem, const Config& config) const override {
    return inner_->performed_flops(problem, config);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    if (!problem.is_conv() || !epilogue.any()) return inner_->recipe(problem, epilogue, config, device);
    const Epilogue fused = families::fused_part(*inner_, problem, epilogue, device);
    KernelRecipe r = inner_->recipe(problem, fused, config, device);
    if (fused == epilogue) return r;
    Epilogue pass = epilogue;
    pass.bias = epilogue.bias && !fused.bias;
    const ConvProblem& pb = problem.conv();
    r.extra_sources.push_back(pass_source(runs_on_cpu_backend(), pb, pass));
    LaunchStep step;
    step.kernel = kPassKernel;
    step.program = static_cast<int>(r.extra_sources.size());
    step.args.push_back(ArgSource::of_operand(2));
    if (pass.bias) step.args.push_back(ArgSource::of_operand(kBiasOperand));
    if (pass.residual) step.args.push_back(ArgSource::of_operand(kResidualOperand));
    for (int64_t value : {pb.y_elements(), pb.k, pb.p() * pb.q()})
      step.args.push_back(ArgSource::fixed(static_cast<int32_t>(value)));
    const int64_t groups = std::clamp<int64_t>((pb.y_elements() + 4 * kPassLocal - 1) / (4 * kPassLocal), 1,
                                               kPassMaxGroups);
    step.geometry.dims = 1;
    step.geometry.local = {static_cast<size_t>(kPassLocal), 1, 1};
    step.geometry.global = {static_cast<size_t>(groups * kPassLocal), 1, 1};
    r.steps.push_back(std::move(step));
    return r;
  }

 private:
  std::unique_ptr<KernelFamily> inner_;
  friend const KernelFamily& families::without_fused_epilogue(const KernelFamily&);
};

}  // namespace

Epilogue families::fused_part(const KernelFamily& family, const Problem& problem, const Epilogue& epilogue,
                              const DeviceInfo& device) {
  if ((family.fuses_residual() || !residual_or_clamp(epilogue)) &&
      family.unsupported_reason(problem, epilogue, device).empty())
    return epilogue;
  Epilogue bias;
  bias.bias = epilogue.bias;
  if (epilogue.bias && family.unsupported_reason(problem, bias, device).empty()) return bias;
  return {};
}

std::string families::relu_max_literal(const Epilogue& epilogue) {
  return fmt::format("{:#.9g}f", epilogue.relu && epilogue.relu_max > 0 ? epilogue.relu_max : 0.0f);
}

const KernelFamily& families::without_fused_epilogue(const KernelFamily& family) {
  const auto* wrapper = dynamic_cast<const FusedEpilogueFamily*>(&family);
  return wrapper ? *wrapper->inner_ : family;
}

void families::add_fused_epilogue_support(std::vector<std::unique_ptr<KernelFamily>>& list) {
  for (auto& family : list) {
    if (family->problem_kind() != Problem::Kind::Convolution || family->fuses_residual()) continue;
    family = std::make_unique<FusedEpilogueFamily>(std::move(family));
  }
}

}  // namespace convtune
