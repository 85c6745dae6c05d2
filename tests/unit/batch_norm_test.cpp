// BatchNormPlan against a float64 reference on the CPU backend and PoCL: statistics, the normalised output with its
// residual and ReLU, and every gradient, in each element type and layout, over one chunk and several.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "convtune/convtune.h"
#include "convtune/rounding.h"

using namespace convtune;

namespace {

std::vector<Device*> devices() {
  std::vector<Device*> found{&Registry::instance().find("cpu")};
  if (Backend* opencl = Registry::instance().backend(BackendKind::OpenCL); opencl && opencl->available())
    if (opencl->device_count() > 0) found.push_back(&opencl->device(0));
  return found;
}

// Values as the tensor stores them (rounded to the type) and their bytes.
struct Tensor {
  std::vector<double> values;
  std::vector<unsigned char> bytes;
};

Tensor make(ElementType type, size_t count, std::mt19937& rng, double mean, double spread) {
  std::normal_distribution<double> normal(mean, spread);
  Tensor t;
  t.bytes.resize(count * static_cast<size_t>(bytes_per_element(type)));
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(normal(rng));
    if (type == ElementType::F32) {
      std::memcpy(&t.bytes[i * 4], &v, 4);
      t.values.push_back(v);
    } else {
      const uint16_t bits = type == ElementType::BF16 ? fp32_to_bf16(v) : fp32_to_fp16(v);
      std::memcpy(&t.bytes[i * 2], &bits, 2);
      t.values.push_back(type == ElementType::BF16 ? bf16_to_fp32(bits) : fp16_to_fp32(bits));
    }
  }
  return t;
}

std::vector<double> values_of(ElementType type, const std::vector<unsigned char>& bytes) {
  const size_t count = bytes.size() / static_cast<size_t>(bytes_per_element(type));
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (type == ElementType::F32) {
      float v;
      std::memcpy(&v, &bytes[i * 4], 4);
      out[i] = v;
    } else {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      out[i] = type == ElementType::BF16 ? bf16_to_fp32(bits) : fp16_to_fp32(bits);
    }
  }
  return out;
}

size_t channel_of(const BatchNormProblem& p, size_t i) {
  const size_t c = static_cast<size_t>(p.c), hw = static_cast<size_t>(p.h * p.w);
  return p.layout == Layout::NHWC ? i % c : (i / hw) % c;
}

struct Device1 {
  Device& device;
  std::unique_ptr<Buffer> upload(const void* data, size_t bytes) {
    auto b = device.allocate(bytes);
    device.queue().write(*b, data, bytes);
    return b;
  }
  template <class T>
  std::vector<T> download(const Buffer& b, size_t count) {
    std::vector<T> out(count);
    device.queue().read(b, out.data(), count * sizeof(T));
    return out;
  }
};

// The bound on an element of `type` that a float64 value `ref` of magnitude scale rounds to, with FP32 arithmetic.
double tolerance(ElementType type, double scale) {
  const double rounding = type == ElementType::F32 ? 0 : type == ElementType::BF16 ? 1.0 / 256 : 1.0 / 2048;
  return (rounding + 2e-5) * scale + 1e-6;
}

void check_problem(Device& device, const BatchNormProblem& p) {
  SCOPED_TRACE(p.to_string() + " on " + device.info().id);
  std::mt19937 rng(static_cast<unsigned>(p.elements() + p.c));
  const size_t count = static_cast<size_t>(p.elements()), c = static_cast<size_t>(p.c);
  const double rows = static_cast<double>(p.n * p.h * p.w);
  // A mean far from zero: the variance must not lose its digits to it.
  const Tensor y = make(p.type, count, rng, 3.0, 0.7);
  const Tensor residual = make(p.type, count, rng, 0.0, 1.0);
  const Tensor da = make(p.type, count, rng, 0.0, 1.0);
  std::vector<float> params(2 * c);
  for (size_t k = 0; k < c; ++k) {
    params[k] = 0.5f + 0.1f * static_cast<float>(k % 7);
    params[c + k] = -0.2f + 0.05f * static_cast<float>(k % 5);
  }
  const float eps = 1e-5f;
  const size_t bytes = y.bytes.size();
  Device1 d{device};
  BatchNormPlan plan(device, p);
  auto y_b = d.upload(y.bytes.data(), bytes), res_b = d.upload(residual.bytes.data(), bytes);
  auto da_b = d.upload(da.bytes.data(), bytes), gamma_b = d.upload(params.data(), c * 4);
  auto beta_b = d.upload(params.data() + c, c * 4);
  std::vector<float> running(2 * c, 0.5f);
  auto rmean_b = d.upload(running.data(), c * 4), rvar_b = d.upload(running.data() + c, c * 4);
  auto stats_b = device.allocate(2 * c * 4), a_b = device.allocate(bytes), dy_b = device.allocate(bytes);
  auto dres_b = device.allocate(bytes), dgamma_b = device.allocate(c * 4), dbeta_b = device.allocate(c * 4);
  auto ws = device.allocate(plan.workspace_bytes());
  BatchNormForward f;
  f.y = y_b.get(), f.gamma = gamma_b.get(), f.beta = beta_b.get(), f.residual = p.residual ? res_b.get() : nullptr;
  f.stats = stats_b.get(), f.a = a_b.get(), f.running_mean = rmean_b.get(), f.running_var = rvar_b.get();
  f.momentum = 0.25f, f.eps = eps;
  plan.forward(device.queue(), f, *ws);
  BatchNormBackward g;
  g.da = da_b.get(), g.a = a_b.get(), g.y = y_b.get(), g.stats = stats_b.get(), g.gamma = gamma_b.get();
  g.dy = dy_b.get(), g.dgamma = dgamma_b.get(), g.dbeta = dbeta_b.get();
  g.dresidual = p.residual ? dres_b.get() : nullptr, g.eps = eps;
  plan.backward(device.queue(), g, *ws);
  device.queue().finish();
  const auto rmean = d.download<float>(*rmean_b, c), rvar = d.download<float>(*rvar_b, c);
  const auto dgamma = d.download<float>(*dgamma_b, c), dbeta = d.download<float>(*dbeta_b, c);
  const auto stats = d.download<float>(*stats_b, 2 * c);
  std::vector<unsigned char> raw(bytes);
  device.queue().read(*a_b, raw.data(), bytes);
  const auto a = values_of(p.type, raw);
  device.queue().read(*dy_b, raw.data(), bytes);
  const auto dy = values_of(p.type, raw);
  device.queue().read(*dres_b, raw.data(), bytes);
  const auto dres = values_of(p.type, raw);

  // The float64 reference: statistics, output, and (through the device's ReLU mask, a) the gradients.
  std::vector<double> mean(c), var(c), sum_dz(c), sum_dz_xhat(c);
  for (size_t i = 0; i < count; ++i) mean[channel_of(p, i)] += y.values[i] / rows;
  for (size_t i = 0; i < count; ++i) var[channel_of(p, i)] += std::pow(y.values[i] - mean[channel_of(p, i)], 2) / rows;
  std::vector<double> dz(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t k = channel_of(p, i);
    const double inv = 1 / std::sqrt(var[k] + eps), xhat = (y.values[i] - mean[k]) * inv;
    double v = xhat * params[k] + params[c + k] + (p.residual ? residual.values[i] : 0);
    if (p.relu) v = std::max(v, 0.0);
    if (p.relu && p.relu_max > 0) v = std::min(v, double{p.relu_max});
    ASSERT_LE(std::abs(a[i] - v), tolerance(p.type, std::abs(v) + 1)) << "a[" << i << "]";
    const bool open = !p.relu || (a[i] > 0 && (p.relu_max <= 0 || a[i] < p.relu_max));
    dz[i] = open ? da.values[i] : 0;
    sum_dz[k] += dz[i];
    sum_dz_xhat[k] += dz[i] * xhat;
  }
  for (size_t k = 0; k < c; ++k) {
    EXPECT_NEAR(stats[k], mean[k], 1e-5 * (std::abs(mean[k]) + 1)) << "mean[" << k << "]";
    EXPECT_NEAR(stats[c + k], var[k], 1e-4 * var[k] + 1e-7) << "var[" << k << "]";
    const double grad_scale = std::sqrt(rows) + 1;
    EXPECT_NEAR(dgamma[k], sum_dz_xhat[k], 1e-5 * grad_scale) << "dgamma[" << k << "]";
    EXPECT_NEAR(dbeta[k], sum_dz[k], 1e-5 * grad_scale) << "dbeta[" << k << "]";
    // momentum 0.25 from 0.5, the variance unbiased
    EXPECT_NEAR(rmean[k], 0.75 * 0.5 + 0.25 * mean[k], 1e-5 * (std::abs(mean[k]) + 1)) << "running_mean[" << k << "]";
    EXPECT_NEAR(rvar[k], 0.75 * 0.5 + 0.25 * var[k] * rows / (rows - 1), 1e-4 * var[k] + 1e-6)
        << "running_var[" << k << "]";
  }
  for (size_t i = 0; i < count; ++i) {
    const size_t k = channel_of(p, i);
    const double inv = 1 / std::sqrt(var[k] + eps), xhat = (y.values[i] - mean[k]) * inv;
    const double want = params[k] * inv * (dz[i] - sum_dz[k] / rows - xhat * sum_dz_xhat[k] / rows);
    ASSERT_LE(std::abs(dy[i] - want), tolerance(p.type, std::abs(want) + 1)) << "dy[" << i << "]";
    if (p.residual) ASSERT_EQ(dres[i], dz[i]) << "dresidual[" << i << "]";
  }
}

}  // namespace

TEST(BatchNormPlan, MatchesFloat64InEveryTypeLayoutAndBlock) {
  for (Device* device : devices()) {
    for (ElementType type : {ElementType::F32, ElementType::BF16, ElementType::F16}) {
      for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
        BatchNormProblem p;
        p.type = type;
        p.layout = layout;
        p.residual = true, p.relu = true;
        p.n = 3, p.c = 70, p.h = 5, p.w = 7;  // neither the channels nor the pixels fill 16-byte vectors
        check_problem(*device, p);
        p.c = 72, p.h = 8, p.w = 6;  // both do (72: a partial block of channel vectors in NHWC)
        check_problem(*device, p);
        if (type != ElementType::F32) continue;
        p.residual = false, p.relu_max = 6;
        check_problem(*device, p);
        p.relu = false, p.relu_max = 0;
        check_problem(*device, p);
      }
    }
  }
}

TEST(BatchNormPlan, SumsManyChunksInOrder) {
  for (Device* device : devices()) {
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      BatchNormProblem p;
      p.layout = layout;
      p.n = 4, p.c = 3, p.h = 61, p.w = 59, p.relu = true;  // 14,396 rows of 3 channels: several chunks
      check_problem(*device, p);
      p.c = 8, p.h = 64, p.w = 56;  // the same with 16-byte vectors
      check_problem(*device, p);
    }
  }
}

TEST(BatchNormPlan, RefusesBadProblemsAndBuffersNamingTheField) {
  Device& cpu = Registry::instance().find("cpu");
  BatchNormProblem p;
  p.c = 0;
  try {
    BatchNormPlan plan(cpu, p);
    FAIL() << "a problem without channels was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("c: expected a positive size, got 0"), std::string::npos) << e.what();
  }
  p.c = 4, p.relu_max = 6;
  EXPECT_THROW(BatchNormPlan(cpu, p), InvalidArgument);  // a clamp without a ReLU
  p.relu_max = 0, p.h = 2, p.w = 2;
  BatchNormPlan plan(cpu, p);
  auto small = cpu.allocate(4), vec = cpu.allocate(64), ws = cpu.allocate(plan.workspace_bytes());
  BatchNormForward f;
  f.y = small.get(), f.gamma = f.beta = f.stats = f.a = vec.get();
  try {
    plan.forward(cpu.queue(), f, *ws);
    FAIL() << "a y of 4 bytes was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("y holds 4 bytes, expected at least 64"), std::string::npos) << e.what();
  }
  f.y = vec.get(), f.gamma = nullptr;
  try {
    plan.forward(cpu.queue(), f, *ws);
    FAIL() << "a missing gamma was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gamma: expected a buffer, got none"), std::string::npos) << e.what();
  }
  f.gamma = vec.get(), f.running_mean = f.running_var = vec.get(), f.momentum = 1.5f;
  EXPECT_THROW(plan.forward(cpu.queue(), f, *ws), InvalidArgument);  // momentum past 1
}
