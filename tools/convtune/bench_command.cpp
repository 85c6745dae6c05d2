// `convtune bench`: times a suite or single layers on a device, all directions, with a correctness check
// against the reference first; prints ms, GFLOP/s, GB/s and writes CSV/JSON/Markdown with --out.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "src/core/atomic_file.h"
#include "src/measure/cpu_ceilings.h"
#include "src/measure/device_ceilings.h"
#include "tools/convtune/against.h"
#include "src/harness/implementation.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/output_path.h"
#include "tools/convtune/progress.h"
#include "tools/convtune/report_table.h"
#include "tools/convtune/suite.h"

namespace convtune::cli {

namespace {

struct BenchOptions {
  std::string suite;
  std::vector<std::string> layers;
  std::vector<std::string> gemms;
  std::string device = kDefaultDevice;
  std::string algorithm = "auto";
  std::string family = "auto";
  std::string config;
  std::string direction = "all";
  double batch_scale = 1.0;
  int warmup = 1;
  int repeats = 5;
  bool no_verify = false;
  bool samples = false;  // every timed run in the JSON rows
  std::vector<std::string> out;  // .csv, .json and/or .md files
  std::vector<std::string> against;  // reference libraries to run beside convtune
  std::string math;  // empty: each row's own; the reference libraries then run fp32
  std::string layout;  // empty: each row's own
  std::string markdown;
  std::string workspace_limit;  // --workspace-limit's text
  Precision against_precision() const { return parse_precision(math.empty() ? "fp32" : math); }
};

// "H" when both axes agree, else "HxW": a stride of 2x1 must not print as 2.
std::string both_axes(int64_t h, int64_t w) { return h == w ? std::to_string(h) : fmt::format("{}x{}", h, w); }

std::string shape_text(const ConvProblem& p) {
  std::string s = fmt::format("{}->{} {}x{} {}x{}/s{}/p{}", p.c, p.k, p.h, p.w, p.r, p.s, both_axes(p.stride.h, p.stride.w),
                              both_axes(p.pad.h, p.pad.w));
  if (p.dilation.h > 1 || p.dilation.w > 1) s += "/d" + both_axes(p.dilation.h, p.dilation.w);
  if (p.groups > 1) s += fmt::format("/g{}", p.groups);
  return s;
}

// What bench runs for a row: a family (empty: the plan's own choice) and optional parameters.
struct Target {
  std::string family;
  std::optional<Config> config;
  std::string label() const {
    if (family.empty()) return "auto";
    return config ? fmt::format("{}[{}]", family, to_string(*config)) : family;
  }
};

// The CPU backend's paths by --algorithm: auto (the plan's choice, empty family: cpu_blocked for convolutions
// unless tuning data says otherwise), blocked (cpu_blocked, its tuned or default parameters), and the baselines
// under their old names: threaded and sequential (cpu_direct/cpu_gemm on every core or one: seed 000's plain
// loops) and reference (the float64 oracle). cpu_blocked computes convolutions only: a matrix product row of
// `blocked` runs cpu_gemm on every core.
Target cpu_algorithm_target(const std::string& algorithm, Problem::Kind kind) {
  const bool gemm = kind == Problem::Kind::Gemm;
  if (algorithm == "auto") return {};
  if (algorithm == "blocked") return gemm ? Target{"cpu_gemm", Config{{"THREADS", 0}}} : Target{"cpu_blocked", {}};
  if (algorithm == "reference") return {"cpu_reference", Config{}};
  if (algorithm == "sequential" || algorithm == "threaded") {
    return {gemm ? "cpu_gemm" : "cpu_direct", Config{{"THREADS", algorithm == "sequential" ? 1 : 0}}};
  }
  throw InvalidArgument(
      fmt::format("--algorithm '{}': expected auto, blocked, threaded, sequential or reference", algorithm));
}

// One target per algorithm to compare: the named family (with --config), every family (all), or the plan's choice.
std::vector<Target> make_targets(const Device& device, const BenchOptions& opt, bool algorithm_given) {
  const bool cpu = device.info().backend == BackendKind::Cpu;
  if (algorithm_given && !cpu) {
    throw InvalidArgument(fmt::format("--algorithm selects a CPU backend path, but the device is {}: use --family",
                                      device.info().id));
  }
  if (algorithm_given && opt.family != "auto") {
    throw InvalidArgument(fmt::format("--algorithm {} and --family {} both choose what runs: give one of them",
                                      opt.algorithm, opt.family));
  }
  if (cpu) cpu_algorithm_target(opt.algorithm, Problem::Kind::Convolution);  // an unknown name fails now
  const std::optional<Config> config = opt.config.empty() ? std::nullopt : std::optional(parse_config(opt.config));
  if (opt.family == "all") {
    if (config) throw InvalidArgument("--config needs one --family, not all");
    std::vector<Target> targets;
    for (const auto& f : kernel_families()) {
      if (f->runs_on_cpu_backend() == cpu) targets.push_back({f->name(), std::nullopt});  // the device's own kind
    }
    return targets;
  }
  if (config && opt.family == "auto") throw InvalidArgument("--config needs --family NAME");
  if (opt.family != "auto") {
    const KernelFamily& family = kernel_family(opt.family);  // unknown names fail now, listing the known ones
    // A family of the other kind of device would only fill the table with "unsupported" rows.
    if (family.runs_on_cpu_backend() != cpu) {
      const std::string device_text =
          device.info().id + (opt.device == "best" ? " (what --device best picks on this machine)" : "");
      throw InvalidArgument(
          cpu ? fmt::format("--family {} runs compiled kernels on an OpenCL or CUDA device, but the device is {}: "
                            "give --device opencl or cuda, or a CPU family",
                            opt.family, device_text)
              : fmt::format("--family {} runs on the CPU backend only, but the device is {}: give --device cpu",
                            opt.family, device_text));
    }
  }
  return {{opt.family == "auto" ? "" : opt.family, config}};
}

// The FP32 FMA ceiling `convtune peak` measures, for the "% peak" column; 0 with `why` set where none exists.
// The CPU backend and OpenCL devices that are CPUs (PoCL) are judged against the CPU's own SIMD FMA ceiling: an
// OpenCL FMA kernel that PoCL does not vectorise measures far below what the CPU does.
double measured_fp32_peak(Device& device, std::string& why) {
  if (device.info().backend == BackendKind::Cpu || (device.info().can_run_kernels && !device.info().is_gpu)) {
    return cpu_fp32_peak_gflops();
  }
  if (!device.info().can_run_kernels) {
    why = device.info().cannot_run_reason;
    return 0;
  }
  try {
    CeilingOptions options;
    // Only the FMA figure is used; small bandwidth buffers keep this quick.
    options.buffer_bytes = size_t{256} << 20;
    options.repeats = 3;
    return measure_ceilings(device, options).fma_gflops;
  } catch (const Error& e) {
    why = e.what();
    return 0;
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

// A section docs/PERFORMANCE.md can hold as is: what ran where, with which libraries, and how to repeat it.
void write_markdown(const std::string& path, const Device& device, const BenchOptions& opt, const Against& against,
                    double peak, const std::string& peak_why, const ReportTable& table) {
  std::string libraries;
  for (const auto& [name, line] : against.describe()) libraries += (libraries.empty() ? "" : ", ") + name;
  std::string text = fmt::format("### convtune vs {} ({}) on {} ({}), {}\n\n", libraries, to_string(against.precision()),
                                 device.info().name, device.info().id, utc_now());
  text += fmt::format("- device: {} ({}), driver {}\n", device.info().name, device.info().id,
                      device.info().driver_version.empty() ? "-" : device.info().driver_version);
  text += fmt::format("- host CPU: {}\n", Registry::instance().find("cpu").info().name);
  const bool cpu_peak = device.info().backend == BackendKind::Cpu || !device.info().is_gpu;
  text += peak > 0 ? fmt::format("- measured FP32 peak ({}): {:.0f} GFLOP/s{}\n",
                                 cpu_peak ? "the CPU's SIMD FMA loop on every core, `convtune peak --device cpu`"
                                          : "convtune peak's FMA kernel",
                                 peak,
                                 cpu_peak ? ", the best reading of the run; a reading also ends each timing round, and "
                                            "each row's `% peak` divides by the best reading of its own rounds (the "
                                            "JSON's percent_of_fp32_peak_run_best divides by the run's best)"
                                          : "")
                   : fmt::format("- measured FP32 peak: none ({})\n", peak_why);
  text += fmt::format("- math: {}\n",
                      against.precision().type != ElementType::F32
                          ? fmt::format("{} (16-bit tensors: convtune's tensor-core families or an FP32 family on exact FP32 "
                                        "copies (widened_*), products exact in FP32 and summed in FP32; cuDNN and cuBLAS on the same {} tensors with FP32 accumulation)",
                                        to_string(against.precision()), to_string(against.precision()))
                      : against.math() == MathMode::FP32
                          ? "fp32 (convtune's FP32 families; cuDNN with FMA math, cuBLAS default math: tensor cores and TF32 off)"
                      : against.math() == MathMode::TF32
                          ? "tf32 (convtune's tensor-core families; cuDNN and cuBLAS with tensor-op math: TF32 tensor cores allowed)"
                      : against.math() == MathMode::FP32Fast
                          ? "fp32-fast (convtune's FP32 families, Winograd's alpha-8 tiles allowed within 4x the FP32 "
                            "tolerance; cuDNN and cuBLAS run their FP32 FMA math; `check` columns give each error)"
                          : "3xtf32 (convtune's tensor-core families, split TF32 at FP32 accuracy; cuDNN and cuBLAS have no such "
                            "mode and run their FP32 FMA math)");
  for (const auto& [name, line] : against.describe()) text += fmt::format("- {}: {}\n", name, line);
  text += fmt::format("- timing: {} warm-up run(s) of each side, then {} round(s) of one timed run of convtune and of "
                      "each library in turn, each side's median (harness::time_in_rounds); device events (host clock on "
                      "the CPU); inputs uniform in [-1, 1); `check` is the relative L2 distance from convtune's output\n",
                      opt.warmup, opt.repeats);
  text += "- GFLOP/s count the direct sum's 2NKPQCRS for every algorithm (effective rates); `% peak` divides the "
          "operations the algorithm performed (fewer for Winograd, and where taps that read only padding are skipped) by "
          "the time and the measured peak; rows on tensor cores (the _tc and _wgmma families) show none, as no tensor-core "
          "ceiling is measured\n";
  text += fmt::format("- command: `{}`\n\n", command_line());
  text += table.markdown();
  text += "\nconvtune/X is convtune's time over X's: above 1 convtune is slower, and the row says so.\n";
  write_file_atomic(path, text);
}

std::string shape_text(const Problem& problem) {
  if (problem.is_conv()) return shape_text(problem.conv());
  const GemmProblem& g = problem.gemm();
  std::string s = fmt::format("{}x{}x{}{}{}", g.m, g.n, g.k, g.trans_a ? " At" : "", g.trans_b ? " Bt" : "");
  if (g.batch > 1) s += fmt::format(" x{}", g.batch);
  return s;
}

// Every timed run's device time in ms, in the order they ran, after `warmup` untimed runs.
std::vector<double> time_each_run(harness::Implementation& impl, harness::Workload& workload, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) impl.run();
  workload.queue().finish();
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) samples.push_back(workload.queue().elapsed_ms([&] { impl.run(); }));
  return samples;
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// The printed cells of a row that ran, from its record: the table shows what the CSV and JSON hold, rounded.
std::vector<std::string> timing_cells(const nlohmann::ordered_json& record, bool with_peak) {
  std::vector<std::string> cells = {fmt::format("{:.3f}", record["ms"].get<double>()),
                                    fmt::format("{:.4g}", record["gflops"].get<double>()),
                                    fmt::format("{:.4g}", record["gbytes_per_s"].get<double>())};
  if (with_peak) {
    cells.push_back(record["percent_of_fp32_peak"].is_number()
                        ? fmt::format("{:.1f}", record["percent_of_fp32_peak"].get<double>())
                        : "-");
  }
  return cells;
}

// Rows wait for the table until every row has run: their % peak divides by the ceiling as measured by then.
struct BenchPendingRow {
  std::vector<std::string> cells;
  nlohmann::ordered_json record;
  double performed_gflops = 0;  // rows that ran, with a peak to divide by
  double own_peak = 0;          // the best ceiling reading of the row's own rounds (CPU ceilings), else 0
};

// What every row of one bench run reads and adds to: the device, the reference libraries, the FP32 ceiling as
// read so far, and the rows and failures gathered for the table and the exit status.
struct BenchRun {
  BenchRun(const BenchOptions& options, Device& chosen, Against* libraries)
      : opt(options), device(chosen), against(libraries) {}
  const BenchOptions& opt;
  Device& device;
  Against* against;  // null without --against
  double peak = 0;
  std::string peak_why;
  bool cpu_peak = false;  // the ceiling is the CPU's, re-read after every row (see run_bench)
  std::vector<BenchPendingRow> pending;
  std::vector<std::string> failures;
  size_t ran = 0;
};

// The cells and JSON fields every row of a layer, direction and target starts with, and the names its failures
// are reported under.
struct BenchRowHead {
  std::string layer;
  std::string dir;
  std::vector<std::string> cells;
  nlohmann::ordered_json record;
};

// A row's timed runs, and with --against the libraries' side of them.
struct BenchTiming {
  std::vector<double> samples;              // convtune's times (ms)
  std::optional<Against::Outcome> outcome;  // with --against, unless comparing threw
  std::string against_failure;              // why comparing threw
};

// The rows: each convolution in every asked direction, each GEMM once.
std::vector<std::pair<const Layer*, Problem>> bench_rows(const std::vector<Layer>& layers,
                                                         const std::vector<Direction>& directions, double batch_scale) {
  std::vector<std::pair<const Layer*, Problem>> rows;
  for (const Layer& layer : layers) {
    const Problem scaled = scale_batch(layer.problem, batch_scale);
    if (scaled.is_gemm()) {
      rows.emplace_back(&layer, scaled);
    } else {
      for (Direction dir : directions) rows.emplace_back(&layer, scaled.conv().with_direction(dir));
    }
  }
  return rows;
}

// The table's columns, with --against's % peak and the libraries' own.
std::vector<TableColumn> bench_columns(const Against* against) {
  // Priorities: what a narrow terminal loses first (the CSV and JSON keep everything).
  std::vector<TableColumn> columns = {{"layer", 0}, {"dir", 0},     {"N", 3},      {"shape", 2},
                                      {"ms", 0},    {"GFLOP/s", 0}, {"GB/s", 3}};
  if (against) columns.push_back({"% peak", 1});
  columns.insert(columns.end(), {{"device", 4}, {"algorithm", 1}, {"check", 3}});
  if (against) {
    for (const std::string& column : against->columns()) columns.push_back({column, 1});
  }
  return columns;
}

// What the plan of a row is asked for: the target's family and parameters within --workspace-limit.
PlanRequest bench_plan_request(const BenchOptions& opt, const Device& device, const Target& target,
                               const Problem& pb) {
  PlanRequest request;
  request.family = target.family;
  request.config = target.config;
  request.workspace_limit = workspace_limit_bytes(opt.workspace_limit);
  const DeviceInfo limited = with_workspace_limit(device.info(), request.workspace_limit);
  if (request.config && kernel_family(target.family).unsupported_reason(pb, {}, limited).empty()) {
    // Parameters --config leaves out keep the family's default for this layer.
    Config full = kernel_family(target.family).default_config(pb, limited);
    for (const auto& [name, value] : *request.config) full[name] = value;
    request.config = full;
  }
  return request;
}

// A row that did not run: dashes for its numbers and the reason in its check cell.
void bench_skip_row(BenchRun& run, const BenchRowHead& head, const std::string& algorithm, const std::string& why) {
  std::cerr << why << "\n";
  auto cells = head.cells;
  cells.insert(cells.end(), {"-", "-", "-"});
  if (run.against) cells.push_back("-");
  cells.insert(cells.end(), {run.device.info().id, algorithm, why});
  if (run.against) {
    const auto none = run.against->empty_cells();
    cells.insert(cells.end(), none.begin(), none.end());
  }
  nlohmann::ordered_json record = head.record;
  record.update({{"device", run.device.info().id}, {"algorithm", algorithm}, {"skipped", why}});
  run.pending.push_back({cells, record});
}

// A row whose check or timing threw: a failure for the exit status, and a FAILED row in the table.
void bench_fail_row(BenchRun& run, const BenchRowHead& head, const std::string& algorithm, const Error& e) {
  run.failures.push_back(fmt::format("{} {} {}: {}", head.layer, head.dir, algorithm, e.what()));
  bench_skip_row(run, head, algorithm, fmt::format("FAILED: {}", e.what()));
}

// The row's workload with the plan prepared on it and, unless --no-verify, checked at batch 1 against the
// reference (`check`: the relative L2 error); null after a failure, which is recorded as a FAILED row.
std::unique_ptr<harness::Workload> bench_prepare_checked(BenchRun& run, const BenchRowHead& head, const Problem& pb,
                                                         harness::PlanImplementation& impl,
                                                         nlohmann::ordered_json& check) {
  std::unique_ptr<harness::Workload> workload;
  try {
    workload = std::make_unique<harness::Workload>(run.device, pb, 1);
    impl.prepare(*workload);
    if (!run.opt.no_verify) {
      const harness::Check result = harness::check_once(impl, *workload, 512);
      if (!result.passed) {
        throw Error(fmt::format("{} computes {} wrongly: {}", impl.algorithm(), pb.to_string(), result.message));
      }
      check = result.rel_l2_error;
    }
  } catch (const Error& e) {
    bench_fail_row(run, head, impl.algorithm(), e);
    return nullptr;
  }
  return workload;
}

// With --against, convtune is timed in rounds with the libraries (Against::compare), on its output of one more
// run; else, or where that threw, alone. Throws where timing convtune alone fails.
BenchTiming bench_time_row(BenchRun& run, harness::PlanImplementation& impl, harness::Workload& workload) {
  BenchTiming timing;
  if (run.against) {
    try {
      workload.poison();
      impl.run();
      workload.queue().finish();
      const std::vector<float> mine = workload.output();
      timing.outcome = run.against->compare(workload, impl, mine, run.opt.warmup, run.opt.repeats,
                                            run.cpu_peak ? std::function<double()>(cpu_fp32_peak_once) : nullptr);
      timing.samples = timing.outcome->convtune_samples;
    } catch (const Error& e) {
      timing.against_failure = e.what();
    }
  }
  if (timing.samples.empty()) timing.samples = time_each_run(impl, workload, run.opt.warmup, run.opt.repeats);
  return timing;
}

// A row that ran: its numbers in the table's cells and the JSON record, and the libraries' beside them. The CPU's
// ceiling is read again here; % peak waits for every row (bench_table_rows).
void bench_add_timed_row(BenchRun& run, const BenchRowHead& head, const Problem& pb,
                         const harness::PlanImplementation& impl, const BenchTiming& timing,
                         const nlohmann::ordered_json& check) {
  const std::vector<double>& samples = timing.samples;
  const std::optional<Against::Outcome>& outcome = timing.outcome;
  ++run.ran;
  const double median_ms = median_of(samples);
  const double gflops = pb.flops() / (median_ms * 1e6);
  // % peak divides what the algorithm performed, so Winograd's effective GFLOP/s, and those of kernels that skip
  // padding taps, cannot read above 100%.
  const double performed_gflops = impl.performed_flops(pb) / (median_ms * 1e6);
  if (run.cpu_peak) run.peak = std::max(run.peak, cpu_fp32_peak_again());
  double own_peak = 0;
  if (outcome && !outcome->ceiling_gflops.empty()) {
    own_peak = *std::max_element(outcome->ceiling_gflops.begin(), outcome->ceiling_gflops.end());
    run.peak = std::max(run.peak, own_peak);
  }
  nlohmann::ordered_json record = head.record;
  record.update({{"ms", median_ms},
                 {"min_ms", *std::min_element(samples.begin(), samples.end())},
                 {"max_ms", *std::max_element(samples.begin(), samples.end())},
                 {"gflops", gflops},
                 {"gbytes_per_s", pb.bytes() / (median_ms * 1e6)},
                 {"device", run.device.info().id},
                 {"algorithm", impl.algorithm()},
                 {"check_rel_l2", check}});
  // Filled in (and the table's cell with it) once every row has run.
  if (run.against) record["percent_of_fp32_peak"] = nullptr;
  if (run.opt.samples) record["samples_ms"] = samples;
  std::cerr << fmt::format("{:.3f} ms, {:.4g} GFLOP/s\n", median_ms, gflops);
  // Why this plan: the tuning tier, and what a workspace limit or math mode left out.
  if (global_flags().verbose) std::cerr << "  plan: " << impl.plan().explanation() << "\n";
  auto cells = head.cells;
  const auto numbers = timing_cells(record, run.against != nullptr);
  cells.insert(cells.end(), numbers.begin(), numbers.end());
  cells.insert(cells.end(), {run.device.info().id, impl.algorithm(),
                             check.is_number() ? fmt::format("{:.1e}", check.get<double>()) : "skipped"});
  if (run.against) {
    if (outcome) {
      cells.insert(cells.end(), outcome->cells.begin(), outcome->cells.end());
      record["against"] = nlohmann::ordered_json::parse(outcome->values.dump());
      for (auto& f : outcome->failures) run.failures.push_back(fmt::format("{} {}: {}", head.layer, head.dir, f));
    } else {
      const auto none = run.against->empty_cells();
      cells.insert(cells.end(), none.begin(), none.end());
      run.failures.push_back(
          fmt::format("{} {}: beside the libraries: {}", head.layer, head.dir, timing.against_failure));
    }
  }
  // Tensor-core rows have no measured ceiling of their own: the FP32 FMA peak would read them at 150%.
  const bool fma_row = !impl.plan().uses_tensor_cores();
  if (run.against && !fma_row) record["percent_of_fp32_peak_skipped"] = "tensor cores: no FP32 FMA rate";
  if (own_peak > 0) record["fp32_peak_in_rounds_gflops"] = outcome->ceiling_gflops;
  run.pending.push_back({cells, record, run.against && run.peak > 0 && fma_row ? performed_gflops : 0, own_peak});
}

// One row with one target: planned, checked and timed, then held in run.pending (or skipped, saying why).
void bench_row(BenchRun& run, const BenchRowHead& head, const Problem& pb, const Target& target) {
  harness::PlanImplementation impl(bench_plan_request(run.opt, run.device, target, pb));
  if (const std::string why = impl.unsupported_reason(pb, run.device.info()); !why.empty()) {
    bench_skip_row(run, head, target.label(), "unsupported: " + why);
    return;
  }
  nlohmann::ordered_json check = nullptr;  // the relative L2 error, or null with --no-verify
  const std::unique_ptr<harness::Workload> workload = bench_prepare_checked(run, head, pb, impl, check);
  if (!workload) return;
  BenchTiming timing;
  try {
    timing = bench_time_row(run, impl, *workload);
  } catch (const Error& e) {
    bench_fail_row(run, head, impl.algorithm(), e);
    return;
  }
  bench_add_timed_row(run, head, pb, impl, timing, check);
}

// Every row with every target, each with a progress line on stderr that says how long the rest will take.
void bench_all_rows(BenchRun& run, const std::vector<std::pair<const Layer*, Problem>>& rows,
                    const std::vector<Target>& targets, std::chrono::steady_clock::time_point start) {
  const bool cpu = run.device.info().backend == BackendKind::Cpu;
  size_t done = 0;
  const size_t steps = rows.size() * targets.size();
  const size_t line_width = terminal_columns(STDERR_FILENO);
  for (const auto& [layer, pb] : rows) {
    const std::string dir(pb.operation());
    const int64_t batch = pb.is_conv() ? pb.conv().n : pb.gemm().m;
    for (const Target& generic_target : targets) {
      Target target = generic_target;
      if (cpu && target.family.empty()) target = cpu_algorithm_target(run.opt.algorithm, pb.kind());
      ++done;
      // "all" lists every family: a row only meets those of its kind.
      if (!target.family.empty() && kernel_family(target.family).problem_kind() != pb.kind()) continue;
      // Each row's line says how long the rest will take, from the rows so far.
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string eta =
          done > 1 ? fmt::format(", ETA {}", format_duration(elapsed / double(done - 1) * double(steps - done + 1)))
                   : "";
      std::cerr << fit_width(fmt::format("[{}/{}{}] {} {} {}", done, steps, eta, layer->name, dir, target.label()),
                             line_width > 30 ? line_width - 30 : 0)
                << " ... " << std::flush;
      const BenchRowHead head = {layer->name,
                                 dir,
                                 {layer->name, dir, std::to_string(batch), shape_text(pb)},
                                 {{"layer", layer->name},
                                  {"direction", dir},
                                  {"problem", pb.to_string()},
                                  {"N", batch},
                                  {"shape", shape_text(pb)},
                                  {"math", std::string(to_string(pb.math()))}}};
      bench_row(run, head, pb, target);
    }
  }
}

// The rows into the table, now that the best ceiling reading is known: each % peak divides by it.
void bench_table_rows(BenchRun& run, ReportTable& table) {
  // % peak: the cell after ms, GFLOP/s and GB/s.
  const size_t peak_cell = 4 + 3;
  for (BenchPendingRow& row : run.pending) {
    if (row.performed_gflops > 0) {
      const double percent = 100 * row.performed_gflops / (row.own_peak > 0 ? row.own_peak : run.peak);
      row.record["percent_of_fp32_peak"] = percent;
      if (row.own_peak > 0) row.record["percent_of_fp32_peak_run_best"] = 100 * row.performed_gflops / run.peak;
      row.cells.at(peak_cell) = fmt::format("{:.1f}", percent);
    }
    table.add_row(std::move(row.cells), std::move(row.record));
  }
}

// What the --out files record besides the rows: versions, device, options and the command line.
nlohmann::json bench_metadata(const BenchRun& run) {
  const BenchOptions& opt = run.opt;
  const DeviceInfo& info = run.device.info();
  nlohmann::json metadata = {{"convtune", version_text()},
                             {"device", info.name},
                             {"device_id", info.id},
                             {"driver", info.driver_version},
                             // What `db import-bench` records its entries under.
                             {"device_info",
                              {{"fingerprint", info.fingerprint()},
                               {"backend", std::string(to_string(info.backend))},
                               {"name", info.name},
                               {"vendor", info.vendor},
                               {"architecture", info.architecture},
                               {"driver", info.driver_version}}},
                             // Each row's own mode is its "math" field; this is what --math asked for.
                             {"math_option", opt.math.empty() ? "none: each problem's own" : opt.math},
                             {"date", utc_now()},
                             {"batch_scale", opt.batch_scale},
                             {"warmup", opt.warmup},
                             {"repeats", opt.repeats},
                             {"command", command_line()}};
  if (run.against) {
    metadata["fp32_peak_gflops"] = run.peak > 0 ? nlohmann::json(run.peak) : nlohmann::json(run.peak_why);
    for (const auto& [name, line] : run.against->describe()) metadata["libraries"][name] = line;
  }
  return metadata;
}

// The table on stdout, and with --against the libraries and the peak it was read against.
void bench_print(const BenchRun& run, const ReportTable& table) {
  std::cout << fmt::format("device: {} ({}), median of {} after {} warm-up\n", run.device.info().id,
                           run.device.info().name, run.opt.repeats, run.opt.warmup);
  table.print(std::cout, table_width());
  if (run.against) {
    for (const auto& [name, line] : run.against->describe()) std::cout << fmt::format("{}: {}\n", name, line);
    std::cout << (run.peak > 0 ? fmt::format("measured FP32 peak: {:.0f} GFLOP/s\n", run.peak)
                               : fmt::format("measured FP32 peak: none ({})\n", run.peak_why));
    std::cout << "convtune/X: convtune's time over X's; above 1 convtune is slower\n";
  }
}

// `convtune bench`: the rows checked and timed on the device, then the table printed and the files written.
void run_bench(const BenchOptions& opt, bool algorithm_given) {
  std::vector<Layer> layers = select_layers(opt.suite, opt.layers, opt.gemms);
  // --math sets every row's mode (convtune then runs the families of that mode); without it rows keep their own.
  if (!opt.math.empty())
    for (Layer& layer : layers) layer.problem = layer.problem.with_precision(parse_precision(opt.math));
  std::vector<Problem*> problems;
  for (Layer& layer : layers) problems.push_back(&layer.problem);
  apply_layout(problems, opt.layout);
  const auto directions = parse_directions(opt.direction);
  for (const Layer& layer : layers) scale_batch(layer.problem, opt.batch_scale).validate();
  for (const std::string& note : unscalable_layers(layers, opt.batch_scale)) std::cerr << "bench: " << note << "\n";
  for (const std::string& out : opt.out) prepare_output(out, false, "--out");  // before the timing, not after
  if (!opt.markdown.empty()) prepare_output(opt.markdown, false, "--markdown");

  Device& device = choose_device(opt.device, "bench");
  const std::vector<Target> targets = make_targets(device, opt, algorithm_given);
  std::unique_ptr<Against> against;
  if (!opt.against.empty())
    against = std::make_unique<Against>(opt.against, opt.against_precision(), device);
  else if (!opt.markdown.empty())
    throw InvalidArgument("--markdown writes the side-by-side table: give --against LIST too");
  BenchRun run(opt, device, against.get());
  if (against) {
    std::cerr << fmt::format("bench: measuring {}'s FP32 FMA ceiling for the % peak column\n", device.info().id);
    run.peak = measured_fp32_peak(device, run.peak_why);
    for (const auto& [name, line] : against->describe()) std::cerr << fmt::format("bench: {}: {}\n", name, line);
  }
  const std::vector<std::pair<const Layer*, Problem>> rows = bench_rows(layers, directions, opt.batch_scale);
  std::cerr << fmt::format("bench: {} row(s) (layer x direction) x {} algorithm(s) on {} ({})\n", rows.size(),
                           targets.size(), device.info().id, device.info().name);

  ReportTable table(bench_columns(against.get()));
  // The CPU's ceiling is re-measured after every row and the best reading kept: on a shared virtual machine
  // the cores' clock moves with the host's load, and a ceiling taken once at the start (best of 5 FMA runs) read
  // 176.0 GFLOP/s while alex2's backward-filter then ran at 176.4 (one thread), a % peak of 100.3. A re-reading
  // costs about 0.1 s (two FMA runs per thread count). Over a whole run the readings still spread 235-314 GFLOP/s
  // on the 2-core host (the host's other tenants move the clock for minutes at a time), so a row timed in a slow
  // spell read far below the run's best: with --against each row's rounds also take a reading each (Against::
  // compare's ceiling probe), and its % peak divides by the best of its own readings.
  run.cpu_peak = run.peak > 0 && (device.info().backend == BackendKind::Cpu ||
                                  (device.info().can_run_kernels && !device.info().is_gpu));
  const auto start = std::chrono::steady_clock::now();
  bench_all_rows(run, rows, targets, start);
  bench_table_rows(run, table);
  std::cerr << fmt::format("bench: done in {}\n",
                           format_duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  bench_print(run, table);
  const nlohmann::json metadata = bench_metadata(run);
  for (const std::string& out : opt.out) {
    table.write(out, metadata);
    std::cout << fmt::format("wrote {}\n", out);
  }
  if (!opt.markdown.empty()) {
    write_markdown(opt.markdown, device, opt, *against, run.peak, run.peak_why, table);
    std::cout << fmt::format("wrote {}\n", opt.markdown);
  }
  if (!run.failures.empty()) {
    std::string text;
    for (const auto& f : run.failures) text += "\n  " + f;
    throw Error(fmt::format("{} check(s) failed:{}", run.failures.size(), text));
  }
  // A request nothing could run (an element type or math mode no family implements, say) is a failure, not a
  // table of "unsupported" rows with exit status 0.
  if (run.ran == 0) throw Unsupported("nothing ran: no implementation computes any of the requested rows (see the table)");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Time convolution layers and matrix products (a suite, --layer or --gemm) "
                                          "on a device, each checked against the reference first");
  add_problem_options(cmd, opt->suite, opt->layers, opt->gemms);
  add_device_option(cmd, opt->device);
  auto* algorithm = cmd->add_option("--algorithm", opt->algorithm,
                                    "Only with --device cpu: auto (the plan's choice: tuned entries, else cpu_blocked "
                                    "for convolutions and cpu_gemm for matrix products), blocked (cpu_blocked), or "
                                    "the baselines threaded (cpu_direct/cpu_gemm on every core), sequential (on one "
                                    "core) and reference (cpu_reference, float64)")
                        ->capture_default_str()
                        ->check(CLI::IsMember({"auto", "blocked", "threaded", "sequential", "reference"}));
  add_family_option(cmd, opt->family, "auto (the plan's choice), all (a row per family of the device's kind)");
  add_config_option(cmd, opt->config);
  add_direction_option(cmd, opt->direction);
  add_batch_scale_option(cmd, opt->batch_scale);
  add_timing_options(cmd, opt->warmup, opt->repeats, "each row");
  cmd->add_flag("--no-verify", opt->no_verify, "Skip the batch-1 check against the reference");
  cmd->add_option("--out", opt->out,
                  "Also write the rows to FILE.csv, FILE.json or FILE.md (repeatable): raw numbers, the full problem, "
                  "versions, device, driver, math mode and command line");
  cmd->add_flag("--samples", opt->samples, "With --out FILE.json: every timed run's ms, not only the median");
  cmd->add_option("--against", opt->against,
                  "Also run these reference libraries on the same inputs: cudnn, cublas, clblast, onednn "
                  "(comma-separated)")
      ->delimiter(',');
  add_math_option(cmd, opt->math, "; the reference libraries run fp32 unless tf32 is given");
  add_layout_option(cmd, opt->layout);
  add_workspace_limit_option(cmd, opt->workspace_limit);
  cmd->add_option("--markdown", opt->markdown, "With --against: write a Markdown section (device, libraries, "
                  "command, table) to FILE");
  cmd->callback([opt, algorithm, cmd] {
    const bool json_out = std::any_of(opt->out.begin(), opt->out.end(), [](const std::string& path) {
      return std::filesystem::path(path).extension() == ".json";
    });
    refuse_inapplicable(cmd, "--samples", json_out, "adds every run's time to the JSON rows: give --out FILE.json too");
    run_bench(*opt, algorithm->count() > 0);
  });
}

}  // namespace convtune::cli
