// A device's retained primary context, shared by every object that must make it current (buffers, queues,
// modules), so whichever is destroyed last still finds the driver and the context alive.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "src/backend/cuda/cuda_driver_api.h"

namespace convtune::cuda {

// While it lives, a context is current on this thread; its destructor makes current again what was current before
// (another device's context, or none), so a caller such as PyTorch keeps its current device across convtune calls.
class CurrentContext {
 public:
  CurrentContext(const DriverApi& api, CUcontext previous, bool changed) : api_(&api), previous_(previous), changed_(changed) {}
  ~CurrentContext() {
    if (changed_) api_->cuCtxSetCurrent(previous_);  // restoring what was current cannot meaningfully fail
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;

 private:
  const DriverApi* api_;
  CUcontext previous_;
  bool changed_;
};

class CudaContext {
 public:
  // Retains the primary context of `device`; `device_id` ("cuda:0") names it in error messages.
  CudaContext(std::shared_ptr<const DriverApi> api, CUdevice device, std::string device_id);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // The driver keeps the current context per host thread, so every call path that touches this device makes
  // it current first (the caller's thread may have another device's context current, or none) and keeps the
  // returned guard for as long as it works on the device.
  [[nodiscard]] CurrentContext make_current() const;
  // For destructors, which must not throw: failures are ignored.
  [[nodiscard]] CurrentContext make_current_noexcept() const noexcept;

  const DriverApi& api() const { return *api_; }
  const std::string& device_id() const { return device_id_; }

 private:
  std::shared_ptr<const DriverApi> api_;
  CUdevice device_;
  CUcontext context_ = nullptr;
  std::string device_id_;
};

}  // namespace convtune::cuda
