// The tuning loop: ask, evaluate, record, until told to stop.
#include "src/tuner/tune_loop.h"

#include <fmt/format.h>

#include <cmath>
#include <deque>
#include <exception>

namespace convtune {

size_t TuneResult::failures() const {
  size_t n = 0;
  for (const Trial& t : trials) n += !t.ok();
  return n;
}

TuneResult tune_loop(Searcher& searcher, const StopCondition& stop, const Evaluator& evaluate,
                     const TuneLoopOptions& options) {
  TuneResult result;
  result.space_size = searcher.size();
  const auto start = options.now();
  std::deque<size_t> pending;  // proposed, handed to prefetch, not yet evaluated
  bool exhausted = false;
  for (;;) {
    const TuneProgress progress{result.trials.size(), searcher.size(), options.now() - start};
    if (auto reason = stop.reason_to_stop(progress)) {
      result.stop_reason = *reason;
      break;
    }
    while (!exhausted && pending.size() <= options.lookahead) {
      const std::optional<size_t> proposed = searcher.next();
      if (!proposed) {
        exhausted = true;
        break;
      }
      pending.push_back(*proposed);
      if (options.prefetch) options.prefetch(searcher.configs()[*proposed]);
    }
    std::optional<size_t> index;
    if (!pending.empty()) {
      index = pending.front();
      pending.pop_front();
    }
    if (!index) {
      result.stop_reason = fmt::format("searched the whole space ({} configuration{})", searcher.size(),
                                       searcher.size() == 1 ? "" : "s");
      break;
    }
    Trial trial;
    trial.index = *index;
    trial.config = searcher.configs()[*index];
    const auto trial_start = options.now();
    try {
      Evaluation evaluation = evaluate(trial.config);
      // A time that is not a positive number would win every comparison; it is a broken measurement.
      if (evaluation.ms && !(std::isfinite(*evaluation.ms) && *evaluation.ms > 0)) {
        evaluation = Evaluation::failed(fmt::format("invalid time {} ms from the evaluator", *evaluation.ms));
      }
      trial.ms = evaluation.ms;
      trial.failure = std::move(evaluation.failure);
      trial.note = std::move(evaluation.note);
    } catch (const std::exception& e) {
      trial.ms.reset();
      trial.failure = e.what();
    }
    trial.wall = options.now() - trial_start;
    searcher.record(trial.index, trial.ms);
    if (trial.ms && (!result.best_config || *trial.ms < result.best_ms)) {
      result.best_config = trial.config;
      result.best_index = trial.index;
      result.best_ms = *trial.ms;
    }
    result.trials.push_back(std::move(trial));
    if (options.on_trial) options.on_trial(result.trials.back(), result);
  }
  result.elapsed = options.now() - start;
  return result;
}

}  // namespace convtune
