// Which device a command runs on: a device spec (cpu, opencl[:N], cuda[:N]) or "best".
#pragma once

#include <string>

#include "convtune/backend.h"

namespace convtune::cli {

// Whether convtune can run convolutions there: the CPU backend's paths, or a kernel device with families.
bool has_convolutions(const Device& device);

// "best": the best device present if convtune has convolution kernels for it, else the CPU backend (saying so on
// stderr, prefixed with `command`). Anything else: Registry::find, which names the known devices on a typo.
Device& choose_device(const std::string& spec, const std::string& command);

}  // namespace convtune::cli
