// The first OpenCL device that compiles kernels (PoCL on a CPU-only machine), or nullptr: the device the OpenCL and
// family tests run on, skipping where there is none.
#pragma once

#include "convtune/backend.h"

namespace convtune::test {

inline Device* opencl_device() {
  for (Device* d : Registry::instance().all_devices()) {
    if (d->info().backend == BackendKind::OpenCL && d->info().can_run_kernels) return d;
  }
  return nullptr;
}

}  // namespace convtune::test
