// Small dense linear algebra for the least-squares fits (the tuner's search model, the plans' cost model): tens of
// unknowns at most, so a Cholesky solve of the normal equations needs no library.
#pragma once

#include <cstddef>
#include <vector>

namespace convtune {

// Solves A x = b for symmetric positive definite A (row-major n x n) by Cholesky; A is overwritten and b becomes x.
// Returns false when A is not positive definite (too few or collinear points), so the caller can do without a fit.
bool solve_spd(std::vector<double>& a, std::vector<double>& b, size_t n);

}  // namespace convtune
