// Activation, Pool and Flatten: kernels of nn/nn.cl on devices, the same arithmetic in host loops on the CPU.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "convtune/error.h"
#include "convtune/nn/layers.h"
#include "src/core/parallel_for.h"

namespace convtune::nn {

Activation::Activation(Runtime& runtime, std::string name, ActivationKind kind)
    : Layer(std::move(name)), runtime_(runtime), activation_(kind) {}

std::string Activation::kind() const {
  switch (activation_) {
    case ActivationKind::Relu: return "relu";
    case ActivationKind::Sigmoid: return "sigmoid";
    case ActivationKind::Tanh: return "tanh";
  }
  return "?";
}

void Activation::forward(const DeviceTensor& x, const DeviceTensor& y) {
  const int64_t count = x.size();
  if (runtime_.on_host()) {
    const float* in = Runtime::host_data(x);
    float* out = Runtime::host_data(y);
    for (int64_t i = 0; i < count; ++i) {
      const float v = in[i];
      out[i] = activation_ == ActivationKind::Relu      ? std::max(v, 0.0f)
               : activation_ == ActivationKind::Sigmoid ? 1.0f / (1.0f + std::exp(-v))
                                                        : std::tanh(v);
    }
    return;
  }
  runtime_.launch("activation_forward", {x.buffer.get(), y.buffer.get(), static_cast<int32_t>(count),
                                         static_cast<int32_t>(activation_)}, count);
}

void Activation::backward(const DeviceTensor&, const DeviceTensor& y, const DeviceTensor& dy, const DeviceTensor* dx) {
  if (!dx) return;
  const int64_t count = y.size();
  if (runtime_.on_host()) {
    const float* out = Runtime::host_data(y);
    const float* g = Runtime::host_data(dy);
    float* d = Runtime::host_data(*dx);
    for (int64_t i = 0; i < count; ++i) {
      const float v = out[i];
      const float slope = activation_ == ActivationKind::Relu      ? (v > 0.0f ? 1.0f : 0.0f)
                          : activation_ == ActivationKind::Sigmoid ? v * (1.0f - v)
                                                                   : 1.0f - v * v;
      d[i] = g[i] * slope;
    }
    return;
  }
  runtime_.launch("activation_backward", {y.buffer.get(), dy.buffer.get(), dx->buffer.get(),
                                          static_cast<int32_t>(count), static_cast<int32_t>(activation_)}, count);
}

Pool::Pool(Runtime& runtime, std::string name, PoolKind kind, int64_t size)
    : Layer(std::move(name)), runtime_(runtime), pool_(kind), size_(size) {
  if (size_ < 1) throw InvalidArgument(fmt::format("layer {}: pool size {} must be at least 1", this->name(), size_));
}

std::string Pool::spec() const { return fmt::format("{} {}x{}", kind(), size_, size_); }

std::vector<int64_t> Pool::output_shape(const std::vector<int64_t>& input) const {
  if (input.size() != 4 || input[2] < size_ || input[3] < size_) {
    throw InvalidArgument(fmt::format("layer {} ({}) expects N x C x H x W input of at least {}x{}, got {}", name(),
                                      spec(), size_, size_, shape_string(input)));
  }
  return {input[0], input[1], input[2] / size_, input[3] / size_};
}

void Pool::forward(const DeviceTensor& x, const DeviceTensor& y) {
  const int64_t planes = x.shape[0] * x.shape[1], h = x.shape[2], w = x.shape[3], p = h / size_, q = w / size_;
  if (runtime_.on_host()) {
    const float* in = Runtime::host_data(x);
    float* out = Runtime::host_data(y);
    parallel_for(planes, hardware_threads(), [&](int64_t plane) {
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          const float* window = in + plane * h * w + i * size_ * w + j * size_;
          float best = window[0], sum = 0;
          for (int64_t r = 0; r < size_; ++r)
            for (int64_t s = 0; s < size_; ++s) {
              best = std::max(best, window[r * w + s]);
              sum += window[r * w + s];
            }
          out[(plane * p + i) * q + j] = pool_ == PoolKind::Max ? best : sum / static_cast<float>(size_ * size_);
        }
    });
    return;
  }
  runtime_.launch("pool_forward",
                  {x.buffer.get(), y.buffer.get(), static_cast<int32_t>(planes), static_cast<int32_t>(h),
                   static_cast<int32_t>(w), static_cast<int32_t>(p), static_cast<int32_t>(q),
                   static_cast<int32_t>(size_), static_cast<int32_t>(pool_)},
                  planes * p * q);
}

void Pool::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, const DeviceTensor* dx) {
  if (!dx) return;
  const int64_t planes = x.shape[0] * x.shape[1], h = x.shape[2], w = x.shape[3], p = h / size_, q = w / size_;
  if (runtime_.on_host()) {
    const float* in = Runtime::host_data(x);
    const float* g = Runtime::host_data(dy);
    float* d = Runtime::host_data(*dx);
    parallel_for(planes, hardware_threads(), [&](int64_t plane) {
      const float* src = in + plane * h * w;
      float* dst = d + plane * h * w;
      std::fill(dst, dst + h * w, 0.0f);
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          const float grad = g[(plane * p + i) * q + j];
          if (pool_ == PoolKind::Average) {
            for (int64_t r = 0; r < size_; ++r)
              for (int64_t s = 0; s < size_; ++s) dst[(i * size_ + r) * w + j * size_ + s] = grad / (size_ * size_);
            continue;
          }
          // The first maximum of the window, as the kernel picks it.
          int64_t best_at = i * size_ * w + j * size_;
          for (int64_t r = 0; r < size_; ++r)
            for (int64_t s = 0; s < size_; ++s) {
              const int64_t at = (i * size_ + r) * w + j * size_ + s;
              if (src[at] > src[best_at]) best_at = at;
            }
          dst[best_at] = grad;
        }
    });
    return;
  }
  runtime_.launch("pool_backward",
                  {x.buffer.get(), dy.buffer.get(), dx->buffer.get(), static_cast<int32_t>(planes),
                   static_cast<int32_t>(h), static_cast<int32_t>(w), static_cast<int32_t>(p), static_cast<int32_t>(q),
                   static_cast<int32_t>(size_), static_cast<int32_t>(pool_)},
                  planes * h * w);
}

std::vector<int64_t> Flatten::output_shape(const std::vector<int64_t>& input) const {
  return {input.at(0), element_count(input) / input.at(0)};
}

}  // namespace convtune::nn
