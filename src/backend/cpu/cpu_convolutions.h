// Factories of the CPU convolution paths (internal to the CPU backend).
#pragma once

#include <memory>

#include "convtune/host_convolution.h"

namespace convtune::cpu {

std::unique_ptr<HostConvolution> make_reference_convolution();
// FP32 direct convolution on `threads` threads (1 = the sequential baseline).
std::unique_ptr<HostConvolution> make_direct_convolution(unsigned threads, std::string name);

}  // namespace convtune::cpu
