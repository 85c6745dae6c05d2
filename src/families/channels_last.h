// Channels-last (NHWC) convolutions for the families whose kernels read NCHW: the family's own kernels run on NCHW
// copies of the operands, between transposes (kernels/common/layout.cl, or a host function on the CPU backend), so
// every family computes both layouts and the families that read NHWC themselves (KernelFamily::computes_nhwc) save
// the copies. An operand whose two layouts coincide in memory (a 1x1 filter, one channel, one pixel) is not copied.
#pragma once

#include <memory>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune::families {

// Replaces every convolution family in `list` that does not compute NHWC itself by a wrapper of the same name that
// computes NCHW problems as the family does and NHWC problems on NCHW copies. Families holding references to the
// wrapped ones (the widened families) keep working: the wrapped objects do not move.
void add_channels_last_support(std::vector<std::unique_ptr<KernelFamily>>& list);

// The problem in NCHW (itself when it is NCHW or a GEMM): what a wrapped family's kernels compute.
Problem nchw_twin(const Problem& problem);

// The family a channels-last wrapper wraps; `family` itself when it is none.
const KernelFamily& without_channels_last(const KernelFamily& family);

}  // namespace convtune::families
