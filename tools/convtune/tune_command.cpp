// `convtune tune`: searches each layer x direction x kernel family's configuration space on a device within a
// time budget, verifying every candidate, and stores the fastest in the tuning database; logs every candidate.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <thread>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "src/core/atomic_file.h"
#include "src/measure/device_ceilings.h"
#include "convtune/tuning.h"
#include "src/tuner/searcher.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/progress.h"
#include "tools/convtune/report_table.h"
#include "tools/convtune/suite.h"
#include "tools/convtune/output_path.h"
#include "tools/convtune/tune_log.h"

namespace convtune::cli {

namespace {

struct TuneCommandOptions {
  std::string suite;
  std::vector<std::string> layers;
  std::vector<std::string> gemms;
  std::string device = kDefaultDevice;
  std::string family = "all";
  std::string direction = "all";
  std::string math;  // empty: each layer's own (fp32 unless its text says otherwise)
  std::string layout;  // empty: each layer's own
  std::string workspace_limit;  // --workspace-limit's text
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
  bool no_save = false;
  bool no_peak = false;
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

std::string utc_now_compact() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return text;
}

// The library's tune() options from the command's; the checks that need no device or file come first.
TuneOptions tune_library_options(const TuneCommandOptions& opt, double budget_s) {
  TuneOptions options;
  options.budget_seconds = budget_s;
  options.strategy = opt.strategy;
  options.max_fraction = opt.max_fraction;
  options.max_candidates = opt.max_candidates;
  options.warmup = opt.warmup;
  options.repeats = opt.repeats;
  options.abort_factor = opt.abort_factor;
  options.seed = opt.seed;
  options.jobs = opt.jobs;
  options.only = parse_only(opt.only);
  options.skip_tuned = opt.skip_tuned;
  options.save = !opt.no_save;
  options.workspace_limit = workspace_limit_bytes(opt.workspace_limit);
  if (opt.max_fraction < 0 || opt.max_fraction > 1) {
    throw InvalidArgument(fmt::format("--max-fraction={} is invalid: expected a fraction in (0, 1]", opt.max_fraction));
  }
  if (opt.family == "auto") {
    throw InvalidArgument("tune --family auto: tuning searches families, it does not take the plan's choice: give all "
                          "(every family that supports the layer) or one family");
  }
  make_searcher(opt.strategy, {});  // an unknown strategy fails now, listing the known ones
  return options;
}

// The problems to tune, each named by its layer: every convolution in each asked direction, each GEMM once.
std::vector<std::pair<std::string, Problem>> tune_problems(const TuneCommandOptions& opt) {
  std::vector<Layer> layers = select_layers(opt.suite, opt.layers, opt.gemms);
  for (const std::string& note : unscalable_layers(layers, opt.batch_scale)) std::cerr << "tune: " << note << "\n";
  if (!opt.math.empty())
    for (Layer& layer : layers) layer.problem = layer.problem.with_precision(parse_precision(opt.math));
  {
    std::vector<Problem*> problems;
    for (Layer& layer : layers) problems.push_back(&layer.problem);
    apply_layout(problems, opt.layout);
  }
  const std::vector<Direction> directions = parse_directions(opt.direction);
  std::vector<std::pair<std::string, Problem>> problems;
  for (const Layer& layer : layers) {
    const Problem scaled = scale_batch(layer.problem, opt.batch_scale);
    scaled.validate();
    if (scaled.is_gemm()) {
      problems.emplace_back(layer.name, scaled);
    } else {
      for (Direction dir : directions) problems.emplace_back(layer.name, scaled.conv().with_direction(dir));
    }
  }
  return problems;
}

// --device cuda:0,cuda:1: the tasks are spread over several alike devices (tune_devices), one database.
// `device_ids` gets their ids, comma-separated.
std::vector<Device*> tune_choose_devices(const std::string& spec_list, std::string& device_ids) {
  std::vector<Device*> devices;
  for (size_t pos = 0; pos <= spec_list.size();) {
    const size_t comma = std::min(spec_list.find(',', pos), spec_list.size());
    const std::string spec = spec_list.substr(pos, comma - pos);
    if (spec.empty()) {
      throw InvalidArgument(fmt::format("--device '{}': empty device name: expected a device or a comma-separated "
                                        "list such as cuda:0,cuda:1", spec_list));
    }
    devices.push_back(&choose_device(spec, "tune"));
    device_ids += (device_ids.empty() ? "" : ",") + devices.back()->info().id;
    pos = comma + 1;
  }
  return devices;
}

// Where the results go is checked now, not after the tuning: a mistyped folder, a read-only or full disk.
// Only convtune's default locations are created.
// The database's stale temporaries are removed by its save(), under the lock no live writer can be without.
void tune_prepare_outputs(const TuneCommandOptions& opt, const std::filesystem::path& db_path,
                          const std::filesystem::path& log_path) {
  // Messages name where the path came from: the option given, the variable set, or the default.
  const char* const db_from = !opt.db.empty() ? "--db"
                              : std::getenv("CONVTUNE_TUNING_DB") && *std::getenv("CONVTUNE_TUNING_DB")
                                  ? "CONVTUNE_TUNING_DB"
                                  : "the default tuning database";
  if (!opt.no_save) prepare_output(db_path, opt.db.empty(), db_from, database_write_bytes(db_path), false);
  prepare_output(log_path, opt.log.empty(), opt.log.empty() ? "the tune log (beside the database; --log to choose)"
                                                            : "--log", 1 << 20);
}

// With --skip-tuned: how many tasks already have a current exact entry in the database, each named on stderr.
size_t tune_count_already_tuned(const std::vector<TuneTask>& tasks, const TuningDatabase& database,
                                const DeviceInfo& info) {
  size_t already_tuned = 0;
  for (const TuneTask& t : tasks) {
    const LookupResult found = database.lookup(t.problem, info, {{t.family->name(), t.family->kernel_version()}});
    if (found.tier == LookupTier::Exact) {
      ++already_tuned;
      std::cerr << fmt::format("  skipped (already tuned) {} {} {}: {:.3f} ms\n", t.name, t.problem.operation(),
                               t.family->name(), found.entry->time_ms);
    }
  }
  return already_tuned;
}

// The device's FP32 peak and copy bandwidth into the log's metadata for the report, and the peak into `options`.
void tune_measure_peak(Device& device, TuneLog& log, TuneOptions& options) {
  std::cerr << fmt::format("tune: measuring {}'s FP32 peak for the report ...\n", device.info().id);
  CeilingOptions ceiling_options;
  ceiling_options.buffer_bytes = 64u << 20;
  ceiling_options.repeats = 3;
  const Ceilings ceilings = measure_ceilings(device, ceiling_options);
  log.metadata["peak_gflops"] = ceilings.fma_gflops;
  options.peak_gflops = ceilings.fma_gflops;
  log.metadata["copy_gbs"] = ceilings.copy_gbs;
}

// The closing table's columns, one row per task.
std::vector<TableColumn> tune_columns() {
  return {{"layer", 0},
          {"dir", 0},
          {"family", 0},
          {"space", 3},
          {"tried", 2},
          {"failed", 3},
          {"default ms", 2},
          {"best ms", 0},
          {"GFLOP/s", 1},
          {"speedup", 1},
          {"best parameters", 4},
          {"note", 5}};
}

// A finished task's line of the tune log.
TaskSummary tune_task_summary(const TuneTaskResult& r) {
  TaskSummary summary{r.task.name, r.task.problem, r.task.family->name(), r.space};
  summary.tried = r.tried;
  summary.failed = r.failed;
  summary.default_ms = r.default_ms;
  summary.stop_reason = r.stop_reason;
  if (r.best_config) summary.best_ms = r.best_ms, summary.best_config = *r.best_config;
  return summary;
}

// A finished task's row of the closing table, with its record for the table's data.
void tune_add_task_row(ReportTable& table, const TuneTaskResult& r) {
  const double gflops = r.best_config ? r.task.problem.flops() / (r.best_ms * 1e6) : 0;
  nlohmann::ordered_json record = {{"layer", r.task.name},
                           {"direction", std::string(r.task.problem.operation())},
                           {"problem", r.task.problem.to_string()},
                           {"family", r.task.family->name()},
                           {"space", r.space},
                           {"space_partial", r.space_partial},
                           {"tried", r.tried},
                           {"failed", r.failed},
                           {"default_ms", r.default_ms > 0 ? nlohmann::ordered_json(r.default_ms) : nlohmann::ordered_json()},
                           {"best_ms", r.best_config ? nlohmann::ordered_json(r.best_ms) : nlohmann::ordered_json()},
                           {"best_gflops", r.best_config ? nlohmann::ordered_json(gflops) : nlohmann::ordered_json()},
                           {"best_config", r.best_config ? to_string(*r.best_config) : ""},
                           {"stop_reason", r.stop_reason}};
  table.add_row({r.task.name, std::string(r.task.problem.operation()), r.task.family->name(),
                 // ">= N": the budget ran out while the space was being enumerated; "-": its search never started.
                 !r.space_enumerated ? std::string("-") : (r.space_partial ? ">=" : "") + std::to_string(r.space), std::to_string(r.tried),
                 std::to_string(r.failed),
                 r.default_ms > 0 ? fmt::format("{:.3f}", r.default_ms) : "-",
                 r.best_config ? fmt::format("{:.3f}", r.best_ms) : "-",
                 r.best_config ? fmt::format("{:.4g}", gflops) : "-",
                 r.best_config && r.default_ms > 0 ? fmt::format("{:.2f}x", r.default_ms / r.best_ms) : "-",
                 r.best_config ? to_string(*r.best_config) : "-", r.stop_reason},
                record);
}

// One progress line for the whole run, against the budget: the run's phases interleave the tasks.
struct TuneProgressLine {
  TuneProgressLine(std::chrono::steady_clock::time_point start, double budget)
      : command_start(start), budget_s(budget) {}
  void redraw() {
    const double fraction = std::chrono::duration<double>(std::chrono::steady_clock::now() - command_start).count() /
                            budget_s;
    progress.update(static_cast<int64_t>(std::clamp(fraction, 0.0, 1.0) * 1000),
                    fmt::format("{} candidates, {} failed; {}", candidates, failures, doing));
  }
  std::chrono::steady_clock::time_point command_start;
  double budget_s;
  Progress progress{"tune", 1000};
  std::string doing = "starting";
  size_t candidates = 0, failures = 0;
};

// The tuner's callbacks: every trial and task into the log, every task into the table and `stored`, and the
// progress line redrawn as the tuner's status and trials come.
TuneCallbacks tune_callbacks(TuneProgressLine& line, TuneLog& log, ReportTable& table, size_t& stored) {
  TuneCallbacks callbacks;
  callbacks.status = [&line](const std::string& text) {
    line.doing = text;
    line.redraw();
  };
  callbacks.trial_done = [&line, &log](const TuneTaskResult& so_far, const TuneTrial& trial, double) {
    TaskSummary summary{so_far.task.name, so_far.task.problem, so_far.task.family->name(), so_far.space};
    log.add_trial(summary, trial);
    ++line.candidates;
    line.failures += !trial.ms;
    line.redraw();
  };
  callbacks.task_done = [&log, &table, &stored](const TuneTaskResult& r) {
    stored += r.stored && *r.stored != InsertOutcome::KeptExisting;
    stored += r.plan_kept && *r.plan_kept != InsertOutcome::KeptExisting;  // today's plan, faster than the tuned ones
    log.add_task(tune_task_summary(r));
    tune_add_task_row(table, r);
  };
  return callbacks;
}

// The command line over the library's tune(): options, the log, progress lines and the closing table.
void run_tune(const TuneCommandOptions& opt) {
  const auto command_start = std::chrono::steady_clock::now();
  const double budget_s = parse_duration_seconds(opt.budget);
  TuneOptions options = tune_library_options(opt, budget_s);
  const std::vector<std::pair<std::string, Problem>> problems = tune_problems(opt);

  std::string device_ids;
  const std::vector<Device*> devices = tune_choose_devices(opt.device, device_ids);
  Device& device = *devices.front();
  const DeviceInfo& info = device.info();

  // The database first: a damaged one stops the run before any time is spent, and is never overwritten.
  const std::filesystem::path db_path =
      opt.db.empty() ? TuningDatabase::default_user_file() : std::filesystem::path(opt.db);
  // The shipped entries too: the tuner's baselines are today's plans as bench, train and the library make them
  // (shipped tuning included), so the never-worse rule compares with what users run. With the user file alone, a
  // layer whose plan came from a shipped entry got a slower tuned entry stored over it (H100, 3xtf32: alex2 forward
  // from fft's 0.51 ms to implicit_gemm_wgmma's 1.16 ms). Only the user file is written.
  TuningDatabase database = TuningDatabase::open_for_lookups(db_path, shipped_tuning_dir());
  if (const std::string refusal = database.save_refusal(); !refusal.empty() && !opt.no_save) {
    throw Error(fmt::format("{}; fix or move it, tune with --db OTHER_FILE, or --no-save", refusal));
  }
  const std::filesystem::path log_path =
      !opt.log.empty() ? std::filesystem::path(opt.log)
                       : db_path.parent_path() / "logs" / fmt::format("tune-{}.json", utc_now_compact());
  tune_prepare_outputs(opt, db_path, log_path);

  std::vector<std::string> skipped;
  // Families and configurations over the workspace limit are left out of the tasks and the searches alike.
  const std::vector<TuneTask> tasks =
      make_tune_tasks(with_workspace_limit(info, options.workspace_limit), problems, opt.family, &skipped);
  if (tasks.empty()) throw Unsupported("no kernel family supports any of the requested layers on " + info.id);
  const size_t already_tuned = opt.skip_tuned ? tune_count_already_tuned(tasks, database, info) : 0;
  if (opt.skip_tuned && already_tuned == tasks.size()) {
    std::cout << fmt::format("nothing to tune: all {} task(s) already have a current entry in {} (--skip-tuned)\n",
                             already_tuned, db_path.string());
    return;
  }

  TuneLog log(log_path);
  log.metadata = {{"device", info.name},       {"device_id", device_ids},      {"driver", info.driver_version},
                  {"fingerprint", info.fingerprint()}, {"strategy", opt.strategy}, {"budget_s", budget_s},
                  {"batch_scale", opt.batch_scale},    {"repeats", opt.repeats},   {"command", opt.command_line},
                  {"date", utc_date_now()},            {"convtune", version_text()}};
  if (!opt.no_peak && info.can_run_kernels) tune_measure_peak(device, log, options);
  // Two lines rather than one of 150 characters or more: the paths are long.
  std::cerr << fmt::format("tune: {} task(s) (layer x direction x family) on {} ({}), strategy {}, budget {} in all\n"
                           "tune: database {}; log {}\n",
                           tasks.size() - already_tuned, device_ids, info.name, opt.strategy,
                           format_duration(budget_s), db_path.string(), log_path.string());
  for (const auto& s : skipped) std::cerr << "  skipped (unsupported) " << s << "\n";

  ReportTable table(tune_columns());
  size_t stored = 0;
  TuneProgressLine line(command_start, budget_s);
  const TuneCallbacks callbacks = tune_callbacks(line, log, table, stored);
  // The budget is for the whole command: what went before (the peak, loading) is taken from it.
  options.budget_seconds = budget_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - command_start).count();
  if (options.budget_seconds <= 0) throw Error(fmt::format("the budget of {} was spent before tuning started (measuring the peak): "
                                                           "give a larger --budget or --no-peak", format_duration(budget_s)));
  tune_devices(devices, tasks, database, options, callbacks);
  line.progress.finish(fmt::format("{} candidates, {} failed", line.candidates, line.failures));
  log.save();
  std::cout << fmt::format("device: {} ({}), strategy {}, {} in all\n", device_ids, info.name, opt.strategy,
                           format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - command_start).count()));
  table.print(std::cout, table_width());
  std::cout << fmt::format("{} result(s) stored in {}{}\nlog of every candidate: {}\n", stored, db_path.string(),
                           !opt.no_save ? "" : " (not saved: --no-save)", log_path.string());
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto opt = std::make_shared<TuneCommandOptions>();
  auto* cmd = app.add_subcommand("tune", "Search kernel parameters per layer and direction; store the best");
  add_problem_options(cmd, opt->suite, opt->layers, opt->gemms);
  add_device_option(cmd, opt->device, "; a comma-separated list of alike devices (cuda:0,cuda:1) shares the tasks "
                                      "among them");
  add_family_option(cmd, opt->family, "all (every family that supports the layer)");
  add_direction_option(cmd, opt->direction);
  add_math_option(cmd, opt->math, "; entries are stored under it");
  add_layout_option(cmd, opt->layout);
  add_workspace_limit_option(cmd, opt->workspace_limit);
  cmd->add_option("--strategy", opt->strategy, "exhaustive, random, annealing or model")->capture_default_str();
  cmd->add_option("--budget", opt->budget, "Wall time for the whole run (60s, 2m, 500ms), shared evenly by the tasks")
      ->capture_default_str();
  cmd->add_option("--max-fraction", opt->max_fraction, "Also stop each task after this fraction of its space");
  cmd->add_option("--max-candidates", opt->max_candidates, "Also stop each task after this many candidates");
  add_batch_scale_option(cmd, opt->batch_scale);
  add_timing_options(cmd, opt->warmup, opt->repeats, "each candidate");
  cmd->add_option("--abort-factor", opt->abort_factor,
                  "Stop timing a candidate whose first run is this many times the best (0: never)")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "Seed of the random, annealing and model strategies")->capture_default_str();
  cmd->add_option("--jobs", opt->jobs, "Candidates compiled ahead on worker threads (default: cores - 1, at most 8)")
      ->check(non_negative_integer());
  cmd->add_flag("--skip-tuned", opt->skip_tuned,
                "Leave out tasks the database already holds a current exact entry for (resumes an interrupted run)");
  cmd->add_option("--log", opt->log, "Log of every candidate, FILE.json or FILE.csv (default: next to the database)");
  add_db_option(cmd, opt->db);
  cmd->add_option("--only", opt->only, "Search only configurations with these values, e.g. SPLIT_K=1,TILE_K=8/16");
  cmd->add_flag("--no-save", opt->no_save, "Do not write results to the database");
  cmd->add_flag("--no-peak", opt->no_peak, "Skip measuring the FP32 peak (the report then needs --peak)");
  cmd->callback([opt, cmd] {
    refuse_inapplicable(cmd, "--seed", opt->strategy != "exhaustive",
                        "seeds the random, annealing and model strategies; --strategy exhaustive draws nothing");
    opt->command_line = command_line();
    run_tune(*opt);
  });
}

}  // namespace convtune::cli
