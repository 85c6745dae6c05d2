// Which layers the depthwise family computes, its per-direction halves, and the rule by which the other families
// leave true depthwise layers to it when a plan has no tuning data.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/kernel_family.h"
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
