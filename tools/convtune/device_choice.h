// The one way a CLI command turns --backend/--device into a Device (bench, train, eval share it).
#pragma once

#include <string>
#include <string_view>

#include "convtune/backend.h"

namespace convtune::cli {

// True when convtune can run convolutions on the device: the CPU backend's C++ paths, or compiled kernels.
bool has_convolutions(const Device& device);

// "cpu", "opencl[:N]", "cuda[:N]" through Registry::find; "best": the best device present if it can run
// convtune's kernels, else the CPU backend, saying so on stderr with `command` as the prefix.
Device& choose_device(const std::string& spec, std::string_view command);

}  // namespace convtune::cli
