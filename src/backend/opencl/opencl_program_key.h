// The program cache key of an OpenCL build: what makes two builds give the same binary.
#pragma once

#include <string>

#include "convtune/backend.h"
#include "src/backend/program_cache.h"

namespace convtune::opencl {

// `text` is the expanded kernel source (load_kernel_source). The platform version names the compiler
// (PoCL's includes its LLVM version); the driver version is added because vendors ship the compiler with it.
ProgramCacheKey opencl_program_key(const DeviceInfo& device, const ProgramSource& source, std::string text);

}  // namespace convtune::opencl
