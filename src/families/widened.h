// Widened families: 16-bit (bf16, fp16) tensors computed by a family that computes FP32 tensors. A plan converts the
// inputs into FP32 staging copies (exactly: every 16-bit value is an FP32 value), runs the FP32 family on the FP32
// twin of the problem, and rounds the output to the 16-bit type (to nearest even), as cuDNN runs its bf16 FFT and
// Winograd algorithms with FP32 transforms. So every device computes 16-bit tensors, not only NVIDIA's tensor cores,
// and where tensor cores exist the FP32 families' algorithms (FFT, Winograd, direct) compete with the 16-bit kernels
// layer by layer, through the same tuner and tuning database (entries name widened_<family>).
#pragma once

#include <memory>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune::families {

// Appends widened_<name> for every family in `list` that computes FP32 tensors only (kWidenedFamilies in
// widened.cpp names them and the math mode their FP32 twin runs in).
void add_widened_families(std::vector<std::unique_ptr<KernelFamily>>& list);

// True for a widened family (it computes 16-bit tensors only, through another family's kernels).
bool is_widened(const KernelFamily& family);

}  // namespace convtune::families
