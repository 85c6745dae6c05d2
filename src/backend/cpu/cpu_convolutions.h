// Factories of the CPU convolution paths (internal to the CPU backend).
#pragma once

#include <memory>
#include <optional>

#include "convtune/host_convolution.h"
#include "convtune/kernel_family.h"

namespace convtune::cpu {

std::unique_ptr<HostConvolution> make_reference_convolution();
// FP32 direct convolution on `threads` threads (1 = the sequential baseline).
std::unique_ptr<HostConvolution> make_direct_convolution(unsigned threads, std::string name);
// cpu_blocked's SIMD convolution with `config`, or each problem's default configuration.
std::unique_ptr<HostConvolution> make_blocked_convolution(std::optional<Config> config);

}  // namespace convtune::cpu
