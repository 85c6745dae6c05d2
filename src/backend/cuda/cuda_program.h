// A built CUDA program: a loaded module whose kernels are looked up by name.
#pragma once

#include <memory>
#include <string>

#include "convtune/backend.h"
#include "src/backend/cuda/cuda_kernel.h"
#include "src/backend/cuda/cuda_module.h"

namespace convtune::cuda {

class CudaProgram final : public Program {
 public:
  CudaProgram(std::shared_ptr<const CudaModule> module, bool from_cache, SharedMemoryLimits limits)
      : module_(std::move(module)), from_cache_(from_cache), limits_(limits) {}

  // Throws BackendError when the module has no kernel `name` (a kernel must be extern "C" __global__).
  std::unique_ptr<Kernel> kernel(const std::string& name) override {
    return std::make_unique<CudaKernel>(module_, name, limits_);
  }
  bool from_cache() const override { return from_cache_; }

 private:
  std::shared_ptr<const CudaModule> module_;
  bool from_cache_;
  SharedMemoryLimits limits_;
};

}  // namespace convtune::cuda
