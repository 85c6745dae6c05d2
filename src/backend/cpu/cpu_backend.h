// The CPU backend: host-memory buffers and a host-clock queue. It runs convtune's C++ paths, not kernels.
#pragma once

#include <memory>

#include "convtune/backend.h"

namespace convtune::cpu {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace convtune::cpu
