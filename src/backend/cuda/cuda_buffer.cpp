// cuMemAlloc / cuMemFree, with an out-of-memory message that says how much was free.
#include "src/backend/cuda/cuda_buffer.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "src/core/resources.h"

namespace convtune::cuda {

CudaBuffer::CudaBuffer(std::shared_ptr<const CudaContext> context, size_t bytes)
    : context_(std::move(context)), bytes_(bytes) {
  const CurrentContext current = context_->make_current();
  const DriverApi& api = context_->api();
  // Large requests are compared with the free device memory first, so the refusal names both figures even where
  // a failed cuMemAlloc would leave the context unusable or another process frees memory in between.
  size_t free_before = 0, total_before = 0;
  if (bytes >= kHostMemoryCheckThreshold && api.cuMemGetInfo(&free_before, &total_before) == CUDA_SUCCESS &&
      bytes > free_before) {
    // A BackendError like a failed cuMemAlloc (callers and the Python package treat device memory as the backend's).
    throw BackendError(fmt::format("cannot allocate {} bytes ({}) on {}: {} of {} device memory is free "
                                   "(cuMemGetInfo, checked before cuMemAlloc)",
                                   bytes, format_bytes(bytes), context_->device_id(), format_bytes(free_before),
                                   format_bytes(total_before)));
  }
  // cuMemAlloc rejects zero bytes; a one-byte allocation keeps empty tensors legal with a real address.
  const CUresult result = api.cuMemAlloc(&pointer_, bytes == 0 ? 1 : bytes);
  if (result == CUDA_SUCCESS) return;
  size_t free_bytes = 0, total_bytes = 0;
  const std::string memory = api.cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS
                                 ? fmt::format("{} bytes ({} MiB) free of {} bytes ({} MiB)", free_bytes,
                                               free_bytes >> 20, total_bytes, total_bytes >> 20)
                                 : std::string("free memory unknown: cuMemGetInfo failed too");
  throw BackendError(fmt::format("cuMemAlloc failed: {}: cannot allocate {} bytes ({} MiB) on {}: {}",
                                 api.describe(result), bytes, bytes >> 20, context_->device_id(), memory));
}

CudaBuffer::CudaBuffer(std::shared_ptr<const CudaContext> context, CUdeviceptr foreign, size_t bytes)
    : context_(std::move(context)), bytes_(bytes), pointer_(foreign), owned_(false) {
  if (foreign == 0) throw InvalidArgument(fmt::format("wrapping a null device pointer as a buffer of {}", context_->device_id()));
}

CudaBuffer::~CudaBuffer() {
  if (!owned_) return;
  // Destructors cannot report; a failure here (the driver shut down at exit, or the context broken by an
  // earlier kernel fault that was already reported) leaves nothing for the caller to do.
  const CurrentContext current = context_->make_current_noexcept();
  context_->api().cuMemFree(pointer_);
}

const CudaBuffer& as_cuda_buffer(const Buffer& buffer, std::string_view use) {
  const auto* cuda_buffer = dynamic_cast<const CudaBuffer*>(&buffer);
  if (!cuda_buffer) {
    throw BackendError(fmt::format("{}: the buffer was not allocated by a CUDA device", use));
  }
  return *cuda_buffer;
}

}  // namespace convtune::cuda
