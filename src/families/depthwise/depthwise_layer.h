// Which layers the depthwise family computes, its per-direction halves, and the rule by which the other families
// leave true depthwise layers to it when a plan has no tuning data.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/extension/kernel_family.h"
#include "src/families/direction_variant.h"

namespace convtune::depthwise {

// One input channel per group: output channel k reads input channel k / (K / groups) alone.
inline bool one_channel_per_group(const ConvProblem& problem) { return problem.groups == problem.c; }

// The other families' untuned poor-fit rule for depthwise layers (more than one group): their kernels tile C/groups
// or K/groups, which are 1 (or the small multiplier) here, so they either idle most of each tile or re-read the
// input per tap. Empty when the problem is not such a layer.
inline std::string leave_to_depthwise(const ConvProblem& problem) {
  if (problem.groups == 1 || !one_channel_per_group(problem)) return {};
  return fmt::format("a depthwise layer (groups = C = {}, multiplier {}) is the depthwise family's", problem.c,
                     problem.k_per_group());
}

// Depthwise backward-data that direct_tiled's default computes faster than this family's on a GPU: stride 1, one
// output channel per group, images at least 28 columns wide. Measured on the H200
// (scripts/gpu/sweeps/depthwise_backward_data.txt): 28x28 at C=256 0.0267-0.0295 ms against the depthwise default's
// 0.0323-0.0337 (no depthwise shape tried under 0.0306), 56x56 at C=144 0.0851 against 0.0931, 112x112 at C=32
// 0.0426 against 0.0458; on 14x14 and 7x7 images the depthwise family won by 1.3-4.4x, and with stride 2 it ran
// within 3% of direct_tiled. On PoCL the depthwise family wins here too, so the rule is a GPU's alone.
inline bool direct_tiled_backward_data(const ConvProblem& problem, const DeviceInfo& device) {
  return device.is_gpu && problem.direction == Direction::BackwardData && problem.groups > 1 &&
         one_channel_per_group(problem) && problem.k == problem.c && problem.stride.h == 1 && problem.stride.w == 1 &&
         problem.dilation.h == 1 && problem.dilation.w == 1 && problem.w >= 28;
}

// One direction's parameters, constraints, default and launches.
using DepthwiseVariant = families::DirectionVariant;

// Forward (y tiles) or backward-data (dx tiles): work-items own a tile of the written tensor's rows and columns.
std::unique_ptr<DepthwiseVariant> make_spatial(const ConvProblem& problem);
// Backward-filter: a work-group per (channel, chunk of N*P*Q), partials summed in order.
std::unique_ptr<DepthwiseVariant> make_filter(const ConvProblem& problem);
// A backward-filter configuration tuned on another shape with its SPLIT recomputed for `problem` (the default's rule
// on the carried THREADS and TILE_Q): the split follows the reduction length and channel count, not the kernel.
Config carry_filter_split(const Config& tuned, const ConvProblem& problem, const DeviceInfo& device);

// True when every constraint holds for `config` (whose values must be candidates of `parameters`).
bool satisfies(const std::vector<Parameter>& parameters, const std::vector<Constraint>& constraints,
               const Config& config, const ConvProblem& problem, const DeviceInfo& device);

}  // namespace convtune::depthwise
