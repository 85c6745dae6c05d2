// Problem: the operations common to convolutions and GEMMs (operands, sizes, text form).
#include "convtune/problem.h"

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune {

const ConvProblem& Problem::conv() const {
  if (const auto* c = std::get_if<ConvProblem>(&problem_)) return *c;
  throw InvalidArgument(fmt::format("expected a convolution, got the matrix product {}", to_string()));
}

const GemmProblem& Problem::gemm() const {
  if (const auto* g = std::get_if<GemmProblem>(&problem_)) return *g;
  throw InvalidArgument(fmt::format("expected a matrix product, got the convolution {}", to_string()));
}

ElementType Problem::type() const {
  return std::visit([](const auto& p) { return p.type; }, problem_);
}

MathMode Problem::math() const {
  return std::visit([](const auto& p) { return p.math; }, problem_);
}

Problem Problem::with_math(MathMode math) const {
  return std::visit(
      [math](auto p) -> Problem {
        p.math = math;
        return p;
      },
      problem_);
}

Problem Problem::with_precision(Precision precision) const {
  return std::visit(
      [precision](auto p) -> Problem {
        p.type = precision.type;
        p.math = precision.math;
        return p;
      },
      problem_);
}

void Problem::validate() const {
  std::visit([](const auto& p) { p.validate(); }, problem_);
}

double Problem::flops() const {
  return std::visit([](const auto& p) { return p.flops(); }, problem_);
}

double Problem::bytes() const {
  return std::visit([](const auto& p) { return p.bytes(); }, problem_);
}

std::string_view Problem::operation() const { return is_gemm() ? "gemm" : convtune::to_string(conv().direction); }

OperandInfo Problem::operand(int index) const {
  if (index < 0 || index >= kOperands)
    throw InvalidArgument(fmt::format("operand {} does not exist: expected 0, 1 or 2", index));
  if (const auto* g = std::get_if<GemmProblem>(&problem_)) {
    switch (index) {
      case 0: return {"a", g->a_elements(), true, false};
      case 1: return {"b", g->b_elements(), true, false};
      default: return {"c", g->c_elements(), g->accumulate, true};
    }
  }
  const ConvProblem& c = std::get<ConvProblem>(problem_);
  const int written = written_operand();
  switch (index) {
    case 0: return {"x", c.x_elements(), written != 0, written == 0};
    case 1: return {"w", c.w_elements(), written != 1, written == 1};
    default: return {"y", c.y_elements(), written != 2, written == 2};
  }
}

int Problem::written_operand() const {
  if (is_gemm()) return 2;
  switch (conv().direction) {
    case Direction::Forward: return 2;
    case Direction::BackwardData: return 0;
    case Direction::BackwardFilter: return 1;
  }
  return 2;
}

int64_t Problem::reduction_length() const {
  if (const auto* g = std::get_if<GemmProblem>(&problem_)) return g->k;
  const ConvProblem& pb = std::get<ConvProblem>(problem_);
  switch (pb.direction) {
    case Direction::Forward: return pb.c_per_group() * pb.r * pb.s;
    case Direction::BackwardData: return pb.k_per_group() * pb.r * pb.s;
    case Direction::BackwardFilter: return pb.n * pb.p() * pb.q();
  }
  return 1;
}

std::string Problem::to_string() const {
  if (const auto* g = std::get_if<GemmProblem>(&problem_)) return "gemm:" + g->to_string();
  return std::get<ConvProblem>(problem_).to_string();
}

Problem parse_any_problem(std::string_view text) {
  if (text.substr(0, 5) == "gemm:") return parse_gemm(text.substr(5));
  if (text.substr(0, 2) == "M=" || text.substr(0, 2) == "m=") return parse_gemm(text);
  return parse_problem(text);
}

}  // namespace convtune
