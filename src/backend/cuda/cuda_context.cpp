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

void CudaContext::make_current() const {
  api_->check(api_->cuCtxSetCurrent(context_), "cuCtxSetCurrent", fmt::format("selecting {}", device_id_));
}

void CudaContext::make_current_noexcept() const noexcept { api_->cuCtxSetCurrent(context_); }

}  // namespace convtune::cuda
