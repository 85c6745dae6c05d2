// One __global__ function of a loaded module, with the argument values of its next launch.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "src/backend/cuda/cuda_launch_dims.h"
#include "src/backend/cuda/cuda_module.h"

namespace convtune::cuda {

// What a block may use of the device's shared memory: `per_block` without asking, `per_block_optin` after
// raising the kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
struct SharedMemoryLimits {
  size_t per_block = 0;
  size_t per_block_optin = 0;
};

class CudaKernel final : public Kernel {
 public:
  // Throws BackendError when `module` has no kernel called `name`.
  CudaKernel(std::shared_ptr<const CudaModule> module, std::string name, SharedMemoryLimits limits);

  const std::string& name() const override { return name_; }
  // Buffers go in as their device address, scalars and RawArg as their bytes. When the driver reports the
  // kernel's signature (cuFuncGetParamInfo, CUDA 12.4+), an index past the last parameter or a value of the
  // wrong size throws BackendError here instead of corrupting the launch.
  void set_arg(int index, const KernelArg& value) override;

  // Checks a launch against this kernel's thread and shared-memory limits, raises its dynamic shared memory
  // limit when the launch needs more than the default, and returns the kernelParams array for cuLaunchKernel.
  // Throws BackendError when an argument was never set. The context must be current.
  void** prepare_launch(const CudaLaunchDims& dims, size_t dynamic_shared_bytes);

  CUfunction function() const { return function_; }
  const CudaContext& context() const { return *module_->context(); }

 private:
  std::shared_ptr<const CudaModule> module_;  // keeps function_ valid
  std::string name_;
  SharedMemoryLimits limits_;
  CUfunction function_ = nullptr;
  int max_threads_per_block_ = 0;  // lowered below the device's by register use or __launch_bounds__
  size_t static_shared_bytes_ = 0;
  std::optional<std::vector<size_t>> parameter_sizes_;  // empty optional: the driver cannot say
  std::vector<std::vector<std::byte>> arguments_;
  std::vector<bool> argument_set_;
  std::vector<void*> argument_pointers_;
};

}  // namespace convtune::cuda
