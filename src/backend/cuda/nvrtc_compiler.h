// CUDA C++ to cubin with NVRTC alone: needs no driver and no GPU, so it also runs on build machines.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace convtune::cuda {

// The options every convtune CUDA kernel is compiled with for `architecture` ("sm_90"). A real architecture
// makes NVRTC emit a cubin for exactly that GPU, so loading it needs no PTX JIT.
std::vector<std::string> cuda_compile_options(std::string_view architecture);

// cuda_compile_options plus -DNAME=value for each define and the source's own options: exactly what
// CudaDevice::build passes to NVRTC, so tests on machines without a GPU compile the same thing.
std::vector<std::string> cuda_program_options(std::string_view architecture, const std::map<std::string, std::string>& defines,
                                              const std::vector<std::string>& extra);

// Compiles `source_text` (named `program_name` in the log) with `options` (cuda_compile_options plus
// -DNAME=value and extras). Throws BackendError holding the options and NVRTC's log on failure, and when
// NVRTC cannot be loaded.
// With `log`, NVRTC's log of a successful compile lands there (ptxas's resource usage with --ptxas-options=-v).
std::vector<std::byte> compile_cuda_to_cubin(std::string_view source_text, const std::vector<std::string>& options,
                                             const std::string& program_name = "kernel.cu",
                                             std::string* log = nullptr);

}  // namespace convtune::cuda
