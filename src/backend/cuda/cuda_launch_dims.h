// OpenCL-style launch geometry (global work-items, local work-group) as a CUDA grid of thread blocks.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "convtune/backend.h"

namespace convtune::cuda {

// Threads per block on axis 0 when LaunchGeometry::local is all zero. The grid is then rounded up to whole
// blocks, so a kernel launched that way runs extra threads and must bounds-check its global index.
inline constexpr unsigned kDefaultBlockThreads = 256;

struct CudaLaunchDims {
  std::array<unsigned, 3> grid{1, 1, 1};   // blocks per axis
  std::array<unsigned, 3> block{1, 1, 1};  // threads per block per axis
  size_t threads_per_block() const { return size_t{block[0]} * block[1] * block[2]; }
};

// grid = global / local per axis; axes at or beyond geometry.dims are 1. Throws BackendError naming
// `kernel_name` when dims is not 1..3, a global size is 0 or not a multiple of its local size, local is zero
// on some axes but not all, or a size exceeds what every CUDA GPU supports (block 1024 x 1024 x 64 threads,
// 1024 in all; grid 2^31-1 x 65535 x 65535 blocks).
CudaLaunchDims cuda_launch_dims(const LaunchGeometry& geometry, std::string_view kernel_name);

}  // namespace convtune::cuda
