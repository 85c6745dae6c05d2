// Loading libcuda with dlopen and naming its errors.
#include "src/backend/cuda/cuda_driver_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::cuda {

namespace {

// Two levels so the argument is macro-expanded first: CONVTUNE_CUDA_SYMBOL(cuMemAlloc) is "cuMemAlloc_v2".
#define CONVTUNE_CUDA_SYMBOL_TEXT(name) #name
#define CONVTUNE_CUDA_SYMBOL(name) CONVTUNE_CUDA_SYMBOL_TEXT(name)

// Names for the errors that arrive before the driver can name them itself: the toolkit's stub library and a
// failed cuInit answer cuGetErrorName with an error too.
const char* builtin_error_name(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY (the CUDA toolkit's stub libcuda was loaded instead of a real driver)";
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER: return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)";
    case CUDA_ERROR_OPERATING_SYSTEM: return "CUDA_ERROR_OPERATING_SYSTEM";
    case CUDA_ERROR_SYSTEM_NOT_READY: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    default: return nullptr;
  }
}

}  // namespace

std::unique_ptr<DriverApi> DriverApi::load(const std::string& library, std::string& error) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const std::string reason = dlerror();
    // A missing file is the common case (no driver installed) and gets the short message; anything else
    // (a broken install, a wrong architecture) keeps the loader's own words.
    error = reason.find("No such file") != std::string::npos
                ? fmt::format("{} not found: no NVIDIA driver on this machine", library)
                : fmt::format("{} could not be loaded: {}", library, reason);
    return nullptr;
  }
  auto api = std::make_unique<DriverApi>();
  std::string missing;
  auto resolve = [&](const char* symbol, const char* base_name, bool older_name_ok) -> void* {
    void* address = dlsym(handle, symbol);
    if (!address && older_name_ok) address = dlsym(handle, base_name);
    return address;
  };
#define CONVTUNE_CUDA_RESOLVE(function, older_name_ok)                                                        \
  api->function = reinterpret_cast<decltype(api->function)>(                                                 \
      resolve(CONVTUNE_CUDA_SYMBOL(function), #function, older_name_ok));                                     \
  if (!api->function) missing += fmt::format(" {}", CONVTUNE_CUDA_SYMBOL(function));
  CONVTUNE_CUDA_REQUIRED_FUNCTIONS(CONVTUNE_CUDA_RESOLVE)
#undef CONVTUNE_CUDA_RESOLVE
#define CONVTUNE_CUDA_RESOLVE_OPTIONAL(function) \
  api->function = reinterpret_cast<decltype(api->function)>(dlsym(handle, CONVTUNE_CUDA_SYMBOL(function)));
  CONVTUNE_CUDA_OPTIONAL_FUNCTIONS(CONVTUNE_CUDA_RESOLVE_OPTIONAL)
#undef CONVTUNE_CUDA_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    error = fmt::format("{} lacks{}: the NVIDIA driver is too old for convtune (it needs CUDA 12 or later)",
                        library, missing);
    return nullptr;
  }
  return api;
}

std::string DriverApi::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName && cuGetErrorName(result, &name) == CUDA_SUCCESS && name) {
    if (cuGetErrorString && cuGetErrorString(result, &text) == CUDA_SUCCESS && text) {
      return fmt::format("{} ({})", name, text);
    }
    return name;
  }
  if (const char* builtin = builtin_error_name(result)) return builtin;
  return fmt::format("CUresult {}", static_cast<int>(result));
}

void DriverApi::check(CUresult result, std::string_view call, std::string_view context) const {
  if (result == CUDA_SUCCESS) return;
  throw BackendError(fmt::format("{} failed: {}{}{}", call, describe(result), context.empty() ? "" : ": ", context));
}

}  // namespace convtune::cuda
