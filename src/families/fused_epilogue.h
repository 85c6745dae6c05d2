// Fused epilogues for every convolution family: the parts of a forward epilogue (bias, residual, ReLU and its clamp)
// a family's kernels do not fuse run as one elementwise pass over y after them (kernels/common/epilogue.cl, or a host
// function on the CPU backend), so any family computes a Conv + BatchNorm (folded into bias) + residual + ReLU block,
// and the families that fuse them (KernelFamily::fuses_residual) save the pass.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune::families {

// Wraps every convolution family in `list` that does not fuse residuals itself in a family of the same name that
// computes what the family computes, and forward problems with any epilogue but pooling through the pass above.
// Families holding references to the wrapped ones keep working: the wrapped objects do not move.
void add_fused_epilogue_support(std::vector<std::unique_ptr<KernelFamily>>& list);

// The family a fused-epilogue wrapper wraps; `family` itself when it is none.
const KernelFamily& without_fused_epilogue(const KernelFamily& family);

// The epilogue `family`'s own kernels run for `epilogue` on `problem` (the rest runs as the pass): all of it where the
// family fuses it, else the bias where its kernels add one, else none.
Epilogue fused_part(const KernelFamily& family, const Problem& problem, const Epilogue& epilogue,
                    const DeviceInfo& device);

// The epilogue's ReLU clamp as a kernel's float literal ("6.00000000f"), for the RELU_MAX define.
std::string relu_max_literal(const Epilogue& epilogue);

}  // namespace convtune::families
