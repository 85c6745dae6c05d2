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

}  // namespace convtune
