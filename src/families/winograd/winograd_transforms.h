// Winograd's minimal filtering F(m, r) (Lavin and Gray): the transform matrices A^T (m x alpha), G (alpha x r) and
// B^T (alpha x alpha), alpha = m + r - 1, built from interpolation points and checked to compute correlation
// exactly, so Y = A^T [(G g) . (B^T d)] for one dimension and Y = A^T [(G g G^T) . (B^T d B)] A for two.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace convtune::winograd {

struct Transforms {
  int m = 0, r = 0, alpha = 0;
  std::vector<double> at;  // m x alpha, row-major
  std::vector<double> g;   // alpha x r
  std::vector<double> bt;  // alpha x alpha
  std::vector<double> points;  // the alpha - 1 finite interpolation points (the last is infinity)
};

// The points convtune uses for F(m, r): small integers and halves, which keep the transforms' entries small:
// {0, 1, -1} for alpha 4, {0, 1, -1, 2, -2} for 6, {0, 1, -1, 2, -2, 1/2, -1/2} for 8. Throws InvalidArgument for
// other sizes.
std::vector<double> default_points(int m, int r);

// A^T and G from the points (Vandermonde rows, G scaled by the Lagrange denominators), B^T solved so that the 1-D
// algorithm computes correlation exactly; throws Error when the points cannot (repeated points, say).
Transforms make_transforms(int m, int r, const std::vector<double>& points);

// The largest |1-D algorithm - direct correlation| / sum |g_k d_{i+k}| over random inputs, in double: 0 up to
// rounding for correct transforms.
double check_transforms(const Transforms& t, int trials = 64);

// The matrices as -D defines for the kernels: WG_AT, WG_G and WG_BT, each a row-major list of float literals.
void add_defines(const Transforms& t, std::map<std::string, std::string>& defines);

}  // namespace convtune::winograd
