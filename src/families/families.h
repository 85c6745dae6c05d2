// Factories of the kernel families (each in its own folder under src/families, sources under src/kernels).
#pragma once

#include <memory>

#include "convtune/kernel_family.h"

namespace convtune::families {

std::unique_ptr<KernelFamily> make_implicit_gemm();  // seed 004's local-memory kernel, all three directions
std::unique_ptr<KernelFamily> make_direct_tiled();   // seed 000's tiled kernel with fused bias/ReLU/max-pool
std::unique_ptr<KernelFamily> make_im2col_gemm();    // seed 003's unroll + GEMM, col2im for backward-data

}  // namespace convtune::families
