// A device plan behind the HostConvolution interface: upload, run, download. Plans are kept per problem so
// the harness's three directions per case compile once each.
#include <fmt/format.h>

#include <map>

#include "convtune/error.h"
#include "convtune/plan.h"

namespace convtune {

namespace {

class DeviceConvolution final : public HostConvolution {
 public:
  DeviceConvolution(Device& device, std::string family, std::optional<Config> config, Epilogue epilogue)
      : device_(device), family_(std::move(family)), config_(std::move(config)), epilogue_(epilogue) {}

  std::string name() const override {
    return fmt::format("{}/{}{}", device_.info().id, family_.empty() ? "auto" : family_,
                       config_ ? "[" + to_string(*config_) + "]" : "");
  }

  std::string unsupported_reason(const ConvProblem& problem) const override {
    if (family_.empty()) return {};
    return kernel_family(family_).unsupported_reason(problem, epilogue_, device_.info());
  }

  void run(const ConvProblem& problem, const ConvOperands& op) override {
    const Plan& plan = plan_for(problem);
    if (epilogue_.any()) throw Unsupported("the host adapter runs plain convolutions; epilogues are tested directly");
    Queue& queue = device_.queue();
    Operand x = upload(queue, op.x, problem.x_elements()), w = upload(queue, op.w, problem.w_elements()),
            y = upload(queue, op.y, problem.y_elements());
    plan.run(queue, {x.buffer.get(), w.buffer.get(), y.buffer.get(), nullptr});
    Operand& written = problem.direction == Direction::Forward        ? y
                       : problem.direction == Direction::BackwardData ? x
                                                                      : w;
    float* out = problem.direction == Direction::Forward ? op.y : problem.direction == Direction::BackwardData ? op.x : op.w;
    queue.read(*written.buffer, out, written.count * sizeof(float));
    for (const Operand* o : {&x, &w, &y}) check_canaries(queue, *o, o == &x ? "x" : o == &w ? "w" : "y");
  }

  const Plan& plan_for(const ConvProblem& problem) {
    const std::string key = problem.to_string();
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      it = plans_.emplace(key, Plan::create(device_, {problem, epilogue_, family_, config_})).first;
    }
    return it->second;
  }

 private:
  static constexpr size_t kCanaries = 64;
  static constexpr float kCanary = 4321.125f;

  // A device copy of one operand followed by canary values that a correct kernel never touches.
  struct Operand {
    std::unique_ptr<Buffer> buffer;
    size_t count = 0;
  };

  Operand upload(Queue& queue, const float* data, int64_t count) {
    Operand o{device_.allocate((static_cast<size_t>(count) + kCanaries) * sizeof(float)), static_cast<size_t>(count)};
    // Every operand goes up, the written one too: a kernel that skips elements leaves the caller's poison there.
    queue.write(*o.buffer, data, o.count * sizeof(float));
    const std::vector<float> canaries(kCanaries, kCanary);
    queue.write(*o.buffer, canaries.data(), kCanaries * sizeof(float), o.count * sizeof(float));
    return o;
  }

  void check_canaries(Queue& queue, const Operand& o, const char* name) {
    std::vector<float> canaries(kCanaries);
    queue.read(*o.buffer, canaries.data(), kCanaries * sizeof(float), o.count * sizeof(float));
    for (size_t i = 0; i < kCanaries; ++i) {
      if (canaries[i] != kCanary) {
        throw Error(fmt::format("device canary {} after operand {} overwritten ({}): out-of-bounds write", i, name,
                                canaries[i]));
      }
    }
  }

  Device& device_;
  std::string family_;
  std::optional<Config> config_;
  Epilogue epilogue_;
  std::map<std::string, Plan> plans_;
};

}  // namespace

std::unique_ptr<HostConvolution> make_device_convolution(Device& device, std::string family,
                                                         std::optional<Config> config, Epilogue epilogue) {
  return std::make_unique<DeviceConvolution>(device, std::move(family), std::move(config), epilogue);
}

}  // namespace convtune
