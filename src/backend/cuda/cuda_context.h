// A device's retained primary context, shared by every object that must make it current (buffers, queues,
// modules), so whichever is destroyed last still finds the driver and the context alive.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "src/backend/cuda/cuda_driver_api.h"

namespace convtune::cuda {

class CudaContext {
 public:
  // Retains the primary context of `device`; `device_id` ("cuda:0") names it in error messages.
  CudaContext(std::shared_ptr<const DriverApi> api, CUdevice device, std::string device_id);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // The driver keeps the current context per host thread, so every call path that touches this device makes
  // it current first: the caller's thread may have another device's context current, or none.
  void make_current() const;
  // For destructors, which must not throw: failures are ignored.
  void make_current_noexcept() const noexcept;

  const DriverApi& api() const { return *api_; }
  const std::string& device_id() const { return device_id_; }

 private:
  std::shared_ptr<const DriverApi> api_;
  CUdevice device_;
  CUcontext context_ = nullptr;
  std::string device_id_;
};

}  // namespace convtune::cuda
