// The CUDA backend: loads the driver and NVRTC on first use and lists the GPUs.
#include "src/backend/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "convtune/error.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/backend/cuda/cuda_driver_api.h"
#include "src/backend/cuda/nvrtc_api.h"

namespace convtune::cuda {

namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::string driver_library) : driver_library_(std::move(driver_library)) {}

  BackendKind kind() const override { return BackendKind::Cuda; }
  std::string unavailable_reason() const override {
    load();
    return unavailable_reason_;
  }
  size_t device_count() const override {
    load();
    return devices_.size();
  }
  Device& device(size_t index) override {
    load();
    if (index >= devices_.size()) {
      throw InvalidArgument(fmt::format("cuda:{} does not exist: {} CUDA device(s){}", index, devices_.size(),
                                        unavailable_reason_.empty() ? "" : " (" + unavailable_reason_ + ")"));
    }
    return *devices_[index];
  }

 private:
  // Deferred to first use so that a process that never asks for CUDA never loads the driver.
  void load() const {
    std::lock_guard lock(mutex_);
    if (loaded_) return;
    loaded_ = true;
    try {
      discover();
    } catch (const Error& error) {
      devices_.clear();
      unavailable_reason_ = error.what();
    }
  }

  void discover() const {
    std::string error;
    std::shared_ptr<const DriverApi> api = DriverApi::load(driver_library_, error);
    if (!api) {
      unavailable_reason_ = error;
      return;
    }
    api->check(api->cuInit(0), "cuInit", fmt::format("{} is loaded but the driver cannot start", driver_library_));
    int count = 0;
    api->check(api->cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count == 0) {
      unavailable_reason_ = "no CUDA device: cuDeviceGetCount found none (check CUDA_VISIBLE_DEVICES)";
      return;
    }
    std::string nvrtc_error;
    const NvrtcApi* nvrtc = NvrtcApi::instance(&nvrtc_error);
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      devices_.push_back(std::make_unique<CudaDevice>(api, ordinal, nvrtc, nvrtc_error));
    }
  }

  std::string driver_library_;
  mutable std::mutex mutex_;
  mutable bool loaded_ = false;
  mutable std::string unavailable_reason_;
  mutable std::vector<std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return make_cuda_backend("libcuda.so.1"); }

std::unique_ptr<Backend> make_cuda_backend(std::string driver_library) {
  return std::make_unique<CudaBackend>(std::move(driver_library));
}

}  // namespace convtune::cuda
