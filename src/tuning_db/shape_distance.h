// Shape distance: how far a tuned problem is from the one asked for, and which tuned problems are close
// enough in kind for their parameters to carry over.
//
// An entry's math mode serves a problem's when they are equal or the entry's is FP32: FP32 results are at least as
// accurate as tf32 and 3xtf32 ask (the FP32 families compute those modes with the same kernels), so an FP32 family's
// tuned parameters compete with the tensor-core families' under tf32. Never the other way: a tf32 entry does not
// serve an FP32 problem.
//
// Two convolutions are comparable when they have the same direction, element type and a serving math mode, filter size
// (R, S), stride, dilation and groups class (dense: groups = 1; depthwise: groups = C; grouped: anything else).
// Padding is not compared: it changes the output size by a row or two, not the kind of kernel that suits the
// problem. Two GEMMs are comparable when they have the same transpositions, type, math and accumulation, and are
// both batched or both not; their distance is the sum of |log2 ratio| over M, N, K and the batch.
//
// Their distance is the sum over N, C, K, H and W of |log2(a / b)|, plus |log2(groups ratio)| for grouped
// problems: a factor of two in any one extent counts 1, so a problem with twice the batch and half the
// channels is at distance 2. Ratios, not differences, because going from 8 to 16 channels changes the best tiling
// as much as going from 256 to 512; logarithms also make halving and doubling equally far.
#pragma once

#include <string_view>

#include "convtune/problem.h"
#include "convtune/tuning.h"

namespace convtune {

std::string_view groups_class(const ConvProblem& problem);  // "dense", "depthwise", "grouped"

bool math_serves(MathMode tuned, MathMode asked);
// The same problem apart from a math mode that serves (an exact match for the lookup).
bool same_shape(const Problem& tuned, const Problem& asked);
// `a` is the tuned problem, `b` the one asked for (the math rule is one-way).
bool comparable_shapes(const Problem& a, const Problem& b);

// Defined for any two problems of one kind; meaningful for comparable ones. 0 for equal extents.
double shape_distance(const Problem& a, const Problem& b);

// The farthest a tuned shape may be for its parameters to stand in: kMaxNearestShapeDistance (convtune/tuning.h).

}  // namespace convtune
