// cuModuleLoadData / cuModuleGetFunction with messages that say what to do about a failure.
#include "src/backend/cuda/cuda_module.h"

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::cuda {

CudaModule::CudaModule(std::shared_ptr<const CudaContext> context, const std::vector<std::byte>& cubin,
                       std::string description, const std::string& compiler)
    : context_(std::move(context)), description_(std::move(description)) {
  const CurrentContext current = context_->make_current();
  const DriverApi& api = context_->api();
  const CUresult result = api.cuModuleLoadData(&module_, cubin.data());
  if (result == CUDA_SUCCESS) return;
  std::string hint;
  if (result == CUDA_ERROR_INVALID_IMAGE || result == CUDA_ERROR_NO_BINARY_FOR_GPU ||
      result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || result == CUDA_ERROR_INVALID_SOURCE) {
    // The usual cause is a compiler newer than the driver: a cubin from NVRTC 13 needs a CUDA 13 driver.
    int driver = 0;
    api.cuDriverGetVersion(&driver);
    hint = fmt::format(" (the cubin comes from {}; the driver supports CUDA {}.{}: a compiler newer than the "
                       "driver produces cubins it cannot load)",
                       compiler, driver / 1000, driver % 1000 / 10);
  }
  api.check(result, "cuModuleLoadData", fmt::format("loading {} on {}{}", description_, context_->device_id(), hint));
}

CudaModule::~CudaModule() {
  // Nothing to report to from a destructor; at process exit the driver may already be gone.
  const CurrentContext current = context_->make_current_noexcept();
  context_->api().cuModuleUnload(module_);
}

CUfunction CudaModule::function(const std::string& name) const {
  const CurrentContext current = context_->make_current();
  CUfunction function = nullptr;
  const CUresult result = context_->api().cuModuleGetFunction(&function, module_, name.c_str());
  if (result == CUDA_ERROR_NOT_FOUND) {
    throw BackendError(fmt::format("kernel '{}' not found in {}: kernels must be declared extern \"C\" __global__ "
                                   "so that their names are not mangled",
                                   name, description_));
  }
  context_->api().check(result, "cuModuleGetFunction", fmt::format("kernel '{}' of {}", name, description_));
  return function;
}

}  // namespace convtune::cuda
