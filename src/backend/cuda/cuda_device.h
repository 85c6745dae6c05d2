// One CUDA GPU: its properties, memory, queue and NVRTC-built programs.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "convtune/backend.h"
#include "src/backend/cuda/cuda_context.h"
#include "src/backend/cuda/cuda_driver_api.h"
#include "src/backend/cuda/cuda_kernel.h"
#include "src/backend/cuda/cuda_module.h"
#include "src/backend/cuda/cuda_queue.h"
#include "src/backend/cuda/nvrtc_api.h"

namespace convtune::cuda {

class CudaDevice final : public Device {
 public:
  // Reads the device's properties; the context, queue and modules are created on first use, so listing
  // devices costs no context creation. `nvrtc` null means kernels cannot be built, for `nvrtc_error`.
  CudaDevice(std::shared_ptr<const DriverApi> api, int ordinal, const NvrtcApi* nvrtc, const std::string& nvrtc_error);

  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override;
  Queue& queue() override;
  // NVRTC with cuda_compile_options(architecture), -DNAME=value per define, then source.options; the cubin
  // goes through the program cache, and a module already loaded on this device is reused.
  std::shared_ptr<Program> build(const ProgramSource& source) override;

  // The caller's stream and memory, used in place (convtune/interop.h).
  std::unique_ptr<Queue> wrap_stream(CUstream stream);
  std::unique_ptr<Buffer> wrap_memory(CUdeviceptr pointer, size_t bytes);

  // DeviceInfo::local_memory_bytes is the default per block; kernels may opt in to more, up to per_block_optin.
  SharedMemoryLimits shared_memory() const { return shared_memory_; }

 private:
  std::shared_ptr<const CudaContext> context();

  std::shared_ptr<const DriverApi> api_;
  CUdevice device_ = 0;
  const NvrtcApi* nvrtc_;
  DeviceInfo info_;
  SharedMemoryLimits shared_memory_;

  std::mutex mutex_;  // guards context_ and queue_
  std::shared_ptr<const CudaContext> context_;
  std::unique_ptr<CudaQueue> queue_;

  // Modules by program cache hash. Weak, so a tuner sweeping thousands of variants does not keep each one's
  // code resident; a rebuild of a released one reloads it from the program cache without compiling.
  std::mutex modules_mutex_;
  std::map<std::string, std::weak_ptr<const CudaModule>> modules_;
};

}  // namespace convtune::cuda
