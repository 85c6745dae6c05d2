// Conv2d: forward, backward-data and backward-filter through Plans on every backend (the CPU backend's families on
// a machine without kernels); bias, ReLU and pooling fused into the forward plan on kernel devices, on the host
// otherwise.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/error.h"
#include "convtune/nn/layers.h"
#include "src/backend/cpu/cpu_backend.h"
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
  p.type = runtime_.conv_type();
  p.math = runtime_.math();
  return p;
}

bool Conv2d::sixteen_bit() const { return runtime_.conv_type() != ElementType::F32 && !runtime_.on_host(); }

Buffer& Conv2d::scratch(std::shared_ptr<Buffer>& slot, size_t bytes) {
  if (!slot || slot->bytes() < bytes) slot = runtime_.allocate_bytes(bytes);
  return *slot;
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
  for (const auto& [batch, plans] : plans_) {
    if (plans.forward) return plans.forward->describe();
  }
  return family_;
}

const Plan& Conv2d::plan(std::optional<Plan>& slot, const ConvProblem& problem, const Epilogue& epilogue,
                         const std::string& family) {
  if (!slot) {
    // The CPU backend's layers keep FP32 tensors and run their epilogues on the host; a 16-bit plan there (a widened
    // family) takes 16-bit buffers, which these host paths do not make.
    if (runtime_.on_host() && problem.type != ElementType::F32) {
      throw Unsupported(fmt::format("layer {}: {} training on the CPU backend is not supported (its layers run FP32 "
                                    "host paths): train with --math fp32 there, or on a device that compiles kernels",
                                    name(), to_string(problem.type)));
    }
    PlanRequest request;
    request.problem = problem;
    request.epilogue = epilogue;
    request.workspace_limit = runtime_.workspace_limit();
    // The CPU backend has its own families: a kernel family named for the layer does not run there.
    request.family = runtime_.on_host() ? std::string() : family;
    slot.emplace(Plan::create(runtime_.device(), request));
  }
  return *slot;
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
  Plans& plans = plans_for(batch);
  if (runtime_.on_host()) {
    // The convolution through the CPU backend's plan, the epilogue on the host.
    const Plan& conv = plan(plans.forward, p, {}, family_);
    const float* bp = Runtime::host_data(bias_.value);
    if (fused_.relu || fused_.pool > 1) {
      if (!plans.scratch || plans.scratch->bytes() < static_cast<size_t>(p.y_elements()) * sizeof(float))
        plans.scratch = runtime_.allocate_bytes(static_cast<size_t>(p.y_elements()) * sizeof(float));
      conv.run(runtime_.queue(), {x.buffer.get(), weight_.value.buffer.get(), plans.scratch.get()});
      host_epilogue(reinterpret_cast<const float*>(cpu::host_memory(*plans.scratch)), bp, Runtime::host_data(y), batch,
                    out_, p.p(), p.q(), fused_);
      return;
    }
    conv.run(runtime_.queue(), {x.buffer.get(), weight_.value.buffer.get(), y.buffer.get()});
    float* yp = Runtime::host_data(y);
    const int64_t plane = p.p() * p.q();
    parallel_for(batch * out_, hardware_threads(), [&](int64_t i) {
      const float b = bp[i % out_];
      std::for_each(yp + i * plane, yp + (i + 1) * plane, [b](float& v) { v += b; });
    });
    return;
  }
  const bool fused = fused_.relu || fused_.pool > 1;
  const Plan& forward = plan(plans.forward, p, fused_, fused ? fused_family_ : family_);
  if (sixteen_bit()) {
    // x and w to 16 bits (kept for the backward directions), the 16-bit forward with its FP32 bias, y back to FP32.
    const ElementType type = p.type;
    const size_t element = static_cast<size_t>(bytes_per_element(type));
    Buffer& x16 = scratch(plans.x16, static_cast<size_t>(p.x_elements()) * element);
    Buffer& w16 = scratch(plans.w16, static_cast<size_t>(p.w_elements()) * element);
    const int64_t y_elements = y.size();
    Buffer& y16 = scratch(plans.out16, static_cast<size_t>(std::max({y_elements, p.x_elements(), p.w_elements()})) * element);
    runtime_.to_16bit(*x.buffer, x16, p.x_elements(), type);
    runtime_.to_16bit(*weight_.value.buffer, w16, p.w_elements(), type);
    forward.run(runtime_.queue(), {&x16, &w16, &y16, bias_.value.buffer.get()});
    runtime_.from_16bit(y16, *y.buffer, y_elements, type);
    return;
  }
  forward.run(runtime_.queue(), {x.buffer.get(), weight_.value.buffer.get(), y.buffer.get(), bias_.value.buffer.get()});
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
  Plans& plans = plans_for(batch);
  if (runtime_.on_host()) {
    const float* dyp = Runtime::host_data(dy);
    float* db = Runtime::host_data(bias_.grad);
    for (int64_t k = 0; k < out_; ++k) {
      double sum = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const float* row = dyp + (n * out_ + k) * plane;
        for (int64_t i = 0; i < plane; ++i) sum += row[i];
      }
      db[k] = static_cast<float>(sum);
    }
  } else {
    runtime_.launch("bias_grad",
                    {dy.buffer.get(), bias_.grad.buffer.get(), static_cast<int32_t>(batch), static_cast<int32_t>(out_),
                     static_cast<int32_t>(plane)},
                    LaunchGeometry{1, {static_cast<size_t>(out_) * 256, 1, 1}, {256, 1, 1}, 0});
  }
  const Plan& backward_filter = plan(plans.backward_filter, p.with_direction(Direction::BackwardFilter), {}, family_);
  const Plan* backward_data = dx ? &plan(plans.backward_data, p.with_direction(Direction::BackwardData), {}, family_)
                                 : nullptr;
  if (sixteen_bit()) {
    // The forward of this batch left x16 and w16. dy is scaled into [0.5, 1) (FP16's range; BF16 needs no scale),
    // the 16-bit gradients come out scaled by the same power of two and are unscaled into FP32.
    if (!plans.x16 || !plans.w16) {
      throw Error(fmt::format("layer {}: backward before a forward of batch {} ({} tensors)", name(), batch,
                              to_string(p.type)));
    }
    const ElementType type = p.type;
    const bool scaled = type == ElementType::F16;
    const size_t element = static_cast<size_t>(bytes_per_element(type));
    Buffer& dy16 = scratch(plans.dy16, static_cast<size_t>(p.y_elements()) * element);
    Buffer& out16 = scratch(plans.out16, static_cast<size_t>(std::max({p.y_elements(), p.x_elements(), p.w_elements()})) * element);
    Buffer* dy_max = scaled ? &scratch(plans.dy_max, sizeof(uint32_t)) : nullptr;
    if (scaled) runtime_.abs_max_bits(*dy.buffer, *dy_max, p.y_elements());
    runtime_.to_16bit(*dy.buffer, dy16, p.y_elements(), type, dy_max);
    backward_filter.run(runtime_.queue(), {plans.x16.get(), &out16, &dy16});
    runtime_.from_16bit(out16, *weight_.grad.buffer, p.w_elements(), type, dy_max);
    if (dx) {
      backward_data->run(runtime_.queue(), {&out16, plans.w16.get(), &dy16});
      runtime_.from_16bit(out16, *dx->buffer, p.x_elements(), type, dy_max);
    }
    return;
  }
  backward_filter.run(runtime_.queue(), {x.buffer.get(), weight_.grad.buffer.get(), dy.buffer.get()});
  if (dx) backward_data->run(runtime_.queue(), {dx->buffer.get(), weight_.value.buffer.get(), dy.buffer.get()});
}

}  // namespace convtune::nn
