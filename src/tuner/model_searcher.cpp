// Quadratic ridge regression on log(time), solved through the normal equations (tens of coefficients at most).
#include "src/tuner/model_searcher.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/core/linear_solve.h"

namespace convtune {

ModelSearcher::ModelSearcher(std::span<const Config> configs, const SearcherOptions& options)
    : Searcher(configs),
      lattice_(configs),
      rng_(options.seed),
      random_order_(configs.size()),
      exploration_(options.exploration) {
  const size_t d = lattice_.dimensions();
  feature_count_ = 1 + d + d * (d + 1) / 2;
  // Enough random points to pin down the quadratic, but never most of a small space.
  initial_random_ = options.initial_random > 0
                        ? options.initial_random
                        : std::min(2 * feature_count_, std::max(configs.size() / 50, 2 * d + 2));
}

void ModelSearcher::features(size_t index, std::vector<double>& out) const {
  const std::vector<double>& x = lattice_.coordinates(index);
  out.clear();
  out.push_back(1.0);
  for (double v : x) out.push_back(v);
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = i; j < x.size(); ++j) out.push_back(x[i] * x[j]);
}

double ModelSearcher::predict_log(size_t index, std::vector<double>& scratch) const {
  features(index, scratch);
  double sum = 0;
  for (size_t f = 0; f < scratch.size(); ++f) sum += coefficients_[f] * scratch[f];
  return sum;
}

void ModelSearcher::fit() {
  const size_t n = feature_count_;
  std::vector<double> ata(n * n, 0.0), aty(n, 0.0), row;
  for (size_t m = 0; m < measured_.size(); ++m) {
    features(measured_[m], row);
    for (size_t i = 0; i < n; ++i) {
      aty[i] += row[i] * measured_log_[m];
      for (size_t j = 0; j <= i; ++j) ata[i * n + j] += row[i] * row[j];
    }
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < i; ++j) ata[j * n + i] = ata[i * n + j];
  // A small ridge keeps the fit defined with fewer points than coefficients; the constant is not shrunk, so
  // the model does not drift toward a time of 1 ms.
  for (size_t i = 1; i < n; ++i) ata[i * n + i] += 1e-3 * std::max<size_t>(measured_.size(), 1);
  fitted_ = !measured_.empty() && solve_spd(ata, aty, n);
  if (fitted_) coefficients_ = std::move(aty);
}

double ModelSearcher::predicted_ms(size_t index) {
  if (!fitted_) fit();
  if (!fitted_) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> scratch;
  return std::exp(predict_log(index, scratch));
}

std::optional<size_t> ModelSearcher::choose() {
  auto taken = [this](size_t i) { return was_proposed(i); };
  const bool exploring = proposed_count() < initial_random_ ||
                         std::uniform_real_distribution<double>(0, 1)(rng_) < exploration_;
  if (!exploring && !fitted_) fit();
  if (exploring || !fitted_) return random_order_.next(rng_, taken);

  std::optional<size_t> best;
  double best_log = std::numeric_limits<double>::infinity();
  std::vector<double> scratch;
  for (size_t i = 0; i < size(); ++i) {
    if (taken(i)) continue;
    const double predicted = predict_log(i, scratch);
    if (predicted < best_log) {
      best_log = predicted;
      best = i;
    }
  }
  return best;
}

void ModelSearcher::learn(size_t index, std::optional<double> ms) {
  // Failures carry no time to fit; they are simply never proposed again.
  if (!ms) return;
  measured_.push_back(index);
  measured_log_.push_back(std::log(*ms));
  fitted_ = false;
}

}  // namespace convtune
