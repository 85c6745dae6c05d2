// What the families that wrap another (widened, channels_last) share: the wrapped family's constraints on the problem
// it computes, and the device as it sees it, with the wrapper's staging copies taken off the workspace limit.
#pragma once

#include <cstdint>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune::families {

// `device` with `staging` bytes taken off its workspace limit (none left: 0).
DeviceInfo less_staging(const DeviceInfo& device, uint64_t staging);

// `inner`'s constraints on `twin` (the problem its kernels compute), each judged on the device less `staging`; each
// still reads only the parameters it names.
std::vector<Constraint> constraints_on_twin(const KernelFamily& inner, const Problem& twin, uint64_t staging);

}  // namespace convtune::families
