// tune(): the tuning run as a library function, in three phases under one wall-clock deadline:
//  1. baselines: per problem, what a plan runs today (the database's answer, whatever its tier), then the
//     configurations of each family's stale exact entries on this hardware and those tuned for the same shape in
//     another element type or math mode (KernelFamily::seed_family), then each family's built-in default, measured;
//     a phase that would overrun the budget stops and lists what it left out;
//  2. search: each task's space enumerated as its search starts; half the time left shared among the tasks by
//     expected gain (the problem's current time, times its headroom to the device's peak when known), families whose
//     default is several times slower than the problem's best left out; the other half among the tasks whose first
//     round gained, by what they gained; each search starts from the configurations already measured;
//  3. a second opinion: where the best result is not the baseline, both are timed again, alternately, in the time
//     held back for it (a tenth of the budget, or four evaluations a problem where that is less): a baseline timed
//     while something else held the device looks slower than it is, and the search's best time is the luckiest of
//     many timings;
//  4. never worse: a problem whose best tuned result is slower than its baseline gets the baseline stored as its
//     exact entry, so the lookup never prefers a worse exact entry to what the user already had.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "convtune/error.h"
#include "convtune/tuning.h"
#include "src/tuner/candidate_evaluator.h"
#include "src/tuner/search_space.h"
#include "src/tuner/searcher.h"
#include "src/tuner/skip_tuned.h"

namespace convtune {

namespace {

using Clock = std::chrono::steady_clock;

// A family whose built-in default is this many times slower than the problem's best default gets no search time:
// tuning rarely recovers a factor of three, and the time is better spent on the families that are close.
constexpr double kPoorFamilyFactor = 3.0;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

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

// What evaluations cost (compile, reference, verification, timing), learnt as the run goes, by family and direction:
// every configuration is a program of its own, a family's programs in one direction take similar times to build, and
// families differ a hundredfold (PoCL, cold cache: implicit_gemm's 0.25-0.36 s, fft's 1.4 s, winograd's backward-data
// 5.6 s). A run-wide mean would let a 5.6 s Winograd build start with half a second left, after a run of cheap cached
// ones (an 8 s tune took 14.4 s in CI that way). A family and direction not evaluated yet is expected to cost what
// the others' first evaluations did, those that built their first program.
class EvaluationCosts {
 public:
  static std::string program(const KernelFamily& family, const Problem& problem) {
    return family.name() + " " + std::string(problem.operation());
  }
  void add(const std::string& program, double seconds) {
    Mean& m = by_program_[program];
    if (m.count == 0) first_.add(seconds);
    m.add(seconds);
    all_.add(seconds);
  }
  // 0 before any evaluation: the first one always starts.
  double expected(const std::string& program) const {
    const auto it = by_program_.find(program);
    if (it != by_program_.end()) return it->second.value();
    return first_.value();
  }
  double mean() const { return all_.value(); }
  bool empty() const { return all_.count == 0; }

 private:
  struct Mean {
    double sum = 0;
    size_t count = 0;
    void add(double x) { sum += x, ++count; }
    double value() const { return count ? sum / double(count) : 0; }
  };
  std::map<std::string, Mean> by_program_;
  Mean first_, all_;
};

// What one task carries through the phases.
struct TaskState {
  TuneTaskResult result;
  std::vector<Config> configs;  // its space (within `only`)
  std::unique_ptr<CandidateEvaluator> evaluator;
  std::optional<Config> default_config;
  std::optional<double> default_ms;
  bool default_measured = false;  // its default was timed (on its own, or as today's plan)
  double weight = 0;  // share of the search time
  size_t problem = 0;   // index into the run's problems
  size_t searched = 0;  // candidates its searches proposed (the caps count both rounds)
  std::optional<Config> stored_config;  // the configuration its database entry holds (store() below)
};

// What a problem carries: its tasks and the baseline (today's plan for it).
struct ProblemState {
  Problem problem;
  std::vector<size_t> tasks;
  const KernelFamily* baseline_family = nullptr;
  Config baseline_config;
  ConfigTier baseline_tier = ConfigTier::BuiltInDefault;
  std::optional<double> baseline_ms;
  std::optional<double> best_retimed;  // the best result's time in the second opinion (phase 3)
  std::string second_opinion;          // what the second opinion measured, for the results' stop reasons
};

}  // namespace

std::vector<TuneTask> tasks_to_tune(const std::vector<TuneTask>& all_tasks, const TuningDatabase& database,
                                    const DeviceInfo& info, bool skip_tuned) {
  // A current exact entry for this device means the task was tuned before (an interrupted run, a suite that
  // grew): with skip_tuned it is left as it is.
  std::vector<TuneTask> tasks;
  for (const TuneTask& t : all_tasks) {
    if (skip_tuned) {
      const LookupResult found =
          database.lookup(t.problem, info, {{t.family->name(), t.family->kernel_version()}});
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
      if (f->runs_on_cpu_backend() != (device.backend == BackendKind::Cpu)) continue;  // another kind of device's
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

namespace {

// The options tune() refuses before anything starts.
void check_tune_options(const TuneOptions& options, const TuningDatabase& database) {
  if (!(options.budget_seconds > 0) || !std::isfinite(options.budget_seconds)) {
    throw InvalidArgument(fmt::format("tuning budget {} s is invalid: expected a positive duration", options.budget_seconds));
  }
  if (options.max_fraction < 0 || options.max_fraction > 1) {
    throw InvalidArgument(fmt::format("max fraction {} is invalid: expected a fraction in (0, 1]", options.max_fraction));
  }
  if (options.repeats < 1) throw InvalidArgument(fmt::format("repeats={} is invalid: expected 1 or more", options.repeats));
  make_searcher(options.strategy, {});  // an unknown strategy fails now, listing the known ones
  if (const std::string refusal = database.save_refusal(); options.save && !refusal.empty()) {
    throw TuningDatabaseError(database.user_file(), refusal + "; fix or move it, tune into another file, or do not save");
  }
}

std::string program_of(const TaskState& task) {
  return EvaluationCosts::program(*task.result.task.family, task.result.task.problem);
}

// The fastest time among a task's trials, if any succeeded.
std::optional<double> fastest_trial_ms(const TaskState& task) {
  std::optional<double> best;
  for (const TuneTrial& t : task.result.trials)
    if (t.ms && (!best || *t.ms < *best)) best = t.ms;
  return best;
}

// One tuning run: the tasks grouped by problem, and the clock, device and learnt evaluation costs that its phases
// share. tune() calls the phases in order.
class TuneRun {
 public:
  TuneRun(Device& device, const std::vector<TuneTask>& all_tasks, TuningDatabase& database, const TuneOptions& options,
          const TuneCallbacks& callbacks);
  // Each task's built-in default, and the callers told which tasks run.
  void start_tasks();
  // Phase 1a: what every problem runs today, and how fast.
  void measure_baselines();
  // Phase 1b: the configurations of stale entries and of other precisions' entries, as early candidates.
  void measure_seeds();
  // Phase 1c: each family's built-in default, where not measured yet.
  void measure_defaults();
  // How much time the second opinion keeps, now that an evaluation's cost is known.
  void shrink_held_back();
  // Phase 2a: each task's share of the search time, by expected gain.
  void weigh_tasks();
  // Phase 2b: the searches, in two rounds.
  void search_rounds();
  // Phase 3: where a problem's best is not its baseline, both timed again.
  void second_opinions();
  // Phase 4: the results, with the baseline stored where nothing tuned beat it.
  std::vector<TuneTaskResult> finish();

 private:
  double left() const {
    return options_.budget_seconds - reserve_ - held_back_ - seconds_since(start_);
  }
  // Nothing starts that would likely end past the deadline: an evaluation of `program` (EvaluationCosts::program)
  // starts while the time left exceeds what that program's evaluations cost so far.
  bool affordable(const std::string& program) const { return left() > costs_.expected(program); }
  void status(const std::string& text) const {
    if (callbacks_.status) callbacks_.status(text);
  }
  Evaluation evaluate(TaskState& task, const Config& config, const std::string& note);
  std::vector<std::pair<Config, const char*>> seed_configs(const TaskState& task, const ProblemState& p) const;
  void store(TaskState& task);
  bool enumerate_space(TaskState& task);
  void search(size_t index, double share, size_t round);
  void second_opinion(ProblemState& p);
  void keep_baseline(ProblemState& p);

  Device& device_;
  TuningDatabase& database_;
  const TuneOptions& options_;
  const TuneCallbacks& callbacks_;
  const Clock::time_point start_;
  // The last evaluations, storing and saving need a moment after the search: the search ends a little before the
  // budget (3% and half a second, at most 5 s), so the whole run keeps it. On an H200 with a cold cache, without
  // this reserve `tune --suite alexnet --budget 2m` takes 127 s.
  const double reserve_;
  // The second opinion's time (phase 3), held back from the baselines and the search (shrunk after phase 1).
  double held_back_;
  // Enumerating a search space stops there too: fft's spaces of millions of points take seconds each.
  const Clock::time_point deadline_;
  // The device as the candidates may use it: the options' workspace limit applied to its searches and plans.
  const DeviceInfo info_;
  CandidateOptions candidate_options_;
  EvaluationCosts costs_;
  size_t jobs_;
  std::vector<TaskState> tasks_;
  std::vector<ProblemState> problems_;
};

TuneRun::TuneRun(Device& device, const std::vector<TuneTask>& all_tasks, TuningDatabase& database,
                 const TuneOptions& options, const TuneCallbacks& callbacks)
    : device_(device),
      database_(database),
      options_(options),
      callbacks_(callbacks),
      start_(Clock::now()),
      reserve_(std::min(5.0, 0.03 * options.budget_seconds + 0.5)),
      held_back_(0.1 * std::max(0.0, options.budget_seconds - reserve_)),
      deadline_(start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(std::max(0.0, options.budget_seconds - reserve_)))),
      info_(with_workspace_limit(device.info(), options.workspace_limit)) {
  std::map<std::string, size_t> problem_index;
  for (const TuneTask& t : tasks_to_tune(all_tasks, database_, info_, options_.skip_tuned)) {
    const std::string key = t.problem.to_string();
    if (!problem_index.count(key)) {
      problem_index[key] = problems_.size();
      problems_.push_back({t.problem, {}});
    }
    problems_[problem_index[key]].tasks.push_back(tasks_.size());
    TaskState state;
    state.problem = problem_index[key];
    state.result.task = t;
    state.result.device = info_.id;
    tasks_.push_back(std::move(state));
  }
  candidate_options_.warmup = options_.warmup;
  candidate_options_.repeats = options_.repeats;
  candidate_options_.abort_factor = options_.abort_factor;
  candidate_options_.workspace_limit = options_.workspace_limit;
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  jobs_ = options_.jobs > 0 ? static_cast<size_t>(options_.jobs) : std::clamp<size_t>(hardware - 1, 1, 8);
}

Evaluation TuneRun::evaluate(TaskState& task, const Config& config, const std::string& note) {
  if (!task.evaluator) {
    task.evaluator = std::make_unique<CandidateEvaluator>(device_, *task.result.task.family, task.result.task.problem,
                                                          candidate_options_);
  }
  const auto begin = Clock::now();
  const Evaluation e = task.evaluator->evaluate(config);
  const double wall = seconds_since(begin);
  costs_.add(program_of(task), wall);
  task.result.trials.push_back(to_trial(config, e, wall * 1e3, note));
  if (callbacks_.trial_done) callbacks_.trial_done(task.result, task.result.trials.back(), 0);
  return e;
}

void TuneRun::start_tasks() {
  for (size_t index = 0; index < tasks_.size(); ++index) {
    TaskState& task = tasks_[index];
    task.default_config = task.result.task.family->default_config(task.result.task.problem, info_);
    if (callbacks_.task_started) callbacks_.task_started(task.result.task, index, tasks_.size());
  }
}

// Baselines come first so that a short budget still measures what every problem runs today: the never-worse rule
// stores it as that problem's exact entry, which keeps its plan when the other problems' new entries refit the cost
// model (a 60 s tune of 75 problems that measured baselines and defaults problem by problem reached 56 of them, and
// one of the others, left to the refitted model, ran 1.25x slower after the tune).
// Search spaces are enumerated later, when a task's search starts: fft's spaces of tens of millions of points take
// 17-44 s each on an H100 host, and enumerated here they used up a 120 s tune before any baseline was timed (a
// re-tune of alex2 and u8 through fft timed only today's plans, never the 1 GiB defaults that beat them).
void TuneRun::measure_baselines() {
  size_t measured_problems = 0;
  // Every problem's plan is looked up, measured or not: a problem whose plan goes unmeasured stores nothing.
  bool measuring = true;
  for (ProblemState& p : problems_) {
    // Today's plan for this problem, as any caller would get it.
    PlanRequest request;
    request.problem = p.problem;
    request.tuning = &database_;
    try {
      const PlanDescriptor today = PlanDescriptor::create(info_, request);
      p.baseline_family = &today.family();
      p.baseline_config = today.config();
      p.baseline_tier = today.tier();
    } catch (const Error&) {
      p.baseline_family = nullptr;  // nothing computes it today: any tuned result is an improvement
    }
    if (!p.baseline_family) continue;
    const std::string baseline_program = EvaluationCosts::program(*p.baseline_family, p.problem);
    measuring = measuring && affordable(baseline_program);
    if (!measuring) continue;
    ++measured_problems;
    status(fmt::format("baselines: {} ({}/{})", p.problem.to_string(), measured_problems, problems_.size()));
    const auto own = std::find_if(p.tasks.begin(), p.tasks.end(),
                                  [&](size_t i) { return tasks_[i].result.task.family == p.baseline_family; });
    if (own == p.tasks.end() || !matches_only(p.baseline_config, options_.only)) {
      // A baseline from a family not tuned in this run, or outside --only, is measured on its own: the tuned results
      // must beat it. (Skipped instead, a baseline outside --only would leave the problem without a time, and its
      // tasks would search and store nothing: `tune --only ALGO=0` of a 3x3 layer whose plan is Winograd would try
      // no candidate.)
      CandidateEvaluator evaluator(device_, *p.baseline_family, p.problem, candidate_options_);
      const auto begin = Clock::now();
      p.baseline_ms = evaluator.evaluate(p.baseline_config).ms;
      costs_.add(baseline_program, seconds_since(begin));
      continue;
    }
    // Measured by its own family's task, so the search starts from it; a baseline that is the family's default
    // (today's plan untuned, or an entry holding the default) counts as that default's measurement too.
    TaskState& task = tasks_[*own];
    const bool untuned = p.baseline_tier == ConfigTier::BuiltInDefault;
    const Evaluation e = evaluate(task, p.baseline_config,
                                  untuned ? std::string("built-in default")
                                          : fmt::format("today's plan ({})", to_string(p.baseline_tier)));
    p.baseline_ms = e.ms;
    if (untuned || p.baseline_config == *task.default_config) {
      task.default_ms = e.ms;
      task.default_measured = true;
      if (e.ms) task.result.default_ms = *e.ms;
    }
    task.evaluator.reset();  // device memory goes back between problems; the next pass makes it again
  }
}

// Before the families' defaults, the configurations of the problem's stale exact entries on this hardware
// (measured on an older kernel source or driver, so no plan trusts them): after a change to a kernel source the
// old best is often still among the best, and timing it on the current source first lets a short tune restore it
// instead of leaving the problem at its default. Then those of the same shape in other element types and math
// modes, of the family's seed family (itself, or the FP32 family a widened one runs: a bf16 layer starts from its
// fp32 and tf32 entries). They are candidates like any other, verified and timed now. They come before the
// defaults because they were tuned: a `tune --math bf16 --family all` of 48 layers (454 tasks, 330 s on an H100)
// that timed the defaults first spent its whole budget on them and never reached the widened families' fp32
// entries (the tunes of one widened family each that followed moved 12 of those rows to them).
void TuneRun::measure_seeds() {
  for (ProblemState& p : problems_) {
    for (size_t index : p.tasks) {
      TaskState& task = tasks_[index];
      if (!affordable(program_of(task))) continue;
      for (const auto& [seed, why] : seed_configs(task, p)) {
        if (!affordable(program_of(task))) break;
        status(fmt::format("entries of other kernels or precisions: {} {}", p.problem.to_string(),
                           task.result.task.family->name()));
        evaluate(task, seed, why);
      }
    }
    for (size_t index : p.tasks) tasks_[index].evaluator.reset();
  }
}

// The seed configurations of one task (measure_seeds), each once, with why it is timed.
std::vector<std::pair<Config, const char*>> TuneRun::seed_configs(const TaskState& task, const ProblemState& p) const {
  const KernelFamily& family = *task.result.task.family;
  std::vector<std::pair<Config, const char*>> seeds;
  const auto add = [&](const Config& config, const char* why) {
    // The baseline was timed before, the default is timed after.
    if (config == task.default_config || config == p.baseline_config) return;
    for (const auto& seed : seeds)
      if (seed.first == config) return;
    if (!matches_only(config, options_.only) || !config_problem(family, config, p.problem, info_).empty()) return;
    seeds.emplace_back(config, why);
  };
  EntryFilter filter;
  filter.family = family.name();
  for (const ListedEntry& listed : database_.list(filter)) {
    const TuningEntry& e = listed.entry;
    if (!(e.problem == p.problem) || !e.device.same_hardware(info_)) continue;
    if (stale_reason(e, info_, family.kernel_version()).empty()) continue;  // fresh: today's plan already has it
    add(e.parameters, "a stale entry's configuration (older kernel version or driver), timed again");
  }
  filter.family = family.seed_family();
  const Precision precision{p.problem.type(), p.problem.math()};
  for (const ListedEntry& listed : database_.list(filter)) {
    const TuningEntry& e = listed.entry;
    // This hardware's entries, or another chip's of its architecture: a seed is only a candidate, timed here.
    const bool near = e.device.same_hardware(info_) ||
                      (e.device.backend == to_string(info_.backend) && !info_.architecture.empty() &&
                       e.device.architecture == info_.architecture);
    if (e.problem == p.problem || !near) continue;
    if (!(e.problem.with_precision(precision) == p.problem)) continue;  // another shape
    add(e.parameters, "tuned for this shape in another element type or math mode");
  }
  return seeds;
}

void TuneRun::measure_defaults() {
  for (ProblemState& p : problems_) {
    for (size_t index : p.tasks) {
      TaskState& task = tasks_[index];
      if (task.default_measured || !affordable(program_of(task))) continue;
      if (!task.default_config || !matches_only(*task.default_config, options_.only)) continue;
      const KernelFamily& family = *task.result.task.family;
      if (!config_problem(family, *task.default_config, p.problem, info_).empty()) continue;  // not in its space
      status(fmt::format("defaults: {} {}", p.problem.to_string(), task.result.task.family->name()));
      const Evaluation e = evaluate(task, *task.default_config, "built-in default");
      task.default_ms = e.ms;
      task.default_measured = true;
      if (e.ms) task.result.default_ms = *e.ms;
    }
    for (size_t index : p.tasks) tasks_[index].evaluator.reset();
  }
}

// The second opinion needs at most four evaluations a problem: the tenth of the budget held back shrinks to that
// once an evaluation's cost is known, and the rest goes to the search.
void TuneRun::shrink_held_back() {
  if (!costs_.empty()) held_back_ = std::min(held_back_, 4.0 * static_cast<double>(problems_.size()) * costs_.mean());
}

// A task's weight is its problem's current time, times the headroom to the device's peak when known, shrunk for a
// family whose default trails the problem's best; a family far behind gets none.
void TuneRun::weigh_tasks() {
  for (ProblemState& p : problems_) {
    double best_default = 0;
    for (size_t index : p.tasks) {
      const auto& ms = tasks_[index].default_ms;
      if (ms && (best_default == 0 || *ms < best_default)) best_default = *ms;
    }
    const double current = p.baseline_ms ? std::min(*p.baseline_ms, best_default > 0 ? best_default : *p.baseline_ms)
                                          : best_default;
    const double achieved = current > 0 ? p.problem.flops() / (current * 1e6) : 0;
    const double headroom = options_.peak_gflops > 0 ? std::clamp(1.0 - achieved / options_.peak_gflops, 0.05, 1.0) : 1.0;
    for (size_t index : p.tasks) {
      TaskState& task = tasks_[index];
      if (current <= 0) continue;
      if (task.default_ms && best_default > 0 && *task.default_ms > kPoorFamilyFactor * best_default) {
        task.result.stop_reason = fmt::format("not searched: its default is {:.1f}x the best family's",
                                              *task.default_ms / best_default);
        continue;
      }
      // A family whose default trails the problem's best default needs a gain of that ratio just to matter, which
      // tuning rarely finds: its share shrinks with the cube of the ratio (1.35x behind: 0.41 of the leader's share;
      // 2x: 0.125). With equal shares, a 2-minute AlexNet tune on an H200 gave implicit_gemm 22 candidates on alex2
      // forward beside winograd's 25, though winograd's default was 1.35x faster and a 15-minute tune found winograd
      // 15% faster still.
      const double behind = task.default_ms && *task.default_ms > 0 && best_default > 0
                                ? std::min(1.0, best_default / *task.default_ms)
                                : 1.0;
      task.weight = current * headroom * behind * behind * behind;
    }
  }
}

// The fastest verified configuration of a task goes into the database (and is saved when asked), unless its
// problem has a plan today whose time went unmeasured: an exact entry could then be slower than that plan, and the
// lookup would prefer it.
void TuneRun::store(TaskState& task) {
  TuneTaskResult& r = task.result;
  const ProblemState& problem = problems_[task.problem];
  if (problem.baseline_family && !problem.baseline_ms) {
    const std::string why = "not stored: today's plan for the problem was not measured within the budget";
    if (r.stop_reason.find(why) == std::string::npos) r.stop_reason += (r.stop_reason.empty() ? "" : "; ") + why;
    return;
  }
  r.tried = r.trials.size();
  r.failed = 0;
  for (const TuneTrial& t : r.trials) {
    if (!t.ms) {
      ++r.failed;
    } else if (!r.best_config || *t.ms < r.best_ms) {
      r.best_config = t.config, r.best_ms = *t.ms;
    }
  }
  // Stored after each search round (and at the end): a later round's better configuration replaces the entry an
  // earlier one stored. Keeping only the first round's would lose the second round's gains: a 90 s tune of alex5's
  // backward-filter in 3xtf32 finds 0.390 ms in its first round and 0.360 in its second (0.359 in the second
  // opinion).
  if (!r.best_config || (r.stored && task.stored_config == r.best_config)) return;
  const InsertOutcome outcome = database_.insert(make_tuning_entry(
      info_, r.task.family->name(), r.task.family->kernel_version(), r.task.problem, *r.best_config, r.best_ms));
  // What the database did with the task's first entry (added, or replacing a slower one it had); a later round's
  // replaces only the task's own.
  if (!task.stored_config) r.stored = outcome;
  task.stored_config = r.best_config;
  if (options_.save) database_.save();
}

// The task's space, enumerated now (up to the run's deadline: a space cut short at the task's share would hold only
// the first values of the first parameters, depth first). False, with the task's stop reason, when it holds nothing.
bool TuneRun::enumerate_space(TaskState& task) {
  const Problem& pb = task.result.task.problem;
  status(fmt::format("search space: {} {} {}", task.result.task.name, pb.operation(),
                     task.result.task.family->name()));
  SearchSpace space(*task.result.task.family, pb, info_, [&](const Config& c) { return matches_only(c, options_.only); },
                    SearchSpace::kMaxKept, deadline_);
  task.configs = space.configs();
  task.result.space = space.size();
  task.result.space_partial = space.stopped_early();
  task.result.space_enumerated = true;
  if (!task.configs.empty()) return true;
  task.result.stop_reason = space.stopped_early() ? "not searched: the budget ran out while enumerating its space"
                            : options_.only.empty() ? "not searched: no valid configuration"
                                                    : "not searched: no valid configuration within --only";
  return false;
}

// One task's search for `share` seconds. A second round's search is primed with everything the first measured, so
// it goes on from the first round's best rather than starting over.
void TuneRun::search(size_t index, double share, size_t round) {
  TaskState& task = tasks_[index];
  const Problem& pb = task.result.task.problem;
  if (round == 0 && !enumerate_space(task)) return;
  status(fmt::format("search: {} {} {} ({:.1f} s)", task.result.task.name, pb.operation(),
                     task.result.task.family->name(), share));
  SearcherOptions searcher_options;
  searcher_options.seed = options_.seed + index + round * tasks_.size();
  auto searcher = make_searcher(options_.strategy, task.configs, searcher_options);
  task.evaluator = std::make_unique<CandidateEvaluator>(device_, *task.result.task.family, pb, candidate_options_);
  // The strategy starts from what was measured (today's plan, the default, a first round), and the early abort
  // knows the best.
  // One pass over the space against the measured configurations (a second round knows hundreds, the space holds
  // up to 10,000): each measured configuration primes its first place in the space once.
  std::map<Config, std::optional<double>> known;
  for (const TuneTrial& t : task.result.trials) known.emplace(t.config, t.ms);
  for (size_t i = 0; i < task.configs.size() && !known.empty(); ++i) {
    const auto it = known.find(task.configs[i]);
    if (it == known.end() || searcher->was_proposed(i)) continue;
    searcher->prime(i, it->second);
    if (it->second) task.evaluator->note_best(*it->second);
    known.erase(it);
  }
  std::vector<StopCondition> stops = {StopCondition::after_time(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(share)))};
  // The caps are per task: a second round gets what the first left of them.
  std::optional<size_t> cap;
  if (options_.max_fraction > 0) cap = static_cast<size_t>(std::ceil(options_.max_fraction * task.configs.size()));
  if (options_.max_candidates > 0) cap = std::min(cap.value_or(options_.max_candidates), options_.max_candidates);
  if (cap) {
    if (*cap <= task.searched) return;
    stops.push_back(StopCondition::after_candidates(*cap - task.searched));
  }
  TuneLoopOptions loop;
  // Compiles run ahead on worker threads, but never so far that the run waits for them past its deadline.
  loop.lookahead = jobs_;
  loop.prefetch = [&](const Config& c) {
    if (affordable(program_of(task))) task.evaluator->prefetch(c);
  };
  const auto task_start = Clock::now();
  loop.on_trial = [&](const Trial& trial, const TuneResult& so_far) {
    Evaluation e = trial.ms ? Evaluation(*trial.ms) : Evaluation::failed(trial.failure);
    e.note = trial.note;
    const double wall = std::chrono::duration<double>(trial.wall).count();
    costs_.add(program_of(task), wall);
    task.result.trials.push_back(to_trial(trial.config, e, wall * 1e3));
    double fraction = share > 0 ? seconds_since(task_start) / share : 1;
    if (cap) fraction = std::max(fraction, static_cast<double>(task.searched + so_far.trials.size()) / *cap);
    if (callbacks_.trial_done) callbacks_.trial_done(task.result, task.result.trials.back(), std::min(fraction, 1.0));
  };
  const TuneResult searched = tune_loop(*searcher, StopCondition::any_of(stops),
                                        [&](const Config& c) { return task.evaluator->evaluate(c); }, loop);
  task.result.stop_reason = searched.stop_reason;
  task.searched += searched.trials.size();
  task.evaluator.reset();
  store(task);  // saved now, so an interrupted run keeps what it found
}

// Two rounds. The first shares half the search time by expected gain. The second shares the rest among the tasks
// whose first round gained, in proportion to what they gained (the problem's current time x the fraction the first
// round took off): a search that is still finding speed-ups is worth more time than one that found none. On an
// H200, one round of `--budget 2m` over AlexNet gives every task 2-5 s, and alex2's winograd tasks, still improving
// when their share ends, reach 0.69-0.71 of the speed-up a 15-minute tune finds while the other rows reach
// 0.89-1.04.
void TuneRun::search_rounds() {
  constexpr double kFirstRound = 0.5;
  constexpr double kMinGain = 0.01;  // a first round that took off less than 1% has stopped gaining
  std::vector<size_t> order(tasks_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tasks_[a].weight > tasks_[b].weight; });
  double weight_left = 0;
  for (const TaskState& t : tasks_) weight_left += t.weight;
  std::vector<double> gain_weight(tasks_.size(), 0.0);
  for (size_t index : order) {
    TaskState& task = tasks_[index];
    if (task.weight <= 0) continue;
    // Half of this task's proportional part of what is left, so a task that overran shortens the others' shares
    // and the second round's alike.
    const double share = std::max(0.0, left()) * kFirstRound * task.weight / weight_left;
    weight_left -= task.weight;
    if (!affordable(program_of(task)) || share <= 0) {
      task.result.stop_reason = "not searched: the budget ran out";
      continue;
    }
    const std::optional<double> before = fastest_trial_ms(task);
    search(index, share, 0);
    const std::optional<double> after = fastest_trial_ms(task);
    if (before && after && *after < (1 - kMinGain) * *before) {
      gain_weight[index] = task.weight * (*before - *after) / *before;
    } else {
      std::vector<Config>().swap(task.configs);  // a large space's sample is megabytes: gone once it stops gaining
    }
  }
  double gain_left = 0;
  for (double w : gain_weight) gain_left += w;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return gain_weight[a] > gain_weight[b]; });
  for (size_t index : order) {
    if (gain_weight[index] <= 0) continue;
    const double share = std::max(0.0, left()) * gain_weight[index] / gain_left;
    gain_left -= gain_weight[index];
    if (affordable(program_of(tasks_[index])) && share > 0) search(index, share, 1);
    std::vector<Config>().swap(tasks_[index].configs);
  }
  // Compiles still running for candidates that will not be measured are not waited for in the budget's name: the
  // evaluators go now, each waiting only for its own compiles (bounded by `affordable` above).
  for (TaskState& t : tasks_) t.evaluator.reset();
}

// The baselines and defaults are timed first, all in a row: a build or another job holding the device then (a CPU
// shared with compiles, most often) can make them look up to 2.3x slower than they are, and candidates timed in a
// quiet moment afterwards would replace them although they run slower (a 4-minute tune of the seed layers on the
// CPU, without this, stored fmnist2 forward at 1.3x its default's time). So where a problem's best is not its
// baseline, the two are timed again alternately, twice, and each keeps its fastest time.
void TuneRun::second_opinions() {
  held_back_ = 0;
  for (ProblemState& p : problems_) {
    if (p.baseline_family && p.baseline_ms) second_opinion(p);
  }
}

void TuneRun::second_opinion(ProblemState& p) {
  constexpr int kSecondOpinionRounds = 2;
  TaskState* winner = nullptr;
  Config winner_config;
  double winner_ms = 0;
  for (size_t index : p.tasks) {
    for (const TuneTrial& t : tasks_[index].result.trials) {
      if (t.ms && (!winner || *t.ms < winner_ms)) winner = &tasks_[index], winner_config = t.config, winner_ms = *t.ms;
    }
  }
  if (!winner || (winner->result.task.family == p.baseline_family && winner_config == p.baseline_config)) return;
  // Fresh evaluators of their own, so that the tasks' trials (and the entries stored from them) stay the search's.
  CandidateEvaluator base_eval(device_, *p.baseline_family, p.problem, candidate_options_);
  CandidateEvaluator best_eval(device_, *winner->result.task.family, p.problem, candidate_options_);
  std::vector<std::string> times;
  const std::string base_program = EvaluationCosts::program(*p.baseline_family, p.problem);
  const std::string best_program = program_of(*winner);
  auto timed = [&](CandidateEvaluator& e, const std::string& program, const Config& c) {
    const auto begin = Clock::now();
    const std::optional<double> ms = e.evaluate(c).ms;
    costs_.add(program, seconds_since(begin));
    return ms;
  };
  for (int round = 0; round < kSecondOpinionRounds && affordable(base_program); ++round) {
    status(fmt::format("second opinion: {} ({}/{})", p.problem.to_string(), round + 1, kSecondOpinionRounds));
    const std::optional<double> base = timed(base_eval, base_program, p.baseline_config);
    if (base && *base < *p.baseline_ms) p.baseline_ms = base;
    if (!affordable(best_program)) break;
    const std::optional<double> best = timed(best_eval, best_program, winner_config);
    if (best && (!p.best_retimed || *best < *p.best_retimed)) p.best_retimed = best;
    times.push_back(fmt::format("{} / {}", base ? fmt::format("{:.4g}", *base) : "failed",
                                best ? fmt::format("{:.4g}", *best) : "failed"));
  }
  if (!times.empty()) {
    p.second_opinion = fmt::format("second opinion, today's plan / the best (ms): {}", fmt::join(times, ", "));
  }
}

std::vector<TuneTaskResult> TuneRun::finish() {
  std::vector<TuneTaskResult> results;
  for (ProblemState& p : problems_) {
    double best_tuned = 0;
    for (size_t index : p.tasks) {
      TaskState& task = tasks_[index];
      store(task);
      const TuneTaskResult& r = task.result;
      if (r.trials.empty() && r.stop_reason.empty()) task.result.stop_reason = "not tuned: the budget ran out";
      if (r.best_config && (best_tuned == 0 || r.best_ms < best_tuned)) best_tuned = r.best_ms;
    }
    // The baseline was measured as one of the trials above, so best_tuned <= baseline_ms whenever it ran: the
    // fastest exact entry of the problem is never slower than today's plan. Stated as a check, not assumed. Where the
    // second opinion ran, the search's best time is left out of the comparison: it is the fastest of many timings,
    // luck included (a tune of a small layer on the CPU kept a configuration at 0.154 ms that ran 0.251-0.255 when
    // timed again, beside today's plan at 0.241-0.244), so the best's times of the second opinion stand for it.
    const double best_compared = p.best_retimed ? *p.best_retimed : best_tuned;
    if (!p.second_opinion.empty() && !p.tasks.empty()) {
      std::string& reason = tasks_[p.tasks.front()].result.stop_reason;
      reason += (reason.empty() ? "" : "; ") + p.second_opinion;
    }
    if (p.baseline_ms && p.baseline_family && (best_tuned == 0 || *p.baseline_ms < best_compared)) keep_baseline(p);
    for (size_t index : p.tasks) {
      if (callbacks_.task_done) callbacks_.task_done(tasks_[index].result);
      results.push_back(tasks_[index].result);
    }
  }
  if (options_.save && !results.empty()) database_.save();
  return results;
}

// Today's plan stored as the problem's exact entry, in place of what this run stored for it.
void TuneRun::keep_baseline(ProblemState& p) {
  if (p.best_retimed) {
    // The entries this run stored for the problem carry their searches' luckiest times; those below the plan's,
    // which the lookup would prefer to it, go, and today's plan is the problem's exact entry.
    for (size_t index : p.tasks) {
      TuneTaskResult& r = tasks_[index].result;
      if (!r.stored || !r.best_config || !(r.best_ms < *p.baseline_ms)) continue;
      const std::string family = r.task.family->name();
      const Config config = *r.best_config;
      database_.prune_if([&](const TuningEntry& e) {
        return e.family == family && e.problem == p.problem && e.parameters == config &&
               e.device.fingerprint == info_.fingerprint();
      });
      r.stored.reset();
      r.stop_reason += (r.stop_reason.empty() ? "" : "; ") +
                       std::string("not kept: timed again, it was not faster than today's plan");
    }
  }
  const InsertOutcome outcome =
      database_.insert(make_tuning_entry(info_, p.baseline_family->name(), p.baseline_family->kernel_version(),
                                         p.problem, p.baseline_config, *p.baseline_ms));
  const std::string why = fmt::format("today's plan ({} {:.4g} ms) was faster: stored as the exact entry instead",
                                      p.baseline_family->name(), *p.baseline_ms);
  status(fmt::format("{}: {}", p.problem.to_string(), why));
  // Reported on the problem's first task, so that callers counting stored entries count this one too.
  if (!p.tasks.empty()) {
    TuneTaskResult& first = tasks_[p.tasks.front()].result;
    first.plan_kept = outcome;
    first.stop_reason += (first.stop_reason.empty() ? "" : "; ") + why;
  }
}

}  // namespace

std::vector<TuneTaskResult> tune(Device& device, const std::vector<TuneTask>& all_tasks, TuningDatabase& database,
                                 const TuneOptions& options, const TuneCallbacks& callbacks) {
  check_tune_options(options, database);
  TuneRun run(device, all_tasks, database, options, callbacks);
  run.start_tasks();
  run.measure_baselines();
  run.measure_seeds();
  run.measure_defaults();
  run.shrink_held_back();
  run.weigh_tasks();
  run.search_rounds();
  run.second_opinions();
  return run.finish();
}

}  // namespace convtune
