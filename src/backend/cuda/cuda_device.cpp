// CUDA device properties, lazy context and queue, and program builds through NVRTC and the program cache.
#include "src/backend/cuda/cuda_device.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "src/backend/cuda/cuda_buffer.h"
#include "src/backend/cuda/cuda_program.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "src/backend/kernel_sources.h"
#include "src/backend/program_cache.h"

namespace convtune::cuda {

CudaDevice::CudaDevice(std::shared_ptr<const DriverApi> api, int ordinal, const NvrtcApi* nvrtc,
                       const std::string& nvrtc_error)
    : api_(std::move(api)), nvrtc_(nvrtc) {
  const std::string id = fmt::format("cuda:{}", ordinal);
  api_->check(api_->cuDeviceGet(&device_, ordinal), "cuDeviceGet", id);
  auto attribute = [&](CUdevice_attribute which, const char* what) {
    int value = 0;
    api_->check(api_->cuDeviceGetAttribute(&value, which, device_), "cuDeviceGetAttribute",
                fmt::format("{} of {}", what, id));
    return value;
  };
  char name[256] = {};
  api_->check(api_->cuDeviceGetName(name, sizeof(name), device_), "cuDeviceGetName", id);
  int driver = 0;
  api_->check(api_->cuDriverGetVersion(&driver), "cuDriverGetVersion", id);
  size_t total_memory = 0;
  api_->check(api_->cuDeviceTotalMem(&total_memory, device_), "cuDeviceTotalMem", id);

  info_.backend = BackendKind::Cuda;
  info_.index = ordinal;
  info_.id = id;
  info_.name = name;
  info_.vendor = "NVIDIA";
  info_.driver_version = fmt::format("{}.{}", driver / 1000, driver % 1000 / 10);  // 13000 -> 13.0
  info_.compiler = nvrtc_ ? nvrtc_->version() : "NVRTC not found";
  info_.architecture =
      fmt::format("sm_{}{}", attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability"),
                  attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability"));
  info_.is_gpu = true;
  info_.compute_units = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  info_.clock_mhz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate") / 1000;  // reported in kHz
  info_.global_memory_bytes = total_memory;
  shared_memory_.per_block = static_cast<size_t>(
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block"));
  shared_memory_.per_block_optin = static_cast<size_t>(
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory per block"));
  // The default limit is what a kernel's static __shared__ arrays (the OpenCL __local equivalent) may use.
  info_.local_memory_bytes = shared_memory_.per_block;
  info_.max_work_group_size =
      static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"));
  info_.can_run_kernels = nvrtc_ != nullptr;
  if (!nvrtc_) info_.cannot_run_reason = nvrtc_error;
}

std::shared_ptr<const CudaContext> CudaDevice::context() {
  std::lock_guard lock(mutex_);
  if (!context_) context_ = std::make_shared<const CudaContext>(api_, device_, info_.id);
  return context_;
}

std::unique_ptr<Buffer> CudaDevice::allocate(size_t bytes) { return std::make_unique<CudaBuffer>(context(), bytes); }

std::unique_ptr<Queue> CudaDevice::wrap_stream(CUstream stream) { return std::make_unique<CudaQueue>(context(), stream); }

std::unique_ptr<Buffer> CudaDevice::wrap_memory(CUdeviceptr pointer, size_t bytes) {
  return std::make_unique<CudaBuffer>(context(), pointer, bytes);
}

Queue& CudaDevice::queue() {
  auto shared_context = context();
  std::lock_guard lock(mutex_);
  if (!queue_) queue_ = std::make_unique<CudaQueue>(std::move(shared_context));
  return *queue_;
}

std::shared_ptr<Program> CudaDevice::build(const ProgramSource& source) {
  if (!nvrtc_) {
    throw BackendError(fmt::format("cannot build {} on {}: {}", source.file, info_.id, info_.cannot_run_reason));
  }
  const std::string text = load_kernel_source(source.file);
  std::vector<std::string> options = cuda_compile_options(info_.architecture);
  options.insert(options.end(), source.options.begin(), source.options.end());
  const ProgramCacheKey key{info_.fingerprint(), nvrtc_->version(), text, source.defines, options};
  const std::string hash = key.hash();
  const auto shared_context = context();

  {
    std::lock_guard lock(modules_mutex_);
    if (auto it = modules_.find(hash); it != modules_.end()) {
      if (auto module = it->second.lock()) return std::make_shared<CudaProgram>(module, true, shared_memory_);
    }
  }

  std::string description = source.file;
  const std::vector<std::string> compile_options =
      cuda_program_options(info_.architecture, source.defines, source.options);
  for (const auto& [name, value] : source.defines) description += fmt::format(" -D{}={}", name, value);

  // Compiled without holding modules_mutex_, so threads building different variants compile in parallel.
  bool from_cache = false;
  const std::vector<std::byte> cubin = ProgramCache::instance().get_or_build(
      key,
      [&] {
        try {
          return compile_cuda_to_cubin(text, compile_options, source.file);
        } catch (const BackendError& error) {
          throw BackendError(
              fmt::format("cannot build {} for {} ({}): {}", description, info_.id, info_.architecture, error.what()));
        }
      },
      &from_cache);
  auto module = std::make_shared<const CudaModule>(shared_context, cubin, description, nvrtc_->version());

  std::lock_guard lock(modules_mutex_);
  std::erase_if(modules_, [](const auto& entry) { return entry.second.expired(); });
  auto& slot = modules_[hash];
  if (auto loaded = slot.lock()) {
    module = loaded;  // another thread loaded the same program meanwhile: share one module
  } else {
    slot = module;
  }
  return std::make_shared<CudaProgram>(std::move(module), from_cache, shared_memory_);
}

}  // namespace convtune::cuda
