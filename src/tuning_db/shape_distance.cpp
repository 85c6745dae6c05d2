// Groups classes, comparability and the log-ratio distance between problem shapes.
#include "src/tuning_db/shape_distance.h"

#include <cmath>

namespace convtune {

std::string_view groups_class(const ConvProblem& p) {
  if (p.groups == 1) return "dense";
  if (p.groups == p.c) return "depthwise";
  return "grouped";
}

namespace {

double log_ratio(int64_t x, int64_t y) { return std::abs(std::log2(double(x) / double(y))); }

}  // namespace

bool math_serves(MathMode tuned, MathMode asked) { return tuned == asked || tuned == MathMode::FP32; }

bool same_shape(const Problem& tuned, const Problem& asked) {
  return math_serves(tuned.math(), asked.math()) && tuned.with_math(asked.math()) == asked;
}

bool comparable_shapes(const Problem& pa, const Problem& pb) {
  if (pa.kind() != pb.kind() || pa.type() != pb.type() || !math_serves(pa.math(), pb.math())) return false;
  if (pa.is_gemm()) {
    const GemmProblem &a = pa.gemm(), &b = pb.gemm();
    return a.trans_a == b.trans_a && a.trans_b == b.trans_b && a.accumulate == b.accumulate &&
           (a.batch > 1) == (b.batch > 1);
  }
  const ConvProblem &a = pa.conv(), &b = pb.conv();
  return a.direction == b.direction && a.r == b.r && a.s == b.s && a.stride == b.stride && a.dilation == b.dilation &&
         groups_class(a) == groups_class(b);
}

double shape_distance(const Problem& pa, const Problem& pb) {
  if (pa.is_gemm() && pb.is_gemm()) {
    const GemmProblem &a = pa.gemm(), &b = pb.gemm();
    return log_ratio(a.m, b.m) + log_ratio(a.n, b.n) + log_ratio(a.k, b.k) + log_ratio(a.batch, b.batch);
  }
  const ConvProblem &a = pa.conv(), &b = pb.conv();
  double d = log_ratio(a.n, b.n) + log_ratio(a.c, b.c) + log_ratio(a.k, b.k) + log_ratio(a.h, b.h) +
             log_ratio(a.w, b.w);
  // Another layout is further than a neighbour's shape in this one (a factor of two in one extent): the same tiles
  // fit, but the copies around them differ.
  if (a.layout != b.layout) d += 1;
  if (groups_class(a) == "grouped" && groups_class(b) == "grouped") d += log_ratio(a.groups, b.groups);
  return d;
}

}  // namespace convtune
