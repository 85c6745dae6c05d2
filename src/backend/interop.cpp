// Wrapping the caller's OpenCL queues and cl_mem, CUDA streams and device pointers, and host memory (interop.h).
#include "convtune/interop.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/program_cache.h"

#ifdef CONVTUNE_WITH_OPENCL
#include "src/backend/opencl/opencl_device.h"
#include "src/backend/opencl/opencl_loader.h"
#endif
#ifdef CONVTUNE_WITH_CUDA
#include "src/backend/cuda/cuda_buffer.h"
#include "src/backend/cuda/cuda_device.h"
#endif

namespace convtune {

std::unique_ptr<Device> wrap_opencl_queue(void* queue) {
#ifdef CONVTUNE_WITH_OPENCL
  if (!queue) throw InvalidArgument("wrap_opencl_queue: the cl_command_queue is null");
  if (!opencl::OpenCLLibrary::instance().loaded())
    throw BackendError("wrap_opencl_queue: " + opencl::OpenCLLibrary::instance().load_error());
  return std::make_unique<opencl::OpenCLDevice>(static_cast<cl_command_queue>(queue), ProgramCache::instance());
#else
  (void)queue;
  throw Unsupported("wrap_opencl_queue: convtune was built without its OpenCL backend");
#endif
}

std::unique_ptr<Buffer> wrap_opencl_buffer(Device& device, void* memory, size_t bytes) {
#ifdef CONVTUNE_WITH_OPENCL
  auto* cl_device = dynamic_cast<opencl::OpenCLDevice*>(&device);
  if (!cl_device) {
    throw InvalidArgument(fmt::format("wrap_opencl_buffer: {} is not an OpenCL device", device.info().id));
  }
  if (!memory) throw InvalidArgument("wrap_opencl_buffer: the cl_mem is null");
  return cl_device->wrap_memory(static_cast<cl_mem>(memory), bytes);
#else
  (void)device, (void)memory, (void)bytes;
  throw Unsupported("wrap_opencl_buffer: convtune was built without its OpenCL backend");
#endif
}

namespace {
#ifdef CONVTUNE_WITH_CUDA
cuda::CudaDevice& cuda_device(Device& device, const char* call) {
  auto* d = dynamic_cast<cuda::CudaDevice*>(&device);
  if (!d) throw InvalidArgument(fmt::format("{}: {} is not a CUDA device", call, device.info().id));
  return *d;
}
#endif
}  // namespace

std::unique_ptr<Queue> wrap_cuda_stream(Device& device, void* stream) {
#ifdef CONVTUNE_WITH_CUDA
  return cuda_device(device, "wrap_cuda_stream").wrap_stream(static_cast<CUstream>(stream));
#else
  (void)device, (void)stream;
  throw Unsupported("wrap_cuda_stream: convtune was built without its CUDA backend");
#endif
}

std::unique_ptr<Buffer> wrap_cuda_buffer(Device& device, uint64_t pointer, size_t bytes) {
#ifdef CONVTUNE_WITH_CUDA
  return cuda_device(device, "wrap_cuda_buffer").wrap_memory(static_cast<CUdeviceptr>(pointer), bytes);
#else
  (void)device, (void)pointer, (void)bytes;
  throw Unsupported("wrap_cuda_buffer: convtune was built without its CUDA backend");
#endif
}

std::unique_ptr<Buffer> buffer_view(Device& device, const Buffer& buffer, size_t offset, size_t bytes) {
  if (offset > buffer.bytes() || bytes > buffer.bytes() - offset) {
    throw InvalidArgument(fmt::format("buffer_view: bytes [{}, {}) pass the end of a buffer of {} bytes on {}", offset,
                                      offset + bytes, buffer.bytes(), device.info().id));
  }
  switch (device.info().backend) {
    case BackendKind::Cpu:
      return cpu::wrap_host_memory(const_cast<std::byte*>(cpu::host_memory(buffer)) + offset, bytes);
    case BackendKind::Cuda:
#ifdef CONVTUNE_WITH_CUDA
      return cuda_device(device, "buffer_view")
          .wrap_memory(cuda::as_cuda_buffer(buffer, "buffer_view").pointer() + offset, bytes);
#else
      break;
#endif
    case BackendKind::OpenCL: break;
  }
  throw Unsupported(fmt::format("buffer_view: {} has no views of its buffers (CPU and CUDA devices do)",
                                device.info().id));
}

std::unique_ptr<Buffer> wrap_host_buffer(Device& cpu_device, void* memory, size_t bytes) {
  if (cpu_device.info().backend != BackendKind::Cpu) {
    throw InvalidArgument(fmt::format("wrap_host_buffer: {} is not the CPU device", cpu_device.info().id));
  }
  if (!memory && bytes > 0) throw InvalidArgument("wrap_host_buffer: the memory is null");
  return cpu::wrap_host_memory(static_cast<std::byte*>(memory), bytes);
}

}  // namespace convtune
