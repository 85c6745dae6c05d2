// Interop: convtune on the queues, streams and device memory a program already has, without copies. A framework's
// tensors become convtune operands in place, and convtune's launches go into the framework's own stream or queue,
// in order with its work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "convtune/backend.h"

namespace convtune {

// OpenCL: a convtune device on the caller's cl_command_queue (and its context and device, all retained): programs
// are built in that context, every command goes to that queue. Pass the cl_command_queue as a pointer.
std::unique_ptr<Device> wrap_opencl_queue(void* cl_command_queue);
// A cl_mem of that device's context as a convtune buffer (retained, never copied); bytes 0: its whole size.
// Throws InvalidArgument when the cl_mem belongs to another context or is smaller than `bytes`.
std::unique_ptr<Buffer> wrap_opencl_buffer(Device& device, void* cl_mem, size_t bytes = 0);

// CUDA: convtune's CUDA devices use the primary context, the one the CUDA runtime and PyTorch use. A queue on the
// caller's CUstream / cudaStream_t (not owned, never synchronised or destroyed by convtune) to run plans on...
std::unique_ptr<Queue> wrap_cuda_stream(Device& device, void* stream);
// ...and device memory the caller allocated (a CUdeviceptr / the pointer cudaMalloc gave), used in place. The
// pointer must be 16-byte aligned, as cudaMalloc's are: several families copy 16 bytes at a time (float4 loads,
// 16-byte cp.async), and a view at an odd element offset would fault there (the Python package copies such views).
std::unique_ptr<Buffer> wrap_cuda_buffer(Device& device, uint64_t device_pointer, size_t bytes);

// A range of `buffer` (a buffer of `device`) as a buffer of its own, the same memory, never freed by the view: on the
// CPU and CUDA devices (plans carve their staging copies from a caller's workspace this way). Throws Unsupported on
// OpenCL devices and InvalidArgument when the range passes the buffer's end.
std::unique_ptr<Buffer> buffer_view(Device& device, const Buffer& buffer, size_t offset, size_t bytes);

// Host memory as a buffer of the CPU device (convtune's CPU families work on it in place; the memory must outlive
// the buffer and hold `bytes`).
std::unique_ptr<Buffer> wrap_host_buffer(Device& cpu_device, void* memory, size_t bytes);

}  // namespace convtune
