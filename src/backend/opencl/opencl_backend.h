// The OpenCL backend: every device of every OpenCL platform, with libOpenCL loaded at run time.
#pragma once

#include <memory>

#include "convtune/backend.h"

namespace convtune {
class ProgramCache;
}

namespace convtune::opencl {

// Builds through the process-wide ProgramCache::instance().
std::unique_ptr<Backend> make_opencl_backend();
// Builds through `cache`, which must outlive the backend: a fresh backend and cache on an existing cache
// directory behave like a second process.
std::unique_ptr<Backend> make_opencl_backend(ProgramCache& cache);

}  // namespace convtune::opencl
