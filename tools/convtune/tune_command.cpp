// `convtune tune`: searches each layer x direction x kernel family's configuration space on a device within a
// time budget, verifying every candidate, and stores the fastest in the tuning database; logs every candidate.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <thread>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/kernel_family.h"
#include "src/core/atomic_file.h"
#include "src/measure/device_ceilings.h"
#include "src/tuner/candidate_evaluator.h"
#include "src/tuner/search_space.h"
#include "src/tuner/searcher.h"
#include "src/tuning_db/tuning_database.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/progress.h"
#include "tools/convtune/report_table.h"
#include "tools/convtune/suite.h"
#include "tools/convtune/output_path.h"
#include "tools/convtune/tune_log.h"

namespace convtune::cli {

namespace {

struct TuneOptions {
  std::string suite;
  std::vector<std::string> layers;
  std::string device = "best";
  std::string family = "all";
  std::string direction = "all";
  std::string strategy = "annealing";
  std::string budget = "60s";
  double max_fraction = 0;
  size_t max_candidates = 0;
  double batch_scale = 1.0;
  int warmup = 1;
  int repeats = 5;
  double abort_factor = 1.5;
  uint64_t seed = 1;
  int jobs = 0;
  std::string log;
  std::string db;
  std::string only;  // "NAME=v1/v2,NAME2=v": search only configurations with these values
  bool save = true;
  bool peak = true;
  bool skip_tuned = false;
  std::string command_line;
};

// "60s", "2m", "500ms", "1.5s", "1h"; a bare number is seconds.
double parse_duration_seconds(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(std::min(used, text.size()));
  double scale = -1;
  if (used > 0) {
    if (unit.empty() || unit == "s") scale = 1;
    else if (unit == "ms") scale = 1e-3;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h") scale = 3600;
  }
  if (scale < 0 || !(value > 0) || !std::isfinite(value)) {
    throw InvalidArgument(fmt::format("--budget='{}' is invalid: expected a positive duration like 60s, 2m or 500ms",
                                      text));
  }
  return value * scale;
}

// --only "TILE_K=8/16,SPLIT_K=1": each named parameter restricted to the listed values.
std::map<std::string, std::vector<int64_t>> parse_only(const std::string& text) {
  std::map<std::string, std::vector<int64_t>> only;
  if (text.empty()) return only;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw InvalidArgument(fmt::format("--only '{}': expected NAME=VALUE[/VALUE...], got '{}'", text, item));
    }
    auto& values = only[item.substr(0, eq)];
    size_t vpos = eq + 1;
    while (vpos <= item.size()) {
      const size_t slash = std::min(item.find('/', vpos), item.size());
      const std::string value = item.substr(vpos, slash - vpos);
      try {
        size_t used = 0;
        values.push_back(std::stoll(value, &used));
        if (used != value.size()) throw std::invalid_argument(value);
      } catch (const std::exception&) {
        throw InvalidArgument(fmt::format("--only '{}': {}='{}' is not an integer", text, item.substr(0, eq), value));
      }
      vpos = slash + 1;
    }
  }
  return only;
}

struct Task {
  Layer layer;
  ConvProblem problem;
  const KernelFamily* family;
};

std::string utc_now_compact() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return text;
}

void run_tune(const TuneOptions& opt) {
  const double budget_s = parse_duration_seconds(opt.budget);
  if (opt.max_fraction < 0 || opt.max_fraction > 1) {
    throw InvalidArgument(fmt::format("--max-fraction={} is invalid: expected a fraction in (0, 1]", opt.max_fraction));
  }
  if (opt.repeats < 1) throw InvalidArgument(fmt::format("--repeats={} is invalid: expected 1 or more", opt.repeats));
  make_searcher(opt.strategy, {});  // an unknown strategy fails now, listing the known ones
  const std::vector<Layer> layers = select_layers(opt.suite, opt.layers);
  const std::vector<Direction> directions = parse_directions(opt.direction);
  for (const Layer& layer : layers) scale_batch(layer.problem, opt.batch_scale).validate();

  Device& device = choose_device(opt.device, "tune");
  const DeviceInfo& info = device.info();
  if (!info.can_run_kernels) {
    throw InvalidArgument(fmt::format("tune needs a device that compiles kernels (OpenCL or CUDA); {} ({}) has "
                                      "nothing to tune: {}", info.id, info.name, info.cannot_run_reason));
  }

  // The database first: a damaged one stops the run before any time is spent, and is never overwritten.
  const std::filesystem::path db_path =
      opt.db.empty() ? TuningDatabase::default_user_file() : std::filesystem::path(opt.db);
  TuningDatabase database(db_path);
  if (!database.user_file_error().empty() && opt.save) {
    throw Error(fmt::format("{}; fix or move it, tune with --db OTHER_FILE, or --no-save", database.user_file_error()));
  }
  const std::filesystem::path log_path =
      !opt.log.empty() ? std::filesystem::path(opt.log)
                       : db_path.parent_path() / "logs" / fmt::format("tune-{}.json", utc_now_compact());
  // Where the results go is checked now, not after the tuning: a mistyped folder, a read-only or full disk.
  // Only convtune's default locations are created.
  // The database's stale temporaries are removed by its save(), under the lock no live writer can be without.
  if (opt.save) prepare_output(db_path, opt.db.empty(), "--db", database_write_bytes(db_path), false);
  prepare_output(log_path, opt.log.empty(), "--log", 1 << 20);

  std::vector<Task> tasks;
  std::vector<std::string> skipped, already_tuned;
  for (const Layer& layer : layers) {
    for (Direction dir : directions) {
      const ConvProblem pb = scale_batch(layer.problem, opt.batch_scale).with_direction(dir);
      for (const auto& f : kernel_families()) {
        if (opt.family != "all" && opt.family != "auto" && f->name() != opt.family) continue;
        if (const std::string why = f->unsupported_reason(pb, {}, info); !why.empty()) {
          skipped.push_back(fmt::format("{} {} {}: {}", layer.name, to_string(dir), f->name(), why));
          continue;
        }
        // A current exact entry for this device means the task was tuned before (an interrupted run, a suite
        // that grew): with --skip-tuned it is left as it is.
        if (opt.skip_tuned) {
          const LookupResult found = database.lookup(pb, info, {{f->name(), kernel_source_hash(*f, pb, info)}});
          if (found.tier == LookupTier::Exact) {
            already_tuned.push_back(fmt::format("{} {} {}: {:.3f} ms", layer.name, to_string(dir), f->name(),
                                                found.entry->time_ms));
            continue;
          }
        }
        tasks.push_back({layer, pb, f.get()});
      }
    }
  }
  if (opt.family != "all" && opt.family != "auto") kernel_family(opt.family);  // unknown names list the known ones
  const auto only = parse_only(opt.only);
  auto matches_only = [&only](const Config& c) {
    for (const auto& [name, values] : only) {
      const auto it = c.find(name);
      if (it == c.end() || std::find(values.begin(), values.end(), it->second) == values.end()) return false;
    }
    return true;
  };
  if (tasks.empty() && !already_tuned.empty()) {
    std::cout << fmt::format("nothing to tune: all {} task(s) already have a current entry in {} (--skip-tuned)\n",
                             already_tuned.size(), db_path.string());
    return;
  }
  if (tasks.empty()) throw Unsupported("no kernel family supports any of the requested layers on " + info.id);

  TuneLog log(log_path);
  log.metadata = {{"device", info.name},       {"device_id", info.id},      {"driver", info.driver_version},
                  {"fingerprint", info.fingerprint()}, {"strategy", opt.strategy}, {"budget_s", budget_s},
                  {"batch_scale", opt.batch_scale},    {"repeats", opt.repeats},   {"command", opt.command_line},
                  {"date", utc_date_now()}};
  if (opt.peak) {
    std::cerr << fmt::format("tune: measuring {}'s FP32 peak for the report ...\n", info.id);
    CeilingOptions ceiling_options;
    ceiling_options.buffer_bytes = 64u << 20;
    ceiling_options.repeats = 3;
    const Ceilings ceilings = measure_ceilings(device, ceiling_options);
    log.metadata["peak_gflops"] = ceilings.fma_gflops;
    log.metadata["copy_gbs"] = ceilings.copy_gbs;
  }
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t jobs = opt.jobs > 0 ? static_cast<size_t>(opt.jobs) : std::clamp<size_t>(hardware - 1, 1, 8);
  std::cerr << fmt::format("tune: {} task(s) (layer x direction x family) on {} ({}), strategy {}, budget {} in all, "
                           "{} compile thread(s); database {}; log {}\n",
                           tasks.size(), info.id, info.name, opt.strategy, format_duration(budget_s), jobs,
                           db_path.string(), log_path.string());
  for (const auto& s : skipped) std::cerr << "  skipped (unsupported) " << s << "\n";
  for (const auto& s : already_tuned) std::cerr << "  skipped (already tuned) " << s << "\n";

  ReportTable table({"layer", "dir", "family", "space", "tried", "failed", "default ms", "best ms", "GFLOP/s",
                     "speedup", "best parameters"});
  const auto run_start = std::chrono::steady_clock::now();
  size_t stored = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const Task& task = tasks[t];
    const ConvProblem& pb = task.problem;
    const KernelFamily& family = *task.family;
    // Each task gets an even share of what is left, so time a fast task leaves unused goes to the later ones.
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    const double task_budget = std::max(0.0, budget_s - spent) / static_cast<double>(tasks.size() - t);
    const std::string label = fmt::format("[{}/{}] {} {} {}", t + 1, tasks.size(), task.layer.name,
                                          to_string(pb.direction), family.name());
    const SearchSpace full_space(family, pb, info);
    std::vector<Config> configs;
    for (const Config& c : full_space.configs())
      if (matches_only(c)) configs.push_back(c);
    TaskSummary summary{task.layer.name, pb, family.name(), configs.size()};
    if (!only.empty()) {
      std::cerr << fmt::format("{}: {} of {} valid configurations match --only\n", label, configs.size(), full_space.size());
    }
    if (configs.size() == 0) {
      std::cerr << label << ": no valid configuration on this device\n";
      log.add_task(summary);
      continue;
    }
    CandidateOptions candidate_options;
    candidate_options.warmup = opt.warmup;
    candidate_options.repeats = opt.repeats;
    candidate_options.abort_factor = opt.abort_factor;
    const auto task_clock = std::chrono::steady_clock::now();
    CandidateEvaluator evaluator(device, family, pb, candidate_options);

    // The built-in default first: the baseline every tuned result is compared with, and the first best.
    // With --only it is measured only when it lies inside the restricted space, so a strategy's result there is
    // what the strategy found.
    const Config default_config = family.default_config(pb, info);
    const bool default_inside = matches_only(default_config);
    Evaluation baseline = Evaluation::failed("outside --only: not measured");
    if (default_inside) {
      baseline = evaluator.evaluate(default_config);
      log.add_trial(summary, Trial{0, default_config, baseline.ms, baseline.failure, "built-in default", {}});
    }
    if (baseline.ms) summary.default_ms = *baseline.ms;

    SearcherOptions searcher_options;
    searcher_options.seed = opt.seed + t;
    auto searcher = make_searcher(opt.strategy, configs, searcher_options);
    // The default's evaluation (compile included) already used part of the share; a run over budget still
    // measures the default of every task, so each gets a baseline and an entry.
    const double left = task_budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - task_clock).count();
    std::vector<StopCondition> stops = {StopCondition::after_time(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(std::max(left, 1e-3))))};
    if (opt.max_fraction > 0) stops.push_back(StopCondition::after_fraction(opt.max_fraction));
    if (opt.max_candidates > 0) stops.push_back(StopCondition::after_candidates(opt.max_candidates));
    const StopCondition stop = StopCondition::any_of(stops);

    Progress progress(label, 1000);
    TuneLoopOptions loop;
    loop.lookahead = jobs;
    loop.prefetch = [&](const Config& c) { evaluator.prefetch(c); };
    const auto task_start = std::chrono::steady_clock::now();
    loop.on_trial = [&](const Trial& trial, const TuneResult& so_far) {
      log.add_trial(summary, trial);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - task_start).count();
      double fraction = task_budget > 0 ? elapsed / task_budget : 1;
      if (opt.max_fraction > 0)
        fraction = std::max(fraction, so_far.trials.size() / std::ceil(opt.max_fraction * configs.size()));
      if (opt.max_candidates > 0)
        fraction = std::max(fraction, static_cast<double>(so_far.trials.size()) / opt.max_candidates);
      fraction = std::max(fraction, static_cast<double>(so_far.trials.size()) / configs.size());
      const double best = evaluator.best_ms();
      progress.update(static_cast<int64_t>(fraction * 1000),
                      fmt::format("{} tried, {} failed, best {}", so_far.trials.size(), so_far.failures(),
                                  best > 0 ? fmt::format("{:.3f} ms ({:.0f} GFLOP/s)", best, pb.flops() / (best * 1e6))
                                           : std::string("-")));
    };
    TuneResult result;
    if (left > 0) {
      result = tune_loop(*searcher, stop, [&](const Config& c) { return evaluator.evaluate(c); }, loop);
    } else {
      result.stop_reason = "its share of the budget went to the built-in default";
    }

    summary.tried = result.trials.size() + (default_inside ? 1 : 0);
    summary.failed = result.failures() + (default_inside && !baseline.ms ? 1 : 0);
    summary.stop_reason = result.stop_reason;
    // The winner is the fastest verified candidate, the default included.
    std::optional<Config> best_config;
    double best_ms = 0;
    if (baseline.ms) best_config = default_config, best_ms = *baseline.ms;
    if (result.found() && (!best_config || result.best_ms < best_ms)) best_config = result.best_config, best_ms = result.best_ms;
    if (best_config) {
      summary.best_ms = best_ms;
      summary.best_config = *best_config;
      const InsertOutcome outcome = database.insert(
          make_tuning_entry(info, family.name(), kernel_source_hash(family, pb, info), pb, *best_config, best_ms));
      stored += outcome != InsertOutcome::KeptExisting;
      if (opt.save) database.save();  // after every task, so an interrupted run keeps what it found
    }
    progress.finish(fmt::format("{} tried, {} failed, best {} ({})", summary.tried, summary.failed,
                                best_config ? fmt::format("{:.3f} ms", best_ms) : std::string("none"),
                                result.stop_reason));
    log.add_task(summary);
    log.save();
    const double gflops = best_config ? pb.flops() / (best_ms * 1e6) : 0;
    table.add_row({task.layer.name, std::string(to_string(pb.direction)), family.name(), std::to_string(configs.size()),
                   std::to_string(summary.tried), std::to_string(summary.failed),
                   summary.default_ms > 0 ? fmt::format("{:.3f}", summary.default_ms) : default_inside ? "failed" : "-",
                   best_config ? fmt::format("{:.3f}", best_ms) : "-", best_config ? fmt::format("{:.1f}", gflops) : "-",
                   best_config && summary.default_ms > 0 ? fmt::format("{:.2f}x", summary.default_ms / best_ms) : "-",
                   best_config ? to_string(*best_config) : "-"},
                  {});
  }
  log.save();
  std::cout << fmt::format("device: {} ({}), strategy {}, {} in all\n", info.id, info.name, opt.strategy,
                           format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count()));
  table.print(std::cout);
  std::cout << fmt::format("{} result(s) stored in {}{}\nlog of every candidate: {}\n", stored, db_path.string(),
                           opt.save ? "" : " (not saved: --no-save)", log_path.string());
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto opt = std::make_shared<TuneOptions>();
  auto* cmd = app.add_subcommand("tune", "Search kernel parameters per layer and direction; store the best");
  cmd->add_option("--suite", opt->suite, "Suite name (alexnet, seeds) or path of a suite file");
  cmd->add_option("--layer", opt->layers, "One layer, e.g. N=128,C=64,H=27,K=192,R=5,pad=2; repeatable");
  cmd->add_option("--backend,--device", opt->device, "Device: opencl[:N], cuda[:N] or best")->capture_default_str();
  cmd->add_option("--family", opt->family, "Kernel family to tune, or all that support the layer")->capture_default_str();
  cmd->add_option("--direction", opt->direction, "fwd, bwd-data, bwd-filter or all")->capture_default_str();
  cmd->add_option("--strategy", opt->strategy, "exhaustive, random, annealing or model")->capture_default_str();
  cmd->add_option("--budget", opt->budget, "Wall time for the whole run (60s, 2m, 500ms), shared evenly by the tasks")
      ->capture_default_str();
  cmd->add_option("--max-fraction", opt->max_fraction, "Also stop each task after this fraction of its space");
  cmd->add_option("--max-candidates", opt->max_candidates, "Also stop each task after this many candidates");
  cmd->add_option("--batch-scale", opt->batch_scale, "Multiply every layer's N by this (at least 1 remains)")
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "Untimed runs before timing each candidate")->capture_default_str();
  cmd->add_option("--repeats", opt->repeats, "Timed runs per candidate; the median counts")->capture_default_str();
  cmd->add_option("--abort-factor", opt->abort_factor,
                  "Stop timing a candidate whose first run is this many times the best (0: never)")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "Seed of the random, annealing and model strategies")->capture_default_str();
  cmd->add_option("--jobs", opt->jobs, "Candidates compiled ahead on worker threads (default: cores - 1, at most 8)");
  cmd->add_flag("--skip-tuned", opt->skip_tuned,
                "Leave out tasks the database already holds a current exact entry for (resumes an interrupted run)");
  cmd->add_option("--log", opt->log, "Log of every candidate, FILE.json or FILE.csv (default: next to the database)");
  cmd->add_option("--db", opt->db, "Tuning database file (default: $CONVTUNE_TUNING_DB or ~/.local/share/convtune/tuning.json)");
  cmd->add_option("--only", opt->only, "Search only configurations with these values, e.g. SPLIT_K=1,TILE_K=8/16");
  cmd->add_flag("!--no-save", opt->save, "Do not write results to the database");
  cmd->add_flag("!--no-peak", opt->peak, "Skip measuring the FP32 peak (the report then needs --peak)");
  cmd->callback([opt] {
    opt->command_line = command_line();
    run_tune(*opt);
  });
}

}  // namespace convtune::cli
