// tune_loop: drives a Searcher against an evaluation function (compile + verify + time) until a StopCondition
// holds or the space is exhausted, keeping every trial and the fastest successful configuration.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/tuner/searcher.h"
#include "src/tuner/stop_condition.h"

namespace convtune {

// What evaluating one configuration gave: a time in ms, or a failure and why. A function returning
// std::optional<double> or double converts to this; one that throws std::exception is recorded as a failure
// with the exception's message (compile errors arrive that way).
struct Evaluation {
  std::optional<double> ms;
  std::string failure;  // why it failed; empty on success
  std::string note;     // anything worth logging about a success ("timed once: 4.2x the best so far")

  Evaluation(double time_ms) : ms(time_ms) {}  // NOLINT: implicit on purpose, see above
  Evaluation(std::optional<double> time_ms)    // NOLINT
      : ms(time_ms), failure(time_ms ? "" : "failed (the evaluator gave no reason)") {}
  static Evaluation failed(std::string reason) {
    Evaluation e(std::nullopt);
    e.failure = std::move(reason);
    return e;
  }
};
using Evaluator = std::function<Evaluation(const Config&)>;

struct Trial {
  size_t index = 0;  // into the searcher's configuration list
  Config config;
  std::optional<double> ms;  // nullopt: failed
  std::string failure;
  std::string note;                  // e.g. why timing stopped early
  std::chrono::nanoseconds wall{0};  // evaluation time, compile and verification included
  bool ok() const { return ms.has_value(); }
};

struct TuneResult {
  std::optional<Config> best_config;  // absent when every trial failed (or none ran)
  std::optional<size_t> best_index;
  double best_ms = 0;
  std::vector<Trial> trials;
  size_t space_size = 0;
  std::string stop_reason;  // "reached 10% of the space (...)", "searched the whole space"
  std::chrono::nanoseconds elapsed{0};

  bool found() const { return best_config.has_value(); }
  size_t failures() const;
};

struct TuneLoopOptions {
  // The clock the time budget and the trial wall times read; tests substitute a fake one.
  std::function<std::chrono::steady_clock::time_point()> now = [] { return std::chrono::steady_clock::now(); };
  // Called after each trial (progress output); `so_far` holds the trials up to and including it.
  std::function<void(const Trial& trial, const TuneResult& so_far)> on_trial;
  // Candidates proposed ahead of the one being evaluated, each handed to `prefetch` as soon as it is proposed
  // (so their compiles run on other threads while this one is measured). 0: propose one at a time.
  size_t lookahead = 0;
  std::function<void(const Config&)> prefetch;
};

TuneResult tune_loop(Searcher& searcher, const StopCondition& stop, const Evaluator& evaluate,
                     const TuneLoopOptions& options = {});

}  // namespace convtune
