// Kernel argument packing and per-launch checks for the CUDA backend.
#include "src/backend/cuda/cuda_kernel.h"

#include <fmt/format.h>

#include <cstring>
#include <iterator>
#include <type_traits>
#include <variant>

#include "convtune/error.h"
#include "src/backend/cuda/cuda_buffer.h"

namespace convtune::cuda {

namespace {

template <typename T>
std::vector<std::byte> bytes_of(const T& value) {
  std::vector<std::byte> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

const char* kind_of(const KernelArg& value) {
  constexpr const char* kNames[] = {"buffer address", "int32", "uint32", "int64", "uint64", "float", "raw value"};
  static_assert(std::variant_size_v<KernelArg> == std::size(kNames));
  return kNames[value.index()];
}

}  // namespace

CudaKernel::CudaKernel(std::shared_ptr<const CudaModule> module, std::string name, SharedMemoryLimits limits)
    : module_(std::move(module)), name_(std::move(name)), limits_(limits) {
  const CurrentContext current = context().make_current();  // the attribute queries act on this device
  function_ = module_->function(name_);
  const DriverApi& api = context().api();
  api.check(api.cuFuncGetAttribute(&max_threads_per_block_, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function_),
            "cuFuncGetAttribute", fmt::format("max threads per block of kernel {}", name_));
  int static_shared = 0;
  api.check(api.cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function_),
            "cuFuncGetAttribute", fmt::format("static shared memory of kernel {}", name_));
  static_shared_bytes_ = static_cast<size_t>(static_shared);

  if (api.cuFuncGetParamInfo) {
    std::vector<size_t> sizes;
    CUresult result = CUDA_SUCCESS;
    // The driver has no parameter count: it answers CUDA_ERROR_INVALID_VALUE one past the last parameter.
    // 4096 parameters cannot fit CUDA's 32 KiB parameter space, so the loop ends on a real kernel.
    for (size_t index = 0; index < 4096; ++index) {
      size_t offset = 0, size = 0;
      result = api.cuFuncGetParamInfo(function_, index, &offset, &size);
      if (result != CUDA_SUCCESS) break;
      sizes.push_back(size);
    }
    // No parameters found reads the same as "cannot tell" (a cubin without parameter info), so only a
    // non-empty list is trusted: a wrong empty list would reject every argument.
    if (result == CUDA_ERROR_INVALID_VALUE && !sizes.empty()) parameter_sizes_ = std::move(sizes);
  }
}

void CudaKernel::set_arg(int index, const KernelArg& value) {
  if (index < 0) throw BackendError(fmt::format("kernel {}: argument index {} is negative", name_, index));
  const size_t position = static_cast<size_t>(index);
  std::vector<std::byte> bytes = std::visit(
      [&](const auto& argument) -> std::vector<std::byte> {
        using T = std::decay_t<decltype(argument)>;
        if constexpr (std::is_same_v<T, const Buffer*>) {
          // A null buffer passes a null device pointer, as OpenCL allows for optional buffers.
          const CUdeviceptr address =
              argument ? as_cuda_buffer(*argument, fmt::format("argument {} of kernel {}", index, name_)).pointer()
                       : CUdeviceptr{0};
          return bytes_of(address);
        } else if constexpr (std::is_same_v<T, RawArg>) {
          return argument.bytes;
        } else {
          return bytes_of(argument);
        }
      },
      value);
  if (parameter_sizes_) {
    if (position >= parameter_sizes_->size()) {
      throw BackendError(fmt::format("kernel {} takes {} arguments; argument index {} does not exist", name_,
                                     parameter_sizes_->size(), index));
    }
    if ((*parameter_sizes_)[position] != bytes.size()) {
      throw BackendError(fmt::format("argument {} of kernel {} is {} bytes in the kernel's signature, but the value "
                                     "given ({}) is {} bytes",
                                     index, name_, (*parameter_sizes_)[position], kind_of(value), bytes.size()));
    }
  }
  if (position >= arguments_.size()) {
    arguments_.resize(position + 1);
    argument_set_.resize(position + 1, false);
  }
  arguments_[position] = std::move(bytes);
  argument_set_[position] = true;
}

void** CudaKernel::prepare_launch(const CudaLaunchDims& dims, size_t dynamic_shared_bytes) {
  const size_t count = parameter_sizes_ ? parameter_sizes_->size() : arguments_.size();
  argument_pointers_.assign(count, nullptr);
  for (size_t i = 0; i < count; ++i) {
    if (i >= argument_set_.size() || !argument_set_[i]) {
      throw BackendError(fmt::format("launch of {}: argument {} was never set", name_, i));
    }
    argument_pointers_[i] = arguments_[i].data();
  }

  if (dims.threads_per_block() > static_cast<size_t>(max_threads_per_block_)) {
    throw BackendError(fmt::format("launch of {}: {}x{}x{} = {} threads per block, but this kernel runs at most {} "
                                   "(its register use or __launch_bounds__ limits it)",
                                   name_, dims.block[0], dims.block[1], dims.block[2], dims.threads_per_block(),
                                   max_threads_per_block_));
  }
  const size_t shared_bytes = static_shared_bytes_ + dynamic_shared_bytes;
  if (shared_bytes > limits_.per_block_optin) {
    throw BackendError(fmt::format("launch of {}: {} bytes of static plus {} of dynamic shared memory exceed the {} "
                                   "bytes a block may use on {}",
                                   name_, static_shared_bytes_, dynamic_shared_bytes, limits_.per_block_optin,
                                   context().device_id()));
  }
  if (shared_bytes > limits_.per_block) {
    // Beyond the default (48 KiB) a kernel must opt in. Set on every such launch, not cached: another Kernel
    // object of the same function may have set a smaller limit since.
    const DriverApi& api = context().api();
    const CurrentContext current = context().make_current();
    api.check(api.cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     static_cast<int>(dynamic_shared_bytes)),
              "cuFuncSetAttribute",
              fmt::format("allowing kernel {} {} bytes of dynamic shared memory", name_, dynamic_shared_bytes));
  }
  return argument_pointers_.data();
}

}  // namespace convtune::cuda
