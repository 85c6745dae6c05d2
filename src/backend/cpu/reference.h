// The float64 reference every implementation in convtune is checked against: one output element at a time, for
// convolutions (all three directions, every ConvProblem field) and GEMMs, so full-size problems can be checked at
// sampled positions and small ones in full.
#pragma once

#include <array>
#include <cstdint>

#include "convtune/problem.h"

namespace convtune::cpu {

// Host arrays of a problem's operands, in Problem::operand order (x, w, y or a, b, c).
struct HostOperands {
  std::array<float*, Problem::kOperands> data{};
  float* operator[](int index) const { return data[static_cast<size_t>(index)]; }
};

// Output elements of the written operand in logical order (a GEMM's C with padded rows has fewer than its buffer
// holds), and where element `i` of that order lives in the operand's memory.
int64_t output_count(const Problem& problem);
int64_t output_offset(const Problem& problem, int64_t i);

// The reference value of logical output element `i`, from the operands the problem reads (a GEMM that accumulates
// reads C's old value at that element too).
double reference_element(const Problem& problem, const HostOperands& operands, int64_t i);

// The whole written operand in float64 accumulation, stored as float, spread over the host's threads.
void compute_reference(const Problem& problem, const HostOperands& operands);

}  // namespace convtune::cpu
