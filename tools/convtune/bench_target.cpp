// The two BenchTargets: CPU paths on host tensors, device plans on device buffers. Both verify at sampled
// elements against the reference before anything is timed.
#include "tools/convtune/bench_target.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "convtune/host_convolution.h"
#include "convtune/plan.h"
#include "convtune/tensor.h"
#include "src/conformance/conformance.h"

namespace convtune::cli {

namespace {

// Host operands with seeded random inputs, shared by both targets (device targets upload them).
struct HostOperands {
  Tensor x, w, y;
  explicit HostOperands(const ConvProblem& pb) : x({pb.x_elements()}), w({pb.w_elements()}), y({pb.y_elements()}) {
    x.fill_random(1), w.fill_random(2), y.fill_random(3);
  }
  ConvOperands operands() { return {x.data(), w.data(), y.data()}; }
  Tensor& written(Direction d) { return d == Direction::Forward ? y : d == Direction::BackwardData ? x : w; }
};

double check_or_throw(const std::string& what, const ConvProblem& pb, HostOperands& host) {
  const auto result = conformance::check_sampled(pb, host.operands(), 512, 42);
  if (!result.passed) throw Error(fmt::format("{} computes {} wrongly: {}", what, pb.to_string(), result.message));
  return result.rel_l2_error;
}

class CpuTarget final : public BenchTarget {
 public:
  CpuTarget(Device& device, const std::string& algorithm) : device_(device), impl_(make_cpu_convolution(algorithm)) {}
  std::string unsupported_reason(const ConvProblem& pb) const override { return impl_->unsupported_reason(pb); }
  void prepare(const ConvProblem& pb) override {
    problem_ = pb;
    host_ = std::make_unique<HostOperands>(pb);
  }
  double verify() override {
    impl_->run(problem_, host_->operands());
    return check_or_throw(impl_->name(), problem_, *host_);
  }
  Timing time(int warmup, int repeats) override {
    return measure(device_.queue(), [&] { impl_->run(problem_, host_->operands()); }, warmup, repeats);
  }
  std::vector<float> output() override {
    impl_->run(problem_, host_->operands());
    const Tensor& out = host_->written(problem_.direction);
    return {out.data(), out.data() + out.size()};
  }
  reference::SharedOperands shared_operands() override { return {&device_, {}, host_->operands()}; }
  std::string algorithm() const override { return impl_->name(); }

 private:
  Device& device_;
  std::unique_ptr<HostConvolution> impl_;
  ConvProblem problem_;
  std::unique_ptr<HostOperands> host_;
};

class PlanTarget final : public BenchTarget {
 public:
  PlanTarget(Device& device, std::string family, std::optional<Config> config)
      : device_(device), family_(std::move(family)), config_(std::move(config)) {}

  std::string unsupported_reason(const ConvProblem& pb) const override {
    if (!device_.info().can_run_kernels) return device_.info().cannot_run_reason;
    if (family_.empty()) {
      for (const auto& f : kernel_families())
        if (f->unsupported_reason(pb, {}, device_.info()).empty()) return {};
      return "no kernel family computes it";
    }
    return kernel_family(family_).unsupported_reason(pb, {}, device_.info());
  }

  void prepare(const ConvProblem& pb) override {
    plan_.reset();  // free the previous layer's workspace first
    buffers_ = {};
    // Without given parameters the plan takes the tuning database's (exact, nearest shape, ... or built-in).
    plan_ = std::make_unique<Plan>(
        Plan::create(device_, {pb, {}, family_, config_, config_ ? nullptr : &default_tuning_database()}));
    host_ = std::make_unique<HostOperands>(pb);
    Queue& queue = device_.queue();
    buffers_.x = device_.allocate(host_->x.bytes());
    buffers_.w = device_.allocate(host_->w.bytes());
    buffers_.y = device_.allocate(host_->y.bytes());
    queue.write(*buffers_.x, host_->x.data(), host_->x.bytes());
    queue.write(*buffers_.w, host_->w.data(), host_->w.bytes());
    queue.write(*buffers_.y, host_->y.data(), host_->y.bytes());
    queue.finish();
  }

  double verify() override {
    const ConvProblem& pb = plan_->problem();
    Tensor& out = host_->written(pb.direction);
    out.fill(std::numeric_limits<float>::quiet_NaN());  // only what the kernel writes comes back
    plan_->run(device_.queue(), operands());
    device_.queue().read(written_buffer(), out.data(), out.bytes());
    return check_or_throw(plan_->describe(), pb, *host_);
  }

  Timing time(int warmup, int repeats) override {
    return measure(device_.queue(), [&] { plan_->run(device_.queue(), operands()); }, warmup, repeats);
  }

  std::vector<float> output() override {
    const ConvProblem& pb = plan_->problem();
    plan_->run(device_.queue(), operands());
    std::vector<float> out(static_cast<size_t>(pb.written_elements()));
    device_.queue().read(written_buffer(), out.data(), out.size() * sizeof(float));
    return out;
  }

  reference::SharedOperands shared_operands() override { return {&device_, operands(), host_->operands()}; }

  std::string algorithm() const override {
    return plan_ ? fmt::format("{} ({})", plan_->describe(), plan_->config_tier()) : family_;
  }

 private:
  const Buffer& written_buffer() const {
    const Direction d = plan_->problem().direction;
    return d == Direction::Forward ? *buffers_.y : d == Direction::BackwardData ? *buffers_.x : *buffers_.w;
  }
  DeviceOperands operands() const { return {buffers_.x.get(), buffers_.w.get(), buffers_.y.get(), nullptr}; }

  Device& device_;
  std::string family_;
  std::optional<Config> config_;
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<HostOperands> host_;
  struct {
    std::unique_ptr<Buffer> x, w, y;
  } buffers_;
};

}  // namespace

std::unique_ptr<BenchTarget> make_cpu_target(Device& device, const std::string& algorithm) {
  return std::make_unique<CpuTarget>(device, algorithm);
}

std::unique_ptr<BenchTarget> make_plan_target(Device& device, const std::string& family,
                                              const std::optional<Config>& config) {
  if (!family.empty()) kernel_family(family);  // unknown names fail now, listing the known ones
  return std::make_unique<PlanTarget>(device, family, config);
}

}  // namespace convtune::cli
