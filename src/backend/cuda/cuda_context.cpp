// Primary context retain/release and making it current.
#include "src/backend/cuda/cuda_context.h"

#include <fmt/format.h>

namespace convtune::cuda {

CudaContext::CudaContext(std::shared_ptr<const DriverApi> api, CUdevice device, std::string device_id)
    : api_(std::move(api)), device_(device), device_id_(std::move(device_id)) {
  // The primary context is the one the CUDA runtime and other libraries share, so convtune's buffers can be
  // handed to them; retaining it is what creates it on first use.
  api_->check(api_->cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain",
              fmt::format("creating the context of {}", device_id_));
}

CudaContext::~CudaContext() {
  // At process exit the driver may already be shut down; the release then fails harmlessly.
  api_->cuDevicePrimaryCtxRelease(device_);
}

CurrentContext CudaContext::make_current() const {
  CUcontext previous = nullptr;
  api_->check(api_->cuCtxGetCurrent(&previous), "cuCtxGetCurrent", fmt::format("selecting {}", device_id_));
  if (previous != context_) {
    api_->check(api_->cuCtxSetCurrent(context_), "cuCtxSetCurrent", fmt::format("selecting {}", device_id_));
  }
  return CurrentContext(*api_, previous, previous != context_);
}

CurrentContext CudaContext::make_current_noexcept() const noexcept {
  CUcontext previous = nullptr;
  if (api_->cuCtxGetCurrent(&previous) != CUDA_SUCCESS) return CurrentContext(*api_, nullptr, false);
  if (previous != context_) api_->cuCtxSetCurrent(context_);
  return CurrentContext(*api_, previous, previous != context_);
}

}  // namespace convtune::cuda
