// Kernel source files: embedded at build time, or read from $CONVTUNE_KERNEL_DIR for kernel development.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace convtune {

// The text of a kernel file (path relative to src/kernels, e.g. "peak/fill.cl") with its `#include "..."`
// lines expanded (paths relative to src/kernels too), so OpenCL and NVRTC need no include path.
// Reads from $CONVTUNE_KERNEL_DIR when set, else from the copy embedded at build time.
// Throws Error naming the file and where it looked when it is missing.
std::string load_kernel_source(std::string_view file);

// Every embedded kernel file, sorted.
std::vector<std::string> embedded_kernel_files();

}  // namespace convtune
