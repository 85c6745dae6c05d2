// Helpers shared by the direct_tiled family's output-tiled and filter-tiled halves.
#include "src/families/direct_tiled/direct_tiled_variant.h"

#include <algorithm>

namespace convtune::direct_tiled {

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t local_memory_limit(const DeviceInfo& device) {
  return std::min<int64_t>(static_cast<int64_t>(device.local_memory_bytes), kMaxStaticLocalBytes);
}

void fit_extent(int64_t& tile, int64_t& threads, int64_t extent) {
  while (tile * threads > pow2_ceil(extent)) {
    if (threads > 1) {
      threads /= 2;
    } else {
      tile /= 2;
    }
  }
}

}  // namespace convtune::direct_tiled
