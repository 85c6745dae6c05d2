// Launch geometry conversion and its checks, kept free of driver calls so it is testable without a GPU.
#include "src/backend/cuda/cuda_launch_dims.h"

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::cuda {

namespace {

// Limits of every GPU since compute capability 2.0 (the CUDA programming guide's table of technical
// specifications); checking them here gives a message naming the axis instead of CUDA_ERROR_INVALID_VALUE.
constexpr std::array<size_t, 3> kMaxBlock{1024, 1024, 64};
constexpr size_t kMaxBlockThreads = 1024;
constexpr std::array<size_t, 3> kMaxGrid{2147483647, 65535, 65535};
constexpr const char* kAxisName[3] = {"0 (x)", "1 (y)", "2 (z)"};

}  // namespace

CudaLaunchDims cuda_launch_dims(const LaunchGeometry& geometry, std::string_view kernel_name) {
  if (geometry.dims < 1 || geometry.dims > 3) {
    throw BackendError(fmt::format("launch of {}: dims is {}, expected 1, 2 or 3", kernel_name, geometry.dims));
  }
  const size_t dims = static_cast<size_t>(geometry.dims);
  size_t zero_local_axes = 0;
  for (size_t axis = 0; axis < dims; ++axis) {
    if (geometry.global[axis] == 0) {
      throw BackendError(fmt::format("launch of {}: global size is 0 on axis {}", kernel_name, kAxisName[axis]));
    }
    if (geometry.local[axis] == 0) ++zero_local_axes;
  }
  if (zero_local_axes != 0 && zero_local_axes != dims) {
    throw BackendError(fmt::format("launch of {}: local size {}x{}x{} is zero on some axes but not all: give every "
                                   "axis a size, or all zero for the default",
                                   kernel_name, geometry.local[0], geometry.local[1], geometry.local[2]));
  }

  std::array<size_t, 3> block{1, 1, 1}, grid{1, 1, 1};
  if (zero_local_axes == dims) {
    block[0] = kDefaultBlockThreads;
    grid[0] = (geometry.global[0] + kDefaultBlockThreads - 1) / kDefaultBlockThreads;
    for (size_t axis = 1; axis < dims; ++axis) grid[axis] = geometry.global[axis];
  } else {
    for (size_t axis = 0; axis < dims; ++axis) {
      if (geometry.global[axis] % geometry.local[axis] != 0) {
        throw BackendError(fmt::format(
            "launch of {}: global size {} on axis {} is not a multiple of the local size {} (CUDA launches whole "
            "blocks: round the global size up and bounds-check in the kernel)",
            kernel_name, geometry.global[axis], kAxisName[axis], geometry.local[axis]));
      }
      block[axis] = geometry.local[axis];
      grid[axis] = geometry.global[axis] / geometry.local[axis];
    }
  }

  for (size_t axis = 0; axis < 3; ++axis) {
    if (block[axis] > kMaxBlock[axis]) {
      throw BackendError(fmt::format("launch of {}: local size {} on axis {} exceeds CUDA's limit of {}", kernel_name,
                                     block[axis], kAxisName[axis], kMaxBlock[axis]));
    }
    if (grid[axis] > kMaxGrid[axis]) {
      throw BackendError(fmt::format("launch of {}: {} blocks on axis {} exceed CUDA's limit of {} (global {} / local {})",
                                     kernel_name, grid[axis], kAxisName[axis], kMaxGrid[axis], geometry.global[axis],
                                     block[axis]));
    }
  }
  CudaLaunchDims result;
  for (size_t axis = 0; axis < 3; ++axis) {
    result.block[axis] = static_cast<unsigned>(block[axis]);
    result.grid[axis] = static_cast<unsigned>(grid[axis]);
  }
  if (result.threads_per_block() > kMaxBlockThreads) {
    throw BackendError(fmt::format("launch of {}: {}x{}x{} = {} threads per block exceed CUDA's limit of {}",
                                   kernel_name, block[0], block[1], block[2], result.threads_per_block(),
                                   kMaxBlockThreads));
  }
  return result;
}

}  // namespace convtune::cuda
