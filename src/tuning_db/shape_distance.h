// Shape distance: how far a tuned problem is from the one asked for, and which tuned problems are close
// enough in kind for their parameters to carry over.
//
// Two problems are comparable when they have the same direction, precision, filter size (R, S), stride,
// dilation and groups class (dense: groups = 1; depthwise: groups = C; grouped: anything else). Padding is
// not compared: it changes the output size by a row or two, not the kind of kernel that suits the problem.
//
// Their distance is the sum over N, C, K, H and W of |log2(a / b)|, plus |log2(groups ratio)| for grouped
// problems: a factor of two in any one extent counts 1, so a problem with twice the batch and half the
// channels is at distance 2. Ratios, not differences, because going from 8 to 16 channels changes the best tiling
// as much as going from 256 to 512; logarithms also make halving and doubling equally far.
#pragma once

#include <string_view>

#include "convtune/conv_problem.h"

namespace convtune {

std::string_view groups_class(const ConvProblem& problem);  // "dense", "depthwise", "grouped"

bool comparable_shapes(const ConvProblem& a, const ConvProblem& b);

// Defined for any two problems; meaningful for comparable ones. 0 for equal extents.
double shape_distance(const ConvProblem& a, const ConvProblem& b);

// How far a tuned shape may be for its parameters to stand in for another's: 6, a factor of 64 over the five
// extents together. Measured on the H200 (docs/PERFORMANCE.md): eight layers at distances 0.4-4.6 from tuned
// AlexNet layers ran at 86-115% of their own tuned time on their neighbours' parameters; the seed layers at 9.8-14.6
// ran slower on AlexNet's parameters than on the built-in defaults in five of nine rows, up to 3.1x.
// Beyond this distance the built-in default, which is chosen from the problem's own shape, is used instead.
inline constexpr double kMaxNearestShapeDistance = 6;

}  // namespace convtune
