// Loading NVRTC with dlopen: first the loader's search path, then the default toolkit location.
#include "src/backend/cuda/nvrtc_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <memory>

namespace convtune::cuda {

namespace {

struct LoadResult {
  std::unique_ptr<NvrtcApi> api;
  std::string error;
};

LoadResult load_nvrtc() {
  // Newest first, so a machine with two toolkits compiles with the newer one; the bare .so (a development
  // symlink) last among the searched names. The /usr/local/cuda copies catch toolkits not in ld.so.conf.
  static const char* const kCandidates[] = {
      "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
      "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
      "/usr/local/cuda/lib64/libnvrtc.so",
  };
  LoadResult result;
  std::string tried;
  for (const char* candidate : kCandidates) {
    void* handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      tried += fmt::format("\n  {}", dlerror());
      continue;
    }
    auto api = std::make_unique<NvrtcApi>();
    api->library = candidate;
    std::string missing;
#define CONVTUNE_NVRTC_RESOLVE(function)                                                   \
  api->function = reinterpret_cast<decltype(api->function)>(dlsym(handle, #function)); \
  if (!api->function) missing += " " #function;
    CONVTUNE_NVRTC_FUNCTIONS(CONVTUNE_NVRTC_RESOLVE)
#undef CONVTUNE_NVRTC_RESOLVE
    if (!missing.empty()) {
      // An NVRTC older than nvrtcGetCUBIN (CUDA 11.1) cannot give convtune a cubin: try the next candidate.
      tried += fmt::format("\n  {} lacks{}", candidate, missing);
      dlclose(handle);
      continue;
    }
    if (api->nvrtcVersion(&api->major, &api->minor) != NVRTC_SUCCESS) {
      tried += fmt::format("\n  {}: nvrtcVersion failed", candidate);
      dlclose(handle);
      continue;
    }
    result.api = std::move(api);  // never closed: programs compile until the process ends
    return result;
  }
  result.error = fmt::format(
      "NVRTC (libnvrtc.so) not found, so CUDA kernels cannot be compiled: install the CUDA toolkit's NVRTC or add "
      "its lib64 directory to LD_LIBRARY_PATH. Tried:{}",
      tried);
  return result;
}

}  // namespace

std::string NvrtcApi::version() const { return fmt::format("NVRTC {}.{}", major, minor); }

const NvrtcApi* NvrtcApi::instance(std::string* error) {
  static const LoadResult loaded = load_nvrtc();  // thread-safe once, and a failure is not retried
  if (error) *error = loaded.error;
  return loaded.api.get();
}

}  // namespace convtune::cuda
