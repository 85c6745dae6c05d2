// Element-wise access to the reference convolution: one output element at a time in float64, so full-size
// layers can be checked at sampled positions without running the whole reference.
#pragma once

#include <cstdint>

#include "convtune/conv_problem.h"
#include "convtune/host_convolution.h"

namespace convtune::cpu {

// The reference value of element `index` (NCHW / KCRS flat index) of the operand problem.direction writes,
// computed from the operands it reads.
double reference_element(const ConvProblem& problem, const ConvOperands& operands, int64_t index);

// The operand the direction writes (ConvProblem::written_elements() counts it).
float* written_operand(const ConvProblem& problem, const ConvOperands& operands);

}  // namespace convtune::cpu
