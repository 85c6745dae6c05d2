// Conv2d: forward, backward-data and backward-filter through Plans on kernel devices, host paths on the CPU.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/error.h"
#include "convtune/nn/layers.h"
#include "src/core/parallel_for.h"
#include "src/nn/init.h"

namespace convtune::nn {

Conv2d::Conv2d(Runtime& runtime, std::string name, int64_t in_channels, int64_t out_channels, int64_t kernel,
               int64_t pad, std::string family)
    : Layer(std::move(name)), runtime_(runtime), in_(in_channels), out_(out_channels), kernel_(kernel), pad_(pad),
      family_(std::move(family)) {
  if (in_ < 1 || out_ < 1 || kernel_ < 1 || pad_ < 0) {
    throw InvalidArgument(fmt::format("layer {}: invalid conv2d {}->{} {}x{} pad {}", this->name(), in_, out_, kernel_,
                                      kernel_, pad_));
  }
  fused_.bias = true;
  weight_ = {this->name() + ".weight", runtime_.allocate({out_, in_, kernel_, kernel_}), {}};
  weight_.grad = runtime_.allocate(weight_.value.shape);
  bias_ = {this->name() + ".bias", runtime_.allocate({out_}), runtime_.allocate({out_})};
  if (runtime_.on_host()) host_ = make_cpu_convolution("threaded");
}

std::string Conv2d::spec() const {
  return fmt::format("conv2d {}->{} {}x{} pad {}", in_, out_, kernel_, kernel_, pad_);
}

ConvProblem Conv2d::problem(int64_t batch, Direction direction) const {
  ConvProblem p;
  p.n = batch;
  p.c = in_;
  p.k = out_;
  p.r = p.s = kernel_;
  p.pad = {pad_, pad_};
  p.direction = direction;
  return p;
}

std::vector<int64_t> Conv2d::output_shape(const std::vector<int64_t>& input) const {
  if (input.size() != 4 || input[1] != in_) {
    throw InvalidArgument(fmt::format("layer {} ({}) expects N x {} x H x W input, got {}", name(), spec(), in_,
                                      shape_string(input)));
  }
  ConvProblem p = problem(input[0], Direction::Forward);
  p.h = input[2];
  p.w = input[3];
  p.validate();
  return {input[0], out_, pooled_extent(p.p(), fused_), pooled_extent(p.q(), fused_)};
}

void Conv2d::initialize(uint64_t seed) {
  const int64_t fan_in = in_ * kernel_ * kernel_;
  runtime_.upload(weight_.value, he_uniform(weight_.value.size(), fan_in, seed, weight_.name));
  runtime_.fill_zero(bias_.value);
}

void Conv2d::set_fused_epilogue(const Epilogue& epilogue, const std::string& family) {
  fused_ = epilogue;
  fused_family_ = family;
  plans_.clear();
}

std::string Conv2d::algorithm() const {
  if (runtime_.on_host()) return "threaded";
  for (const auto& [batch, plans] : plans_) {
    if (plans.forward) return plans.forward->describe();
  }
  return family_;
}

Conv2d::Plans& Conv2d::plans_for(int64_t batch) {
  return plans_[batch];
}

namespace {

// Bias, ReLU and a size x size max-pool of one batch on the host (the CPU backend's "fused" epilogue).
void host_epilogue(const float* conv, const float* bias, float* y, int64_t n, int64_t k, int64_t h, int64_t w,
                   const Epilogue& e) {
  const int64_t pool = e.pool, p = h / pool, q = w / pool;
  parallel_for(n * k, hardware_threads(), [&](int64_t plane) {
    const float b = e.bias ? bias[plane % k] : 0.0f;
    const float* in = conv + plane * h * w;
    float* out = y + plane * p * q;
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        float best = -3.0e38f;
        for (int64_t r = 0; r < pool; ++r)
          for (int64_t s = 0; s < pool; ++s) best = std::max(best, in[(i * pool + r) * w + j * pool + s] + b);
        out[i * q + j] = e.relu ? std::max(best, 0.0f) : best;
      }
  });
}

}  // namespace

void Conv2d::forward(const DeviceTensor& x, const DeviceTensor& y) {
  const int64_t batch = x.shape[0];
  ConvProblem p = problem(batch, Direction::Forward);
  p.h = x.shape[2];
  p.w = x.shape[3];
  if (runtime_.on_host()) {
    float* xp = Runtime::host_data(x);
    float* wp = Runtime::host_data(weight_.value);
    const float* bp = Runtime::host_data(bias_.value);
    if (fused_.relu || fused_.pool > 1) {
      std::vector<float> conv(static_cast<size_t>(p.y_elements()));
      host_->run(p, {xp, wp, conv.data()});
      host_epilogue(conv.data(), bp, Runtime::host_data(y), batch, out_, p.p(), p.q(), fused_);
      return;
    }
    float* yp = Runtime::host_data(y);
    host_->run(p, {xp, wp, yp});
    const int64_t plane = p.p() * p.q();
    parallel_for(batch * out_, hardware_threads(), [&](int64_t i) {
      const float b = bp[i % out_];
      std::for_each(yp + i * plane, yp + (i + 1) * plane, [b](float& v) { v += b; });
    });
    return;
  }
  Plans& plans = plans_for(batch);
  if (!plans.forward) {
    const bool fused = fused_.relu || fused_.pool > 1;
    plans.forward.emplace(Plan::create(runtime_.device(), {p, fused_, fused ? fused_family_ : family_, std::nullopt, &default_tuning_database()}));
  }
  plans.forward->run(runtime_.queue(), {x.buffer.get(), weight_.value.buffer.get(), y.buffer.get(),
                                        bias_.value.buffer.get()});
}

void Conv2d::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, const DeviceTensor* dx) {
  if (fused_.relu || fused_.pool > 1) {
    throw Unsupported(fmt::format("layer {}: backward after a fused ReLU/pool epilogue (inference only)", name()));
  }
  const int64_t batch = x.shape[0];
  ConvProblem p = problem(batch, Direction::Forward);
  p.h = x.shape[2];
  p.w = x.shape[3];
  const int64_t plane = p.p() * p.q();
  if (runtime_.on_host()) {
    float* xp = Runtime::host_data(x);
    float* dyp = Runtime::host_data(dy);
    float* db = Runtime::host_data(bias_.grad);
    for (int64_t k = 0; k < out_; ++k) {
      double sum = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const float* row = dyp + (n * out_ + k) * plane;
        for (int64_t i = 0; i < plane; ++i) sum += row[i];
      }
      db[k] = static_cast<float>(sum);
    }
    host_->run(p.with_direction(Direction::BackwardFilter), {xp, Runtime::host_data(weight_.grad), dyp});
    if (dx) host_->run(p.with_direction(Direction::BackwardData), {Runtime::host_data(*dx), Runtime::host_data(weight_.value), dyp});
    return;
  }
  Plans& plans = plans_for(batch);
  Device& device = runtime_.device();
  if (!plans.backward_filter) {
    plans.backward_filter.emplace(Plan::create(device, {p.with_direction(Direction::BackwardFilter), {}, family_, std::nullopt, &default_tuning_database()}));
  }
  runtime_.launch("bias_grad",
                  {dy.buffer.get(), bias_.grad.buffer.get(), static_cast<int32_t>(batch), static_cast<int32_t>(out_),
                   static_cast<int32_t>(plane)},
                  LaunchGeometry{1, {static_cast<size_t>(out_) * 256, 1, 1}, {256, 1, 1}, 0});
  plans.backward_filter->run(runtime_.queue(), {x.buffer.get(), weight_.grad.buffer.get(), dy.buffer.get(), nullptr});
  if (dx) {
    if (!plans.backward_data) {
      plans.backward_data.emplace(Plan::create(device, {p.with_direction(Direction::BackwardData), {}, family_, std::nullopt, &default_tuning_database()}));
    }
    plans.backward_data->run(runtime_.queue(), {dx->buffer.get(), weight_.value.buffer.get(), dy.buffer.get(), nullptr});
  }
}

}  // namespace convtune::nn
