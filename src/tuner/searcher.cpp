// Bookkeeping every strategy shares (no repeats, results matched to proposals) and the factory by name.
#include "src/tuner/searcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "convtune/error.h"
#include "src/tuner/annealing_searcher.h"
#include "src/tuner/exhaustive_searcher.h"
#include "src/tuner/model_searcher.h"
#include "src/tuner/random_searcher.h"

namespace convtune {

std::optional<size_t> Searcher::next() {
  const std::optional<size_t> index = choose();
  if (!index) return std::nullopt;
  // A strategy that repeats itself would waste a compile and a measurement: that is a bug, not a choice.
  if (*index >= configs_.size() || proposed_[*index])
    throw Error(fmt::format("searcher '{}' proposed configuration {} twice or out of range (space of {})", name(),
                            *index, configs_.size()));
  proposed_[*index] = true;
  ++proposed_count_;
  return index;
}

std::vector<size_t> Searcher::next_batch(size_t count) {
  std::vector<size_t> batch;
  while (batch.size() < count) {
    const std::optional<size_t> index = next();
    if (!index) break;
    batch.push_back(*index);
  }
  return batch;
}

void Searcher::record(size_t index, std::optional<double> ms) {
  if (index >= configs_.size() || !proposed_[index])
    throw InvalidArgument(
        fmt::format("searcher '{}': a result for configuration {} that was never proposed", name(), index));
  if (recorded_[index])
    throw InvalidArgument(fmt::format("searcher '{}': a second result for configuration {} ({})", name(), index,
                                      to_string(configs_[index])));
  recorded_[index] = true;
  learn(index, ms);
}

void Searcher::prime(size_t index, std::optional<double> ms) {
  if (index >= configs_.size() || proposed_[index])
    throw InvalidArgument(fmt::format("searcher '{}': configuration {} cannot be primed twice or out of range", name(), index));
  proposed_[index] = true;
  ++proposed_count_;
  record(index, ms);
}

const std::vector<std::string>& searcher_names() {
  static const std::vector<std::string> names{"exhaustive", "random", "annealing", "model"};
  return names;
}

std::unique_ptr<Searcher> make_searcher(std::string_view name, std::span<const Config> configs,
                                        const SearcherOptions& options) {
  if (name == "exhaustive") return std::make_unique<ExhaustiveSearcher>(configs);
  if (name == "random") return std::make_unique<RandomSearcher>(configs, options.seed);
  if (name == "annealing") return std::make_unique<AnnealingSearcher>(configs, options);
  if (name == "model") return std::make_unique<ModelSearcher>(configs, options);
  throw InvalidArgument(fmt::format("unknown search strategy '{}': expected one of {}", name,
                                    fmt::join(searcher_names(), ", ")));
}

}  // namespace convtune
