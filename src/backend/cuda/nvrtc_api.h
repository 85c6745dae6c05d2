// The NVRTC functions convtune calls, resolved at run time (dlopen): without NVRTC, CUDA devices are still
// listed but compile nothing.
#pragma once

#include <nvrtc.h>

#include <string>

namespace convtune::cuda {

#define CONVTUNE_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion)                   \
  X(nvrtcGetErrorString)            \
  X(nvrtcCreateProgram)             \
  X(nvrtcDestroyProgram)            \
  X(nvrtcCompileProgram)            \
  X(nvrtcGetProgramLogSize)         \
  X(nvrtcGetProgramLog)             \
  X(nvrtcGetCUBINSize)              \
  X(nvrtcGetCUBIN)

struct NvrtcApi {
#define CONVTUNE_NVRTC_DECLARE(function) decltype(&::function) function = nullptr;
  CONVTUNE_NVRTC_FUNCTIONS(CONVTUNE_NVRTC_DECLARE)
#undef CONVTUNE_NVRTC_DECLARE

  int major = 0;
  int minor = 0;
  std::string library;  // the file that was loaded, for messages

  // "NVRTC 13.0": the compiler part of program cache keys and DeviceInfo::compiler.
  std::string version() const;

  // The process-wide NVRTC, loaded on first use from libnvrtc.so.13, .so.12, .so, then the same names under
  // /usr/local/cuda/lib64. Null when none loads; `error` (when given) then says what was tried and why.
  static const NvrtcApi* instance(std::string* error = nullptr);
};

}  // namespace convtune::cuda
