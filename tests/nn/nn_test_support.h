// Helpers shared by the nn tests: the devices to test on and random host data.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "convtune/backend.h"

namespace convtune::nn::testing {

// The CPU backend, plus the first OpenCL device that runs kernels (PoCL on CI) when there is one.
inline std::vector<Device*> test_devices() {
  std::vector<Device*> devices = {&Registry::instance().find("cpu")};
  for (Device* d : Registry::instance().all_devices()) {
    if (d->info().backend == BackendKind::OpenCL && d->info().can_run_kernels) {
      devices.push_back(d);
      break;
    }
  }
  return devices;
}

inline std::vector<float> random_values(size_t count, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace convtune::nn::testing
