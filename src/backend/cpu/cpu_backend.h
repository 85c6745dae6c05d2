// The CPU backend: host-memory buffers and a host-clock queue. It runs convtune's C++ paths, not kernels.
#pragma once

#include <memory>

#include "convtune/backend.h"

namespace convtune::cpu {

std::unique_ptr<Backend> make_cpu_backend();

// The host memory behind a buffer the CPU device allocated, so host code (the nn layers' CPU paths) works on it
// in place. Throws InvalidArgument when the buffer belongs to another backend.
std::byte* host_memory(Buffer& buffer);
// The caller's memory as a CPU-backend buffer, used in place and never freed.
std::unique_ptr<Buffer> wrap_host_memory(std::byte* memory, size_t bytes);
const std::byte* host_memory(const Buffer& buffer);

}  // namespace convtune::cpu
