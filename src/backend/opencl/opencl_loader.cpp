// Opens libOpenCL with dlopen so the convtune binary starts on machines without any OpenCL installed.
#include "src/backend/opencl/opencl_loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace convtune::opencl {

OpenCLLibrary::OpenCLLibrary() {
  void* handle = nullptr;
  std::string dlopen_error;
  // The versioned name is what ICD loader packages install; the bare name exists only with -dev packages.
  for (const char* name : {"libOpenCL.so.1", "libOpenCL.so"}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      library_name_ = name;
      break;
    }
    if (dlopen_error.empty()) dlopen_error = dlerror();
  }
  if (!handle) {
    load_error_ =
        "libOpenCL.so.1 not found (install an OpenCL ICD loader and a platform, e.g. Debian's "
        "ocl-icd-libopencl1 + pocl-opencl-icd)";
    // A library that is there but cannot be loaded (wrong architecture, damaged) needs a different fix.
    if (dlopen_error.find("No such file") == std::string::npos) load_error_ += "; dlopen said: " + dlopen_error;
    return;
  }
  std::string missing;
#define CONVTUNE_OPENCL_RESOLVE(fn)                                     \
  fn = reinterpret_cast<decltype(&::fn)>(dlsym(handle, #fn));           \
  if (!fn) missing += missing.empty() ? #fn : ", " #fn;
  CONVTUNE_OPENCL_FUNCTIONS(CONVTUNE_OPENCL_RESOLVE)
#undef CONVTUNE_OPENCL_RESOLVE
  if (!missing.empty()) {
    load_error_ = fmt::format("{} lacks {} (convtune needs an OpenCL 1.2 ICD loader)", library_name_, missing);
  }
}

const OpenCLLibrary& OpenCLLibrary::instance() {
  static const OpenCLLibrary library;
  return library;
}

}  // namespace convtune::opencl
