// SGD with momentum and Adam: one kernel launch per parameter tensor on devices, host loops on the CPU.
#include "convtune/nn/optimizer.h"

#include <cmath>

namespace convtune::nn {

namespace {

// Per-parameter state tensors (velocity, moments), zeroed on first use, keyed by the parameter's value buffer.
class StatefulOptimizer : public Optimizer {
 protected:
  DeviceTensor& state(Runtime& runtime, const Parameter& p, int slot) {
    DeviceTensor& t = state_[{p.value.buffer.get(), slot}];
    if (t.empty()) {
      t = runtime.allocate(p.value.shape);
      runtime.fill_zero(t);
    }
    return t;
  }

 private:
  std::map<std::pair<const Buffer*, int>, DeviceTensor> state_;
};

class Sgd final : public StatefulOptimizer {
 public:
  Sgd(double lr, double momentum) : lr_(static_cast<float>(lr)), momentum_(static_cast<float>(momentum)) {}
  std::string name() const override { return "sgd"; }
  void step(Runtime& runtime, const std::vector<Parameter*>& parameters) override {
    for (Parameter* p : parameters) {
      DeviceTensor& v = state(runtime, *p, 0);
      const int64_t count = p->value.size();
      if (runtime.on_host()) {
        float* w = Runtime::host_data(p->value);
        const float* g = Runtime::host_data(p->grad);
        float* vel = Runtime::host_data(v);
        for (int64_t i = 0; i < count; ++i) {
          vel[i] = momentum_ * vel[i] - lr_ * g[i];
          w[i] += vel[i];
        }
        continue;
      }
      runtime.launch("sgd_momentum", {p->value.buffer.get(), p->grad.buffer.get(), v.buffer.get(),
                                      static_cast<int32_t>(count), lr_, momentum_}, count);
    }
  }

 private:
  float lr_, momentum_;
};

class Adam final : public StatefulOptimizer {
 public:
  Adam(double lr, double beta1, double beta2, double eps) : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {}
  std::string name() const override { return "adam"; }
  void step(Runtime& runtime, const std::vector<Parameter*>& parameters) override {
    ++t_;
    // Bias corrections folded into the step size and epsilon (same update as the textbook form).
    const double correction2 = std::sqrt(1.0 - std::pow(beta2_, t_));
    const float step = static_cast<float>(lr_ * correction2 / (1.0 - std::pow(beta1_, t_)));
    const float eps_hat = static_cast<float>(eps_ * correction2);
    const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
    for (Parameter* p : parameters) {
      DeviceTensor& m = state(runtime, *p, 0);
      DeviceTensor& v = state(runtime, *p, 1);
      const int64_t count = p->value.size();
      if (runtime.on_host()) {
        float* w = Runtime::host_data(p->value);
        const float* g = Runtime::host_data(p->grad);
        float* mp = Runtime::host_data(m);
        float* vp = Runtime::host_data(v);
        for (int64_t i = 0; i < count; ++i) {
          mp[i] = b1 * mp[i] + (1.0f - b1) * g[i];
          vp[i] = b2 * vp[i] + (1.0f - b2) * g[i] * g[i];
          w[i] -= step * mp[i] / (std::sqrt(vp[i]) + eps_hat);
        }
        continue;
      }
      runtime.launch("adam", {p->value.buffer.get(), p->grad.buffer.get(), m.buffer.get(), v.buffer.get(),
                              static_cast<int32_t>(count), step, b1, b2, eps_hat}, count);
    }
  }

 private:
  double lr_, beta1_, beta2_, eps_;
  int t_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(double learning_rate, double momentum) {
  return std::make_unique<Sgd>(learning_rate, momentum);
}
std::unique_ptr<Optimizer> make_adam(double learning_rate, double beta1, double beta2, double epsilon) {
  return std::make_unique<Adam>(learning_rate, beta1, beta2, epsilon);
}

}  // namespace convtune::nn
