// The launch sequence the transform-domain families (winograd, winograd_tc, fft, fft_tc, fft_wgmma) share: the
// transforms into the workspace, the GEMM on it and the transform back, chunk by chunk of the batch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune::transform_steps {

// The family's GEMM step for the chunk starting at image `first` with `count` images.
using GemmStep = std::function<LaunchStep(const ArgSource& first, const ArgSource& count)>;

// gemm.cl's batched GEMM over the workspace (winograd, fft): U, V and M all live there.
GemmStep gemm_kernel_step(const LaunchGeometry& geometry);
// A tensor-core GEMM kernel whose only argument is the workspace (its layout comes in defines).
GemmStep workspace_gemm_step(const std::string& kernel, const LaunchGeometry& geometry);

// The GEMM's rows: the output channels of a group (forward, backward-filter: K/groups; backward-data: C/groups).
inline int64_t gemm_rows(const ConvProblem& pb) {
  return pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group();
}

// How the transform kernels of one family launch.
struct Transforms {
  // The kernels are <prefix>_filter_transform, _input_transform, _output_transform (forward, backward-data) and
  // _zero, _gradient_transform, _input_transform, _filter_output_transform (backward-filter).
  std::string prefix;
  int64_t tiles = 0;             // a chunk's tiles per channel
  int64_t tiles_per_group = 0;   // the tile transforms' work-groups take this many tiles...
  int64_t group_size = 0;        // ...on this many work-items; the filter transforms take a work-item per item
  int64_t filter_factor = 1;     // items of the forward filter transform per (output, input) channel pair
  int64_t zero_items = 0;        // backward-filter's zeroing of M before the chunks; 0: no zeroing launch
};

// The launches around the family's GEMM, chunk by chunk of `batch_chunk` images.
std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, int64_t batch_chunk,
                              const Transforms& transforms, const GemmStep& gemm);

}  // namespace convtune::transform_steps
