// The libcuda functions convtune calls, resolved at run time (dlopen) so the binary starts without a driver.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>

namespace convtune::cuda {

// Each entry is resolved under the name cuda.h maps it to (cuMemAlloc -> cuMemAlloc_v2), so the pointer's type
// and the driver symbol's ABI always agree. The second column allows a driver older than the versioned symbol
// to provide the base name instead; it is true only where both versions share one signature.
#define CONVTUNE_CUDA_REQUIRED_FUNCTIONS(X) \
  X(cuInit, false)                          \
  X(cuDriverGetVersion, false)              \
  X(cuGetErrorName, false)                  \
  X(cuGetErrorString, false)                \
  X(cuDeviceGetCount, false)                \
  X(cuDeviceGet, false)                     \
  X(cuDeviceGetName, false)                 \
  X(cuDeviceGetAttribute, false)            \
  X(cuDeviceTotalMem, false)                \
  X(cuDevicePrimaryCtxRetain, false)        \
  X(cuDevicePrimaryCtxRelease, false)       \
  X(cuCtxSetCurrent, false)                 \
  X(cuCtxGetCurrent, false)                 \
  X(cuMemAlloc, false)                      \
  X(cuMemFree, false)                       \
  X(cuMemGetInfo, false)                    \
  X(cuMemcpyHtoDAsync, false)               \
  X(cuMemcpyDtoHAsync, false)               \
  X(cuMemcpyDtoDAsync, false)               \
  X(cuStreamCreate, false)                  \
  X(cuStreamDestroy, false)                 \
  X(cuStreamSynchronize, false)             \
  X(cuEventCreate, false)                   \
  X(cuEventDestroy, false)                  \
  X(cuEventRecord, false)                   \
  X(cuEventSynchronize, false)              \
  X(cuEventElapsedTime, true)               \
  X(cuModuleLoadData, false)                \
  X(cuModuleUnload, false)                  \
  X(cuModuleGetFunction, false)             \
  X(cuFuncGetAttribute, false)              \
  X(cuFuncSetAttribute, false)              \
  X(cuLaunchKernel, false)

// Newer than the oldest driver convtune runs on (cuFuncGetParamInfo: CUDA 12.4). Null when absent; what uses
// them (checking argument sizes against the kernel's signature) is then skipped.
#define CONVTUNE_CUDA_OPTIONAL_FUNCTIONS(X) X(cuFuncGetParamInfo)

struct DriverApi {
  // Members carry the API names; cuda.h's #defines rename declaration and calls alike, so api.cuMemAlloc(...)
  // calls the cuMemAlloc_v2 pointer.
#define CONVTUNE_CUDA_DECLARE(function, ...) decltype(&::function) function = nullptr;
  CONVTUNE_CUDA_REQUIRED_FUNCTIONS(CONVTUNE_CUDA_DECLARE)
  CONVTUNE_CUDA_OPTIONAL_FUNCTIONS(CONVTUNE_CUDA_DECLARE)
#undef CONVTUNE_CUDA_DECLARE

  // dlopens `library` and resolves every function. Returns null with `error` set when the library is missing
  // or lacks a required function. The library is never closed: buffers and modules freed during static
  // destruction still call into it.
  static std::unique_ptr<DriverApi> load(const std::string& library, std::string& error);

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)". Works even where cuGetErrorName does not (the toolkit's stub
  // library, a driver that failed cuInit), because those are exactly the errors a user needs named.
  std::string describe(CUresult result) const;

  // Throws BackendError "cuMemAlloc failed: CUDA_ERROR_... (...)" followed by `context` when result is an error.
  void check(CUresult result, std::string_view call, std::string_view context = {}) const;
};

}  // namespace convtune::cuda
