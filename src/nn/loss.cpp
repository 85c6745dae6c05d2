// Softmax cross-entropy and squared error: nn.cl kernels on devices, host loops on the CPU backend.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "convtune/nn/loss.h"

namespace convtune::nn {

namespace {

class KernelLoss : public Loss {
 public:
  double forward_backward(Runtime& runtime, const DeviceTensor& output, const Buffer& labels,
                          const DeviceTensor& grad) override {
    const int64_t n = output.shape.at(0), classes = output.size() / n;
    const float scale = 1.0f / static_cast<float>(n);
    std::vector<float> per_sample(static_cast<size_t>(n));
    if (runtime.on_host()) {
      host(Runtime::host_data(output), Runtime::host_ints(labels), per_sample.data(), Runtime::host_data(grad), n,
           classes, scale);
    } else {
      auto& slot = loss_buffers_[n];
      if (!slot) slot = runtime.allocate_bytes(static_cast<size_t>(n) * sizeof(float));
      runtime.launch(kernel(), {output.buffer.get(), &labels, slot.get(), grad.buffer.get(), static_cast<int32_t>(n),
                                static_cast<int32_t>(classes), scale}, n);
      runtime.queue().read(*slot, per_sample.data(), per_sample.size() * sizeof(float));
    }
    double sum = 0;
    for (float v : per_sample) sum += v;
    return sum / static_cast<double>(n);
  }

 protected:
  virtual const char* kernel() const = 0;
  virtual void host(const float* out, const int32_t* labels, float* loss, float* grad, int64_t n, int64_t classes,
                    float scale) const = 0;

 private:
  std::map<int64_t, std::shared_ptr<Buffer>> loss_buffers_;
};

class SoftmaxCrossEntropy final : public KernelLoss {
 public:
  std::string name() const override { return "softmax-cross-entropy"; }

 protected:
  const char* kernel() const override { return "softmax_cross_entropy"; }
  void host(const float* z, const int32_t* labels, float* loss, float* grad, int64_t n, int64_t classes,
            float scale) const override {
    for (int64_t i = 0; i < n; ++i) {
      const float* row = z + i * classes;
      float top = row[0];
      for (int64_t c = 1; c < classes; ++c) top = std::max(top, row[c]);
      float total = 0;
      for (int64_t c = 0; c < classes; ++c) total += std::exp(row[c] - top);
      loss[i] = std::log(total) - (row[labels[i]] - top);
      for (int64_t c = 0; c < classes; ++c) {
        grad[i * classes + c] = (std::exp(row[c] - top) / total - (c == labels[i] ? 1.0f : 0.0f)) * scale;
      }
    }
  }
};

class SquaredError final : public KernelLoss {
 public:
  std::string name() const override { return "squared-error"; }

 protected:
  const char* kernel() const override { return "squared_error"; }
  void host(const float* out, const int32_t* labels, float* loss, float* grad, int64_t n, int64_t classes,
            float scale) const override {
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int64_t c = 0; c < classes; ++c) {
        const float diff = out[i * classes + c] - (c == labels[i] ? 1.0f : 0.0f);
        sum += diff * diff;
        grad[i * classes + c] = diff * scale;
      }
      loss[i] = 0.5f * sum;
    }
  }
};

}  // namespace

std::unique_ptr<Loss> make_softmax_cross_entropy() { return std::make_unique<SoftmaxCrossEntropy>(); }
std::unique_ptr<Loss> make_squared_error() { return std::make_unique<SquaredError>(); }

}  // namespace convtune::nn
