// Test helpers for fused forward epilogues (bias, ReLU, 2x2 max-pool): the host's answer (reference convolution,
// then the epilogue) and a family's plan run through device buffers with canaries after y.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "convtune/plan.h"
#include "src/backend/cpu/reference.h"

namespace convtune::testing_support {

inline std::vector<float> random_values(size_t count, uint64_t seed) {
  std::vector<float> v(count);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

// Reference convolution, then bias, ReLU and a floor 2x2 max-pool on the host.
inline std::vector<float> host_forward(const ConvProblem& pb, const Epilogue& e, std::vector<float> x, std::vector<float> w,
                                const std::vector<float>& bias) {
  std::vector<float> conv(static_cast<size_t>(pb.y_elements()));
  cpu::compute_reference(pb, cpu::HostOperands{{x.data(), w.data(), conv.data()}});
  const int64_t p = pb.p(), q = pb.q(), op = pooled_extent(p, e), oq = pooled_extent(q, e);
  auto activated = [&](int64_t n, int64_t k, int64_t row, int64_t col) {
    float v = conv[static_cast<size_t>(((n * pb.k + k) * p + row) * q + col)];
    if (e.bias) v += bias[static_cast<size_t>(k)];
    if (e.relu) v = std::max(v, 0.0f);
    return v;
  };
  std::vector<float> out(static_cast<size_t>(pb.n * pb.k * op * oq));
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t k = 0; k < pb.k; ++k)
      for (int64_t i = 0; i < op; ++i)
        for (int64_t j = 0; j < oq; ++j) {
          float v = -std::numeric_limits<float>::infinity();
          for (int64_t di = 0; di < e.pool; ++di)
            for (int64_t dj = 0; dj < e.pool; ++dj) v = std::max(v, activated(n, k, i * e.pool + di, j * e.pool + dj));
          out[static_cast<size_t>(((n * pb.k + k) * op + i) * oq + j)] = v;
        }
  return out;
}

inline constexpr size_t kCanaries = 32;
inline constexpr float kCanary = 777.25f;

// Runs the plan with an epilogue through device buffers; y is poisoned and followed by canaries.
inline std::vector<float> device_forward(Device& device, const std::string& family, const ConvProblem& pb, const Epilogue& e,
                                  const Config& config, const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& bias, int64_t y_count) {
  const Plan plan = Plan::create(device, {pb, e, family, config});
  EXPECT_EQ(plan.descriptor().operand_bytes(2), static_cast<size_t>(y_count) * sizeof(float));
  Queue& queue = device.queue();
  auto xb = device.allocate(x.size() * sizeof(float)), wb = device.allocate(w.size() * sizeof(float));
  auto bb = device.allocate(bias.size() * sizeof(float));
  auto yb = device.allocate((static_cast<size_t>(y_count) + kCanaries) * sizeof(float));
  queue.write(*xb, x.data(), x.size() * sizeof(float));
  queue.write(*wb, w.data(), w.size() * sizeof(float));
  queue.write(*bb, bias.data(), bias.size() * sizeof(float));
  std::vector<float> y(static_cast<size_t>(y_count) + kCanaries, std::numeric_limits<float>::quiet_NaN());
  std::fill(y.begin() + y_count, y.end(), kCanary);
  queue.write(*yb, y.data(), y.size() * sizeof(float));
  plan.run(queue, {xb.get(), wb.get(), yb.get(), e.bias ? bb.get() : nullptr});
  queue.read(*yb, y.data(), y.size() * sizeof(float));
  for (size_t i = static_cast<size_t>(y_count); i < y.size(); ++i) {
    EXPECT_EQ(y[i], kCanary) << "canary " << i - y_count << " after y overwritten: out-of-bounds write";
  }
  y.resize(static_cast<size_t>(y_count));
  return y;
}

// The largest error of `got` against `want`, relative to the largest |want| (NaN counts as infinite).
inline double relative_max_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 1e-30;
  for (size_t j = 0; j < want.size(); ++j) {
    worst = std::max(worst, std::isnan(got[j]) ? INFINITY : std::abs(double(got[j]) - want[j]));
    scale = std::max(scale, std::abs(double(want[j])));
  }
  return worst / scale;
}

}  // namespace convtune::testing_support
