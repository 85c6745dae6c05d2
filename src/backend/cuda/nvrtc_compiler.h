// CUDA C++ to cubin with NVRTC alone: needs no driver and no GPU, so it also runs on build machines.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace convtune::cuda {

// The options every convtune CUDA kernel is compiled with for `architecture` ("sm_90"). A real architecture
// makes NVRTC emit a cubin for exactly that GPU, so loading it needs no PTX JIT.
std::vector<std::string> cuda_compile_options(std::string_view architecture);

// Compiles `source_text` (named `program_name` in the log) with `options` (cuda_compile_options plus
// -DNAME=value and extras). Throws BackendError holding the options and NVRTC's log on failure, and when
// NVRTC cannot be loaded.
std::vector<std::byte> compile_cuda_to_cubin(std::string_view source_text, const std::vector<std::string>& options,
                                             const std::string& program_name = "kernel.cu");

}  // namespace convtune::cuda
