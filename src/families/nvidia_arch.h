// Which NVIDIA architecture a device is, for families whose kernels use PTX of a given compute capability
// (cp.async and TF32 mma.sync need 8.0): CUDA devices, and NVIDIA's OpenCL, which reports "sm_XY" too.
#pragma once

#include <cstdlib>
#include <string>

#include "convtune/backend.h"

namespace convtune::families {

// 90 for sm_90; 0 for anything that is not an NVIDIA device reporting its compute capability.
inline int nvidia_compute_capability(const DeviceInfo& device) {
  const bool nvidia = device.backend == BackendKind::Cuda ||
                      (device.backend == BackendKind::OpenCL && device.vendor.find("NVIDIA") != std::string::npos);
  if (!nvidia || device.architecture.rfind("sm_", 0) != 0) return 0;
  return std::atoi(device.architecture.c_str() + 3);
}

}  // namespace convtune::families
