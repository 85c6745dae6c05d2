// Problem: what convtune computes, a convolution (in one of its three directions) or a matrix product, behind one
// type, so plans, the tuner, the tuning database, the checks and bench treat both alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "convtune/conv_problem.h"
#include "convtune/gemm_problem.h"

namespace convtune {

// One operand of a problem: a convolution's x, w, y (named after the forward pass whatever the direction), a
// GEMM's a, b, c.
struct OperandInfo {
  const char* name = "";
  int64_t elements = 0;
  bool read = false;     // its values are inputs
  bool written = false;  // the operation writes it (overwrites it, unless a GEMM accumulates)
};

class Problem {
 public:
  enum class Kind { Convolution, Gemm };
  static constexpr int kOperands = 3;

  Problem() = default;  // a 1x1 forward convolution of one element
  Problem(const ConvProblem& conv) : problem_(conv) {}  // NOLINT: a ConvProblem is a Problem
  Problem(const GemmProblem& gemm) : problem_(gemm) {}  // NOLINT: so is a GemmProblem

  Kind kind() const { return problem_.index() == 0 ? Kind::Convolution : Kind::Gemm; }
  bool is_conv() const { return kind() == Kind::Convolution; }
  bool is_gemm() const { return kind() == Kind::Gemm; }
  // Throw InvalidArgument saying what the problem is instead.
  const ConvProblem& conv() const;
  const GemmProblem& gemm() const;

  ElementType type() const;
  MathMode math() const;
  // The same problem in another math mode (bench and tune --math, a framework's allow-TF32 switch).
  Problem with_math(MathMode math) const;
  // The same problem with another element type and math mode (--math bf16: 16-bit tensors in fp32 math).
  Problem with_precision(Precision precision) const;
  void validate() const;
  double flops() const;
  double bytes() const;
  // "fwd", "bwd-data", "bwd-filter" or "gemm": the operation, for tables.
  std::string_view operation() const;

  // Operands 0, 1, 2 in the order Operands holds their buffers: x, w, y or a, b, c.
  OperandInfo operand(int index) const;
  int written_operand() const;
  int64_t written_elements() const { return operand(written_operand()).elements; }
  // Products summed into one output element: what rounding errors grow with.
  int64_t reduction_length() const;

  // A convolution's text (ConvProblem::to_string) or "gemm:" and the GEMM's text: parse_any_problem reads both.
  std::string to_string() const;

  friend bool operator==(const Problem& a, const Problem& b) { return a.problem_ == b.problem_; }
  friend bool operator!=(const Problem& a, const Problem& b) { return !(a == b); }

 private:
  std::variant<ConvProblem, GemmProblem> problem_;
};

// "gemm:M=..,N=..,K=.." (or text starting with "M=") is a GEMM, anything else a convolution (parse_problem).
Problem parse_any_problem(std::string_view text);

}  // namespace convtune
