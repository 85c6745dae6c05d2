// tune(): the tuning run as a library function — per task, the built-in default as the baseline, then the
// strategy's candidates compiled ahead, verified and timed, the best stored in the database; budget shared by tasks.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "convtune/error.h"
#include "convtune/tuning.h"
#include "src/tuner/candidate_evaluator.h"
#include "src/tuner/search_space.h"
#include "src/tuner/searcher.h"
#include "src/tuner/skip_tuned.h"

namespace convtune {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool matches_only(const Config& c, const std::map<std::string, std::vector<int64_t>>& only) {
  for (const auto& [name, values] : only) {
    const auto it = c.find(name);
    if (it == c.end() || std::find(values.begin(), values.end(), it->second) == values.end()) return false;
  }
  return true;
}

TuneTrial to_trial(const Config& config, const Evaluation& e, double wall_ms, std::string note = {}) {
  return {config, e.ms, e.failure, note.empty() ? e.note : std::move(note), wall_ms};
}

}  // namespace

std::vector<TuneTask> tasks_to_tune(const std::vector<TuneTask>& all_tasks, const TuningDatabase& database,
                                    const DeviceInfo& info, bool skip_tuned) {
  // A current exact entry for this device means the task was tuned before (an interrupted run, a suite that
  // grew): with skip_tuned it is left as it is.
  std::vector<TuneTask> tasks;
  for (const TuneTask& t : all_tasks) {
    if (skip_tuned) {
      const LookupResult found =
          database.lookup(t.problem, info, {{t.family->name(), kernel_source_hash(*t.family, t.problem, info)}});
      if (found.tier == LookupTier::Exact) continue;
    }
    tasks.push_back(t);
  }
  return tasks;
}

std::vector<TuneTask> make_tune_tasks(const DeviceInfo& device,
                                      const std::vector<std::pair<std::string, Problem>>& problems,
                                      const std::string& family, std::vector<std::string>* skipped) {
  if (family != "all" && !family.empty() && family != "auto") kernel_family(family);  // unknown names list the known
  std::vector<TuneTask> tasks;
  for (const auto& [name, problem] : problems) {
    for (const auto& f : kernel_families()) {
      if (family != "all" && !family.empty() && family != "auto" && f->name() != family) continue;
      if (f->problem_kind() != problem.kind()) continue;
      if (f->parameters(problem).empty()) continue;  // nothing to search (the float64 reference)
      if (const std::string why = f->unsupported_reason(problem, {}, device); !why.empty()) {
        if (skipped) skipped->push_back(fmt::format("{} {} {}: {}", name, problem.operation(), f->name(), why));
        continue;
      }
      tasks.push_back({name, problem, f.get()});
    }
  }
  return tasks;
}

std::vector<TuneTaskResult> tune(Device& device, const std::vector<TuneTask>& all_tasks, TuningDatabase& database,
                                 const TuneOptions& options, const TuneCallbacks& callbacks) {
  if (!(options.budget_seconds > 0) || !std::isfinite(options.budget_seconds)) {
    throw InvalidArgument(fmt::format("tuning budget {} s is invalid: expected a positive duration", options.budget_seconds));
  }
  if (options.max_fraction < 0 || options.max_fraction > 1) {
    throw InvalidArgument(fmt::format("max fraction {} is invalid: expected a fraction in (0, 1]", options.max_fraction));
  }
  if (options.repeats < 1) throw InvalidArgument(fmt::format("repeats={} is invalid: expected 1 or more", options.repeats));
  make_searcher(options.strategy, {});  // an unknown strategy fails now, listing the known ones
  if (options.save && !database.user_file_error().empty()) {
    throw TuningDatabaseError(database.user_file(), database.user_file_error() +
                                                        "; fix or move it, tune into another file, or do not save");
  }
  const DeviceInfo& info = device.info();

  const std::vector<TuneTask> tasks = tasks_to_tune(all_tasks, database, info, options.skip_tuned);

  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t jobs = options.jobs > 0 ? static_cast<size_t>(options.jobs) : std::clamp<size_t>(hardware - 1, 1, 8);
  const auto run_start = std::chrono::steady_clock::now();
  std::vector<TuneTaskResult> results;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const TuneTask& task = tasks[t];
    const Problem& pb = task.problem;
    const KernelFamily& family = *task.family;
    // Each task gets an even share of what is left, so time a fast task leaves unused goes to the later ones.
    const double task_budget = std::max(0.0, options.budget_seconds - seconds_since(run_start)) /
                               static_cast<double>(tasks.size() - t);
    const SearchSpace full_space(family, pb, info);
    std::vector<Config> configs;
    for (const Config& c : full_space.configs())
      if (matches_only(c, options.only)) configs.push_back(c);
    TuneTaskResult result;
    result.task = task;
    result.device = info.id;
    result.space = configs.size();
    if (callbacks.task_started) callbacks.task_started(task, t, tasks.size(), configs.size());
    if (configs.empty()) {
      result.stop_reason = "no valid configuration on this device";
      if (callbacks.task_done) callbacks.task_done(result);
      results.push_back(std::move(result));
      continue;
    }
    CandidateOptions candidate_options;
    candidate_options.warmup = options.warmup;
    candidate_options.repeats = options.repeats;
    candidate_options.abort_factor = options.abort_factor;
    const auto task_clock = std::chrono::steady_clock::now();
    CandidateEvaluator evaluator(device, family, pb, candidate_options);

    // The built-in default first: the baseline every tuned result is compared with, and the first best. With
    // `only` it is measured only when it lies inside the restricted space, so a strategy's result there is what
    // the strategy found.
    const Config default_config = family.default_config(pb, info);
    const bool default_inside = matches_only(default_config, options.only);
    std::optional<double> baseline;
    if (default_inside) {
      const auto start = std::chrono::steady_clock::now();
      const Evaluation e = evaluator.evaluate(default_config);
      result.trials.push_back(to_trial(default_config, e, seconds_since(start) * 1e3, "built-in default"));
      baseline = e.ms;
      if (e.ms) result.default_ms = *e.ms;
      if (callbacks.trial_done) callbacks.trial_done(result, result.trials.back(), 0);
    }

    SearcherOptions searcher_options;
    searcher_options.seed = options.seed + t;
    auto searcher = make_searcher(options.strategy, configs, searcher_options);
    // The default's evaluation (compile included) already used part of the share; a run over budget still
    // measures the default of every task, so each gets a baseline and an entry.
    const double left = task_budget - seconds_since(task_clock);
    std::vector<StopCondition> stops = {StopCondition::after_time(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(std::max(left, 1e-3))))};
    if (options.max_fraction > 0) stops.push_back(StopCondition::after_fraction(options.max_fraction));
    if (options.max_candidates > 0) stops.push_back(StopCondition::after_candidates(options.max_candidates));
    const StopCondition stop = StopCondition::any_of(stops);

    TuneLoopOptions loop;
    loop.lookahead = jobs;
    loop.prefetch = [&](const Config& c) { evaluator.prefetch(c); };
    const auto task_start = std::chrono::steady_clock::now();
    loop.on_trial = [&](const Trial& trial, const TuneResult& so_far) {
      Evaluation e = trial.ms ? Evaluation(*trial.ms) : Evaluation::failed(trial.failure);
      e.note = trial.note;
      result.trials.push_back(to_trial(trial.config, e, std::chrono::duration<double, std::milli>(trial.wall).count()));
      const double elapsed = seconds_since(task_start);
      double fraction = task_budget > 0 ? elapsed / task_budget : 1;
      if (options.max_fraction > 0)
        fraction = std::max(fraction, so_far.trials.size() / std::ceil(options.max_fraction * configs.size()));
      if (options.max_candidates > 0)
        fraction = std::max(fraction, static_cast<double>(so_far.trials.size()) / options.max_candidates);
      fraction = std::max(fraction, static_cast<double>(so_far.trials.size()) / configs.size());
      if (callbacks.trial_done) callbacks.trial_done(result, result.trials.back(), std::min(fraction, 1.0));
    };
    TuneResult searched;
    if (left > 0) {
      searched = tune_loop(*searcher, stop, [&](const Config& c) { return evaluator.evaluate(c); }, loop);
    } else {
      searched.stop_reason = "its share of the budget went to the built-in default";
    }

    result.tried = result.trials.size();
    result.failed = static_cast<size_t>(std::count_if(result.trials.begin(), result.trials.end(),
                                                      [](const TuneTrial& x) { return !x.ms; }));
    result.stop_reason = searched.stop_reason;
    // The winner is the fastest verified candidate, the default included.
    if (baseline) result.best_config = default_config, result.best_ms = *baseline;
    if (searched.found() && (!result.best_config || searched.best_ms < result.best_ms)) {
      result.best_config = searched.best_config, result.best_ms = searched.best_ms;
    }
    if (result.best_config) {
      result.stored = database.insert(make_tuning_entry(info, family.name(), kernel_source_hash(family, pb, info), pb,
                                                        *result.best_config, result.best_ms));
      if (options.save) database.save();  // after every task, so an interrupted run keeps what it found
    }
    if (callbacks.task_done) callbacks.task_done(result);
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace convtune
