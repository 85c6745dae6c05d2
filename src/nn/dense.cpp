// Dense: GEMMs for forward (x W^T), dx (dy W) and dW (dy^T x); bias by kernel or host loop.
#include <fmt/format.h>

#include "convtune/error.h"
#include "convtune/nn/layers.h"
#include "src/nn/init.h"

namespace convtune::nn {

Dense::Dense(Runtime& runtime, std::string name, int64_t in_features, int64_t out_features)
    : Layer(std::move(name)), runtime_(runtime), in_(in_features), out_(out_features) {
  if (in_ < 1 || out_ < 1) throw InvalidArgument(fmt::format("layer {}: invalid dense {}->{}", this->name(), in_, out_));
  weight_ = {this->name() + ".weight", runtime_.allocate({out_, in_}), runtime_.allocate({out_, in_})};
  bias_ = {this->name() + ".bias", runtime_.allocate({out_}), runtime_.allocate({out_})};
}

std::string Dense::spec() const { return fmt::format("dense {}->{}", in_, out_); }

std::vector<int64_t> Dense::output_shape(const std::vector<int64_t>& input) const {
  const int64_t features = input.empty() ? 0 : element_count(input) / input[0];
  if (features != in_) {
    throw InvalidArgument(fmt::format("layer {} ({}) expects {} features per sample, got input {}", name(), spec(), in_,
                                      shape_string(input)));
  }
  return {input[0], out_};
}

void Dense::initialize(uint64_t seed) {
  runtime_.upload(weight_.value, he_uniform(weight_.value.size(), in_, seed, weight_.name));
  runtime_.fill_zero(bias_.value);
}

void Dense::forward(const DeviceTensor& x, const DeviceTensor& y) {
  const int64_t batch = x.shape[0];
  runtime_.gemm(*x.buffer, *weight_.value.buffer, *y.buffer, batch, out_, in_, false, true);
  if (runtime_.on_host()) {
    float* yp = Runtime::host_data(y);
    const float* b = Runtime::host_data(bias_.value);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t j = 0; j < out_; ++j) yp[n * out_ + j] += b[j];
    return;
  }
  runtime_.launch("bias_add", {y.buffer.get(), bias_.value.buffer.get(), static_cast<int32_t>(batch * out_),
                               static_cast<int32_t>(out_), int32_t{1}}, batch * out_);
}

void Dense::backward(const DeviceTensor& x, const DeviceTensor&, const DeviceTensor& dy, const DeviceTensor* dx) {
  const int64_t batch = x.shape[0];
  runtime_.gemm(*dy.buffer, *x.buffer, *weight_.grad.buffer, out_, in_, batch, true, false);
  if (dx) runtime_.gemm(*dy.buffer, *weight_.value.buffer, *dx->buffer, batch, in_, out_, false, false);
  if (runtime_.on_host()) {
    const float* g = Runtime::host_data(dy);
    float* db = Runtime::host_data(bias_.grad);
    for (int64_t j = 0; j < out_; ++j) {
      double sum = 0;
      for (int64_t n = 0; n < batch; ++n) sum += g[n * out_ + j];
      db[j] = static_cast<float>(sum);
    }
    return;
  }
  runtime_.launch("bias_grad",
                  {dy.buffer.get(), bias_.grad.buffer.get(), static_cast<int32_t>(batch), static_cast<int32_t>(out_),
                   int32_t{1}},
                  LaunchGeometry{1, {static_cast<size_t>(out_) * 256, 1, 1}, {256, 1, 1}, 0});
}

}  // namespace convtune::nn
