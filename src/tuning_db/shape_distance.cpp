// Groups classes, comparability and the log-ratio distance between problem shapes.
#include "src/tuning_db/shape_distance.h"

#include <cmath>

namespace convtune {

std::string_view groups_class(const ConvProblem& p) {
  if (p.groups == 1) return "dense";
  if (p.groups == p.c) return "depthwise";
  return "grouped";
}

bool comparable_shapes(const ConvProblem& a, const ConvProblem& b) {
  return a.direction == b.direction && a.precision == b.precision && a.r == b.r && a.s == b.s &&
         a.stride == b.stride && a.dilation == b.dilation && groups_class(a) == groups_class(b);
}

double shape_distance(const ConvProblem& a, const ConvProblem& b) {
  auto log_ratio = [](int64_t x, int64_t y) { return std::abs(std::log2(double(x) / double(y))); };
  double d = log_ratio(a.n, b.n) + log_ratio(a.c, b.c) + log_ratio(a.k, b.k) + log_ratio(a.h, b.h) +
             log_ratio(a.w, b.w);
  if (groups_class(a) == "grouped" && groups_class(b) == "grouped") d += log_ratio(a.groups, b.groups);
  return d;
}

}  // namespace convtune
