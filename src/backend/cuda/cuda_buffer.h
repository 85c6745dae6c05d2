// Device memory on a CUDA device: one cuMemAlloc allocation, freed on destruction.
#pragma once

#include <cuda.h>

#include <memory>
#include <string_view>

#include "convtune/backend.h"
#include "src/backend/cuda/cuda_context.h"

namespace convtune::cuda {

class CudaBuffer final : public Buffer {
 public:
  // Allocates `bytes`; throws BackendError naming the request and the device's free and total memory.
  CudaBuffer(std::shared_ptr<const CudaContext> context, size_t bytes);
  // Device memory the caller allocated (PyTorch's, say): used in place, never freed by this object.
  CudaBuffer(std::shared_ptr<const CudaContext> context, CUdeviceptr foreign, size_t bytes);
  ~CudaBuffer() override;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  size_t bytes() const override { return bytes_; }
  CUdeviceptr pointer() const { return pointer_; }
  const CudaContext& context() const { return *context_; }

 private:
  std::shared_ptr<const CudaContext> context_;
  size_t bytes_;
  CUdeviceptr pointer_ = 0;
  bool owned_ = true;
};

// The CudaBuffer behind `buffer`; throws BackendError naming `use` when it belongs to another backend.
const CudaBuffer& as_cuda_buffer(const Buffer& buffer, std::string_view use);

}  // namespace convtune::cuda
