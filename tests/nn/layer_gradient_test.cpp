// Every layer's backward against finite differences of its forward (CPU backend and PoCL), and every device
// layer's forward/backward against the CPU layer on the same random inputs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "convtune/nn/layers.h"
#include "convtune/nn/loss.h"
#include "tests/nn/nn_test_support.h"

namespace convtune::nn {
namespace {

using testing::random_values;
using testing::test_devices;

using LayerFactory = std::function<std::unique_ptr<Layer>(Runtime&)>;

struct LayerCase {
  std::string label;
  LayerFactory make;
  std::vector<int64_t> input;
};

// What one backend computed for a layer on fixed inputs: y, dx and each parameter's gradient.
struct LayerResult {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> param_grads;
};

// Loss L = sum(y * r) with fixed random r, so dL/dy = r and the numeric derivative of L is well conditioned.
double weighted_sum(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// Central differences in FP32 with step 1e-2 have truncation error O(h^2 f''') plus rounding O(eps |L| / h);
// for these sizes both stay well under 1% of the gradient's norm, except across a ReLU/max kink, which the
// inputs (kept away from ties by their random spread) rarely hit within one step. Checking the relative L2
// error over sampled coordinates with a 3% bound catches any real backward bug (they give O(1) errors).
constexpr float kStep = 1e-2f;
constexpr double kGradientTolerance = 3e-2;

double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Up to 24 coordinates spread over the tensor.
std::vector<size_t> sample_indices(size_t count) {
  std::vector<size_t> idx;
  const size_t stride = std::max<size_t>(1, count / 24);
  for (size_t i = stride / 2; i < count; i += stride) idx.push_back(i);
  return idx;
}

LayerResult check_layer(Device& device, const LayerCase& c) {
  SCOPED_TRACE(fmt::format("{} on {}", c.label, device.info().id));
  Runtime runtime(device);
  auto layer = c.make(runtime);
  layer->initialize(7);
  // Perturb the biases too, so they are not all zero.
  for (Parameter* p : layer->parameters()) {
    if (p->name.ends_with(".bias")) runtime.upload(p->value, random_values(p->value.size(), 11, -0.5f, 0.5f));
  }
  DeviceTensor x = runtime.allocate(c.input);
  std::vector<float> xv = random_values(x.size(), 3);
  // Keep inputs a few steps away from ReLU's kink at zero, where a central difference is meaningless.
  for (float& v : xv) v = v < 0 ? std::min(v, -5 * kStep) : std::max(v, 5 * kStep);
  runtime.upload(x, xv);
  const std::vector<int64_t> out_shape = layer->output_shape(c.input);
  DeviceTensor y = layer->aliases_input() ? DeviceTensor{out_shape, x.buffer} : runtime.allocate(out_shape);
  const std::vector<float> r = random_values(element_count(out_shape), 5);
  DeviceTensor dy = runtime.allocate(out_shape), dx = runtime.allocate(c.input);
  if (layer->aliases_input()) dx.buffer = dy.buffer;
  runtime.upload(dy, r);

  LayerResult result;
  layer->forward(x, y);
  result.y = runtime.download(y);
  layer->backward(x, y, dy, &dx);
  result.dx = runtime.download(dx);
  for (Parameter* p : layer->parameters()) result.param_grads.push_back(runtime.download(p->grad));

  auto loss_now = [&] {
    layer->forward(x, y);
    return weighted_sum(runtime.download(y), r);
  };
  // dx: perturb the input.
  std::vector<double> numeric, analytic;
  for (size_t i : sample_indices(xv.size())) {
    std::vector<float> xp = xv;
    xp[i] = xv[i] + kStep;
    runtime.upload(x, xp);
    const double up = loss_now();
    xp[i] = xv[i] - kStep;
    runtime.upload(x, xp);
    const double down = loss_now();
    numeric.push_back((up - down) / (2.0 * kStep));
    analytic.push_back(result.dx[i]);
  }
  runtime.upload(x, xv);
  EXPECT_LT(relative_l2(analytic, numeric), kGradientTolerance) << "dx";
  // Each parameter.
  size_t index = 0;
  for (Parameter* p : layer->parameters()) {
    const std::vector<float> pv = runtime.download(p->value);
    numeric.clear();
    analytic.clear();
    for (size_t i : sample_indices(pv.size())) {
      std::vector<float> pp = pv;
      pp[i] = pv[i] + kStep;
      runtime.upload(p->value, pp);
      const double up = loss_now();
      pp[i] = pv[i] - kStep;
      runtime.upload(p->value, pp);
      const double down = loss_now();
      numeric.push_back((up - down) / (2.0 * kStep));
      analytic.push_back(result.param_grads[index][i]);
    }
    runtime.upload(p->value, pv);
    EXPECT_LT(relative_l2(analytic, numeric), kGradientTolerance) << p->name;
    ++index;
  }
  return result;
}

void expect_close(const std::vector<float>& device, const std::vector<float>& host, const std::string& what) {
  ASSERT_EQ(device.size(), host.size()) << what;
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(device[i] - host[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(host[i])));
  }
  // FP32 sums of at most a few hundred terms in a different order: relative 1e-4 of the largest value.
  EXPECT_LE(max_err, 1e-4 * std::max(max_ref, 1.0)) << what;
}

std::vector<LayerCase> layer_cases() {
  return {
      {"conv2d 3->4 3x3 pad 1", [](Runtime& r) { return std::make_unique<Conv2d>(r, "conv", 3, 4, 3, 1); }, {2, 3, 6, 6}},
      {"conv2d 2->3 5x5 pad 2", [](Runtime& r) { return std::make_unique<Conv2d>(r, "conv", 2, 3, 5, 2); }, {2, 2, 8, 8}},
      {"dense 12->5", [](Runtime& r) { return std::make_unique<Dense>(r, "fc", 12, 5); }, {3, 12}},
      {"dense 2x2x3->7", [](Runtime& r) { return std::make_unique<Dense>(r, "fc", 12, 7); }, {2, 3, 2, 2}},
      {"relu", [](Runtime& r) { return std::make_unique<Activation>(r, "act", ActivationKind::Relu); }, {2, 3, 4, 4}},
      {"sigmoid", [](Runtime& r) { return std::make_unique<Activation>(r, "act", ActivationKind::Sigmoid); }, {4, 9}},
      {"tanh", [](Runtime& r) { return std::make_unique<Activation>(r, "act", ActivationKind::Tanh); }, {4, 9}},
      {"maxpool 2", [](Runtime& r) { return std::make_unique<Pool>(r, "pool", PoolKind::Max, 2); }, {2, 3, 6, 6}},
      {"maxpool 2 odd", [](Runtime& r) { return std::make_unique<Pool>(r, "pool", PoolKind::Max, 2); }, {1, 2, 5, 7}},
      {"avgpool 3", [](Runtime& r) { return std::make_unique<Pool>(r, "pool", PoolKind::Average, 3); }, {2, 2, 6, 6}},
      {"flatten", [](Runtime&) { return std::make_unique<Flatten>("flat"); }, {2, 3, 2, 2}},
  };
}

class LayerGradient : public ::testing::TestWithParam<size_t> {};

TEST_P(LayerGradient, BackwardMatchesFiniteDifferencesAndDevicesMatchTheCpu) {
  const LayerCase c = layer_cases()[GetParam()];
  std::vector<LayerResult> results;
  for (Device* device : test_devices()) results.push_back(check_layer(*device, c));
  for (size_t d = 1; d < results.size(); ++d) {
    SCOPED_TRACE(fmt::format("{}: {} against the CPU backend", c.label, test_devices()[d]->info().id));
    expect_close(results[d].y, results[0].y, "y");
    expect_close(results[d].dx, results[0].dx, "dx");
    for (size_t p = 0; p < results[0].param_grads.size(); ++p) {
      expect_close(results[d].param_grads[p], results[0].param_grads[p], fmt::format("parameter {} gradient", p));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerGradient, ::testing::Range<size_t>(0, layer_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = layer_cases()[info.param].label;
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

// The losses' gradients against finite differences of their own mean loss, on every test device.
TEST(LossGradient, SoftmaxCrossEntropyAndSquaredErrorMatchFiniteDifferences) {
  for (Device* device : test_devices()) {
    for (bool cross_entropy : {true, false}) {
      SCOPED_TRACE(fmt::format("{} on {}", cross_entropy ? "softmax-CE" : "squared error", device->info().id));
      Runtime runtime(*device);
      auto loss = cross_entropy ? make_softmax_cross_entropy() : make_squared_error();
      const int64_t n = 4, classes = 10;
      DeviceTensor out = runtime.allocate({n, classes}), grad = runtime.allocate({n, classes});
      const std::vector<float> values = random_values(n * classes, 9, -2.0f, 2.0f);
      const std::vector<int32_t> labels = {3, 0, 9, 5};
      auto label_buffer = runtime.allocate_bytes(labels.size() * sizeof(int32_t));
      runtime.queue().write(*label_buffer, labels.data(), labels.size() * sizeof(int32_t));
      runtime.upload(out, values);
      const double base = loss->forward_backward(runtime, out, *label_buffer, grad);
      EXPECT_GT(base, 0.0);
      const std::vector<float> analytic_f = runtime.download(grad);
      std::vector<double> numeric, analytic;
      for (size_t i = 0; i < values.size(); ++i) {
        std::vector<float> v = values;
        v[i] = values[i] + kStep;
        runtime.upload(out, v);
        const double up = loss->forward_backward(runtime, out, *label_buffer, grad);
        v[i] = values[i] - kStep;
        runtime.upload(out, v);
        const double down = loss->forward_backward(runtime, out, *label_buffer, grad);
        numeric.push_back((up - down) / (2.0 * kStep));
        analytic.push_back(analytic_f[i]);
      }
      EXPECT_LT(relative_l2(analytic, numeric), kGradientTolerance);
    }
  }
}

}  // namespace
}  // namespace convtune::nn
