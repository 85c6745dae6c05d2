// Building and checking Winograd F(m, r) transforms from interpolation points (see winograd_transforms.h).
#include "src/families/winograd/winograd_transforms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "convtune/error.h"

namespace convtune::winograd {

std::vector<double> default_points(int m, int r) {
  switch (m + r - 1) {
    case 4: return {0, 1, -1};
    case 6: return {0, 1, -1, 2, -2};
    case 8: return {0, 1, -1, 2, -2, 0.5, -0.5};
    default:
      throw InvalidArgument(fmt::format("Winograd F({}, {}) has alpha {}: convtune builds alpha 4, 6 and 8", m, r, m + r - 1));
  }
}

namespace {

// Solves the square system a x = b (n x n, row-major) by Gaussian elimination with partial pivoting.
std::vector<double> solve(std::vector<double> a, std::vector<double> b, int n) {
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int row = col + 1; row < n; ++row)
      if (std::abs(a[row * n + col]) > std::abs(a[pivot * n + col])) pivot = row;
    if (std::abs(a[pivot * n + col]) < 1e-12) throw Error("Winograd transform: singular system (repeated points?)");
    for (int k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
    std::swap(b[col], b[pivot]);
    for (int row = 0; row < n; ++row) {
      if (row == col) continue;
      const double f = a[row * n + col] / a[col * n + col];
      for (int k = col; k < n; ++k) a[row * n + k] -= f * a[col * n + k];
      b[row] -= f * b[col];
    }
  }
  std::vector<double> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] / a[i * n + i];
  return x;
}

}  // namespace

Transforms make_transforms(int m, int r, const std::vector<double>& points) {
  Transforms t;
  t.m = m, t.r = r, t.alpha = m + r - 1;
  const int alpha = t.alpha;
  if (static_cast<int>(points.size()) != alpha - 1) {
    throw InvalidArgument(fmt::format("Winograd F({}, {}) needs {} finite points, got {}", m, r, alpha - 1, points.size()));
  }
  for (size_t i = 0; i < points.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (points[i] == points[j])
        throw InvalidArgument(fmt::format("Winograd F({}, {}): interpolation point {} is repeated", m, r, points[i]));
  t.points = points;
  // A^T: row i holds p_j^i (the output polynomial's coefficients evaluated at each point), and the point at
  // infinity contributes only to the highest coefficient.
  t.at.assign(static_cast<size_t>(m * alpha), 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < alpha - 1; ++j) t.at[static_cast<size_t>(i * alpha + j)] = std::pow(points[static_cast<size_t>(j)], i);
    t.at[static_cast<size_t>(i * alpha + alpha - 1)] = i == m - 1 ? 1.0 : 0.0;
  }
  // G: the filter polynomial evaluated at each point, divided by the Lagrange denominator prod_{l != j}(p_j - p_l);
  // at infinity, the filter's highest coefficient.
  t.g.assign(static_cast<size_t>(alpha * r), 0.0);
  for (int j = 0; j < alpha - 1; ++j) {
    double denominator = 1;
    for (int l = 0; l < alpha - 1; ++l)
      if (l != j) denominator *= points[static_cast<size_t>(j)] - points[static_cast<size_t>(l)];
    for (int k = 0; k < r; ++k) t.g[static_cast<size_t>(j * r + k)] = std::pow(points[static_cast<size_t>(j)], k) / denominator;
  }
  t.g[static_cast<size_t>((alpha - 1) * r + r - 1)] = 1.0;
  // B^T: for each input position u, the column B^T[:, u] makes sum_j A^T[i][j] G[j][k] B^T[j][u] = [u == i + k] for
  // every output i and filter tap k: m*r equations in alpha unknowns, consistent for valid points (least squares
  // through the normal equations, then checked).
  t.bt.assign(static_cast<size_t>(alpha * alpha), 0.0);
  for (int u = 0; u < alpha; ++u) {
    std::vector<double> normal(static_cast<size_t>(alpha * alpha), 0.0), rhs(static_cast<size_t>(alpha), 0.0);
    for (int i = 0; i < m; ++i) {
      for (int k = 0; k < r; ++k) {
        std::vector<double> row(static_cast<size_t>(alpha));
        for (int j = 0; j < alpha; ++j)
          row[static_cast<size_t>(j)] = t.at[static_cast<size_t>(i * alpha + j)] * t.g[static_cast<size_t>(j * r + k)];
        const double target = u == i + k ? 1.0 : 0.0;
        for (int a = 0; a < alpha; ++a) {
          for (int b = 0; b < alpha; ++b) normal[static_cast<size_t>(a * alpha + b)] += row[static_cast<size_t>(a)] * row[static_cast<size_t>(b)];
          rhs[static_cast<size_t>(a)] += row[static_cast<size_t>(a)] * target;
        }
      }
    }
    const std::vector<double> column = solve(normal, rhs, alpha);
    for (int j = 0; j < alpha; ++j) t.bt[static_cast<size_t>(j * alpha + u)] = column[static_cast<size_t>(j)];
  }
  const double error = check_transforms(t);
  if (!(error < 1e-9)) {
    throw Error(fmt::format("Winograd F({}, {}) from these points computes correlation with relative error {:.2e}", m, r,
                            error));
  }
  // Entries that are zero up to rounding are zero: the kernels then skip them.
  for (auto* matrix : {&t.at, &t.g, &t.bt})
    for (double& v : *matrix)
      if (std::abs(v) < 1e-12) v = 0;
  return t;
}

double check_transforms(const Transforms& t, int trials) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(-1, 1);
  double worst = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<double> g(static_cast<size_t>(t.r)), d(static_cast<size_t>(t.alpha));
    for (double& v : g) v = uniform(rng);
    for (double& v : d) v = uniform(rng);
    std::vector<double> gg(static_cast<size_t>(t.alpha), 0.0), dd(static_cast<size_t>(t.alpha), 0.0);
    for (int j = 0; j < t.alpha; ++j) {
      for (int k = 0; k < t.r; ++k) gg[static_cast<size_t>(j)] += t.g[static_cast<size_t>(j * t.r + k)] * g[static_cast<size_t>(k)];
      for (int u = 0; u < t.alpha; ++u) dd[static_cast<size_t>(j)] += t.bt[static_cast<size_t>(j * t.alpha + u)] * d[static_cast<size_t>(u)];
    }
    for (int i = 0; i < t.m; ++i) {
      double y = 0, direct = 0, scale = 0;
      for (int j = 0; j < t.alpha; ++j) y += t.at[static_cast<size_t>(i * t.alpha + j)] * gg[static_cast<size_t>(j)] * dd[static_cast<size_t>(j)];
      for (int k = 0; k < t.r; ++k) {
        direct += g[static_cast<size_t>(k)] * d[static_cast<size_t>(i + k)];
        scale += std::abs(g[static_cast<size_t>(k)] * d[static_cast<size_t>(i + k)]);
      }
      const double error = std::abs(y - direct) / std::max(scale, 1e-30);
      if (!std::isfinite(error)) return INFINITY;
      worst = std::max(worst, error);
    }
  }
  return worst;
}

void add_defines(const Transforms& t, std::map<std::string, std::string>& defines) {
  // Each matrix as one comma-separated list of float literals: the kernels unroll their loops over them, so every
  // entry becomes an immediate (and zeros vanish).
  auto list = [](const std::vector<double>& values) {
    std::string text;
    for (double v : values) text += fmt::format("{}{:.9e}f", text.empty() ? "" : ",", v);
    return text;
  };
  defines["WG_AT"] = list(t.at);
  defines["WG_G"] = list(t.g);
  defines["WG_BT"] = list(t.bt);
}

}  // namespace convtune::winograd
