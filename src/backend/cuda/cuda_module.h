// A cubin loaded into a device's context (cuModuleLoadData), unloaded when its last program and kernel are gone.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/cuda/cuda_context.h"

namespace convtune::cuda {

class CudaModule {
 public:
  // `description` names the source ("test/axpy.cu -DTILE=4") in error messages; `compiler` ("NVRTC 13.0")
  // explains a cubin the driver cannot load.
  CudaModule(std::shared_ptr<const CudaContext> context, const std::vector<std::byte>& cubin,
             std::string description, const std::string& compiler);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  // The kernel `name`; throws BackendError when the module has none of that name.
  CUfunction function(const std::string& name) const;
  const std::shared_ptr<const CudaContext>& context() const { return context_; }
  const std::string& description() const { return description_; }

 private:
  std::shared_ptr<const CudaContext> context_;
  std::string description_;
  CUmodule module_ = nullptr;
};

}  // namespace convtune::cuda
