// The scratch memory a family's plan may take on a device: 256 MiB, and at most a quarter of what it has, so a
// plan never crowds out the tensors it computes on.
#pragma once

#include <algorithm>
#include <cstdint>

#include "convtune/backend.h"

namespace convtune::families {

inline constexpr uint64_t kWorkspaceCapBytes = uint64_t{256} << 20;
inline constexpr const char* kWorkspaceCapText = "min(256 MiB, global memory / 4)";

inline uint64_t workspace_cap_bytes(const DeviceInfo& device) {
  // A device that reports no global memory size keeps the fixed cap rather than a cap of zero.
  return device.global_memory_bytes == 0 ? kWorkspaceCapBytes : std::min(kWorkspaceCapBytes, device.global_memory_bytes / 4);
}

}  // namespace convtune::families
