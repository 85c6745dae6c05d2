// Cholesky solve of a small symmetric positive definite system (see linear_solve.h).
#include "src/core/linear_solve.h"

#include <cmath>

namespace convtune {

bool solve_spd(std::vector<double>& a, std::vector<double>& b, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    double diag = a[j * n + j];
    for (size_t k = 0; k < j; ++k) diag -= a[j * n + k] * a[j * n + k];
    if (!(diag > 0)) return false;
    const double l = std::sqrt(diag);
    a[j * n + j] = l;
    for (size_t i = j + 1; i < n; ++i) {
      double v = a[i * n + j];
      for (size_t k = 0; k < j; ++k) v -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = v / l;
    }
  }
  for (size_t i = 0; i < n; ++i) {  // L y = b
    double v = b[i];
    for (size_t k = 0; k < i; ++k) v -= a[i * n + k] * b[k];
    b[i] = v / a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {  // L^T x = y
    double v = b[i];
    for (size_t k = i + 1; k < n; ++k) v -= a[k * n + i] * b[k];
    b[i] = v / a[i * n + i];
  }
  return true;
}

}  // namespace convtune
