// The annealing walk: Metropolis acceptance on log(time), geometric cooling, restarts from the best
// configurations that still have unmeasured neighbours when the walk is boxed in.
#include "src/tuner/annealing_searcher.h"

#include <algorithm>
#include <cmath>

namespace convtune {

AnnealingSearcher::AnnealingSearcher(std::span<const Config> configs, const SearcherOptions& options)
    : Searcher(configs),
      lattice_(configs),
      rng_(options.seed),
      random_order_(configs.size()),
      time_ms_(configs.size(), kUnmeasured),
      temperature_(options.initial_temperature),
      cooling_(options.cooling) {}

bool AnnealingSearcher::accept(double from_ms, double to_ms) {
  if (!std::isfinite(to_ms)) return false;
  // Log-time differences make the rule scale-free: 10% slower is the same step for a 1 ms and a 1 s kernel.
  const double worse_by = std::log(to_ms) - std::log(from_ms);
  if (worse_by <= 0) return true;
  if (temperature_ <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(rng_) < std::exp(-worse_by / temperature_);
}

std::optional<size_t> AnnealingSearcher::restart_point() {
  while (!frontier_.empty()) {
    const size_t candidate = frontier_.begin()->second;
    const auto around = lattice_.neighbours(candidate);
    if (std::any_of(around.begin(), around.end(), [&](size_t n) { return unproposed(n); })) return candidate;
    frontier_.erase(frontier_.begin());
  }
  return std::nullopt;
}

std::optional<size_t> AnnealingSearcher::choose() {
  auto random_unproposed = [&] { return random_order_.next(rng_, [&](size_t i) { return !unproposed(i); }); };
  if (!current_ || proposed_count() < kStartingSamples) return random_unproposed();

  // Walk from the current point: propose an unmeasured neighbour, or move through measured ones (free, since
  // their times are known) until one has unmeasured neighbours. The walk length bounds the time spent in a
  // fully measured region before restarting.
  size_t here = *current_;
  for (size_t step = 0; step < 4 * lattice_.dimensions() + 8; ++step) {
    std::vector<size_t> around = lattice_.neighbours(here);
    std::vector<size_t> fresh, known;
    for (size_t n : around) {
      if (unproposed(n)) fresh.push_back(n);
      else if (time_ms_[n] != kUnmeasured && time_ms_[n] != kFailed) known.push_back(n);
    }
    if (!fresh.empty()) {
      current_ = here;
      return fresh[std::uniform_int_distribution<size_t>(0, fresh.size() - 1)(rng_)];
    }
    if (known.empty()) break;
    const size_t candidate = known[std::uniform_int_distribution<size_t>(0, known.size() - 1)(rng_)];
    if (accept(time_ms_[here], time_ms_[candidate])) here = candidate;
  }
  // Boxed in: continue from the fastest configuration with unmeasured neighbours, else anywhere unmeasured.
  if (const auto restart = restart_point()) {
    current_ = *restart;
    const auto around = lattice_.neighbours(*restart);
    std::vector<size_t> fresh;
    for (size_t n : around)
      if (unproposed(n)) fresh.push_back(n);
    return fresh[std::uniform_int_distribution<size_t>(0, fresh.size() - 1)(rng_)];
  }
  return random_unproposed();
}

void AnnealingSearcher::learn(size_t index, std::optional<double> ms) {
  time_ms_[index] = ms ? *ms : kFailed;
  ++results_;
  if (!ms) return;
  frontier_.emplace(*ms, index);
  if (!current_ || results_ <= kStartingSamples) {
    // Starting samples: begin from the fastest of them.
    if (!current_ || *ms < time_ms_[*current_]) current_ = index;
    return;
  }
  if (accept(time_ms_[*current_], *ms)) current_ = index;
  temperature_ *= cooling_;
}

}  // namespace convtune
