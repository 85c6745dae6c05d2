// The program cache key of an OpenCL build.
#include "src/backend/opencl/opencl_program_key.h"

#include <fmt/format.h>

namespace convtune::opencl {

ProgramCacheKey opencl_program_key(const DeviceInfo& device, const ProgramSource& source, std::string text) {
  return ProgramCacheKey{device.fingerprint(), fmt::format("{} | driver {}", device.compiler, device.driver_version),
                         std::move(text), source.defines, source.options};
}

}  // namespace convtune::opencl
