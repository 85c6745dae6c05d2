// The CUDA backend: the driver API and NVRTC, both loaded at run time, so the binary starts without them.
#pragma once

#include <memory>
#include <string>

#include "convtune/backend.h"

namespace convtune::cuda {

// Loads libcuda.so.1 on first use; unavailable (with the reason) when it is missing or cuInit fails.
std::unique_ptr<Backend> make_cuda_backend();

// The same, loading the driver from `driver_library` instead: tests point it at the toolkit's stub libcuda.
// A process holds one libcuda: once one is loaded, dlopen answers "libcuda.so.1" with it.
std::unique_ptr<Backend> make_cuda_backend(std::string driver_library);

}  // namespace convtune::cuda
