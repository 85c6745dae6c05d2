// `convtune bench`: times a suite or single layers on a device, all directions, with a correctness check
// against the reference first; prints ms, GFLOP/s, GB/s and writes CSV/JSON/Markdown with --out.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <vector>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/kernel_family.h"
#include "src/core/atomic_file.h"
#include "src/measure/cpu_ceilings.h"
#include "src/measure/device_ceilings.h"
#include "tools/convtune/against.h"
#include "src/harness/implementation.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/output_path.h"
#include "tools/convtune/report_table.h"
#include "tools/convtune/suite.h"

namespace convtune::cli {

namespace {

struct BenchOptions {
  std::string suite;
  std::vector<std::string> layers;
  std::vector<std::string> gemms;
  std::string device = "cpu";
  std::string algorithm = "auto";
  std::string family = "auto";
  std::string config;
  std::string direction = "all";
  double batch_scale = 1.0;
  int warmup = 1;
  int repeats = 5;
  bool verify = true;
  std::vector<std::string> out;  // .csv, .json and/or .md files
  std::vector<std::string> against;  // reference libraries to run beside convtune
  std::string math = "fp32";
  std::string markdown;
};

std::string shape_text(const ConvProblem& p) {
  std::string s = fmt::format("{}->{} {}x{} {}x{}/s{}/p{}", p.c, p.k, p.h, p.w, p.r, p.s, p.stride.h, p.pad.h);
  if (p.dilation.h > 1 || p.dilation.w > 1) s += fmt::format("/d{}", p.dilation.h);
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
  if (opt.family != "auto") kernel_family(opt.family);  // unknown names fail now, listing the known ones
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
  std::string text = fmt::format("### convtune vs {} ({}) on {} ({}), {}\n\n", libraries, to_string(against.math()),
                                 device.info().name, device.info().id, utc_now());
  text += fmt::format("- device: {} ({}), driver {}\n", device.info().name, device.info().id,
                      device.info().driver_version.empty() ? "-" : device.info().driver_version);
  text += fmt::format("- host CPU: {}\n", Registry::instance().find("cpu").info().name);
  const bool cpu_peak = device.info().backend == BackendKind::Cpu || !device.info().is_gpu;
  text += peak > 0 ? fmt::format("- measured FP32 peak ({}): {:.0f} GFLOP/s\n",
                                 cpu_peak ? "the CPU's SIMD FMA loop on every core, `convtune peak --device cpu`"
                                          : "convtune peak's FMA kernel",
                                 peak)
                   : fmt::format("- measured FP32 peak: none ({})\n", peak_why);
  text += fmt::format("- math: {}\n",
                      against.math() == MathMode::FP32
                          ? "fp32 (convtune's FP32 families; cuDNN with FMA math, cuBLAS default math: tensor cores and TF32 off)"
                      : against.math() == MathMode::TF32
                          ? "tf32 (convtune's tensor-core families; cuDNN and cuBLAS with tensor-op math: TF32 tensor cores allowed)"
                          : "3xtf32 (convtune's tensor-core families, split TF32 at FP32 accuracy; cuDNN and cuBLAS have no such "
                            "mode and run their FP32 FMA math)");
  for (const auto& [name, line] : against.describe()) text += fmt::format("- {}: {}\n", name, line);
  text += fmt::format("- timing: median of {} after {} warm-up, device events (host clock on the CPU); inputs "
                      "uniform in [-1, 1); `check` is the relative L2 distance from convtune's output\n",
                      opt.repeats, opt.warmup);
  text += "- GFLOP/s count the direct sum's 2NKPQCRS for every algorithm (effective rates); `% peak` divides the "
          "operations the algorithm performed (fewer for Winograd) by the time and the measured peak\n";
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

void run_bench(const BenchOptions& opt, bool algorithm_given, bool math_given) {
  std::vector<Layer> layers = select_layers(opt.suite, opt.layers, opt.gemms);
  // --math sets every row's mode (convtune then runs the families of that mode); without it rows keep their own.
  if (math_given)
    for (Layer& layer : layers) layer.problem = layer.problem.with_math(parse_math_mode(opt.math));
  if (opt.repeats < 1) throw InvalidArgument(fmt::format("--repeats={} is invalid: expected 1 or more", opt.repeats));
  const auto directions = parse_directions(opt.direction);
  for (const Layer& layer : layers) scale_batch(layer.problem, opt.batch_scale).validate();
  for (const std::string& out : opt.out) prepare_output(out, false, "--out");  // before the timing, not after
  if (!opt.markdown.empty()) prepare_output(opt.markdown, false, "--markdown");

  Device& device = choose_device(opt.device, "bench");
  const bool cpu = device.info().backend == BackendKind::Cpu;
  const std::vector<Target> targets = make_targets(device, opt, algorithm_given);
  std::unique_ptr<Against> against;
  if (!opt.against.empty())
    against = std::make_unique<Against>(opt.against, parse_math_mode(opt.math), device);
  else if (!opt.markdown.empty())
    throw InvalidArgument("--markdown writes the side-by-side table: give --against LIST too");
  double peak = 0;
  std::string peak_why;
  if (against) {
    std::cerr << fmt::format("bench: measuring {}'s FP32 FMA ceiling for the % peak column\n", device.info().id);
    peak = measured_fp32_peak(device, peak_why);
    for (const auto& [name, line] : against->describe()) std::cerr << fmt::format("bench: {}: {}\n", name, line);
  }
  // The rows: each convolution in every asked direction, each GEMM once.
  std::vector<std::pair<const Layer*, Problem>> rows;
  for (const Layer& layer : layers) {
    const Problem scaled = scale_batch(layer.problem, opt.batch_scale);
    if (scaled.is_gemm()) {
      rows.emplace_back(&layer, scaled);
    } else {
      for (Direction dir : directions) rows.emplace_back(&layer, scaled.conv().with_direction(dir));
    }
  }
  std::cerr << fmt::format("bench: {} row(s) (layer x direction) x {} algorithm(s) on {} ({})\n", rows.size(),
                           targets.size(), device.info().id, device.info().name);

  std::vector<std::string> columns = {"layer", "dir", "N", "shape", "ms", "GFLOP/s", "GB/s"};
  if (against) columns.push_back("% peak");
  columns.insert(columns.end(), {"device", "algorithm", "check"});
  if (against) {
    const auto more = against->columns();
    columns.insert(columns.end(), more.begin(), more.end());
  }
  ReportTable table(columns);
  std::vector<std::string> failures;
  size_t done = 0, ran = 0;
  for (const auto& [layer, pb] : rows) {
    const std::string dir(pb.operation());
    const std::string batch = std::to_string(pb.is_conv() ? pb.conv().n : pb.gemm().m);
    for (const Target& generic_target : targets) {
      Target target = generic_target;
      if (cpu && target.family.empty()) target = cpu_algorithm_target(opt.algorithm, pb.kind());
      // "all" lists every family: a row only meets those of its kind.
      if (!target.family.empty() && kernel_family(target.family).problem_kind() != pb.kind()) continue;
      std::cerr << fmt::format("[{}/{}] {} {} {} ... ", ++done, rows.size() * targets.size(), layer->name, dir,
                               target.label()) << std::flush;
      const std::vector<std::string> head = {layer->name, dir, batch, shape_text(pb)};
      PlanRequest request;
      request.family = target.family;
      request.config = target.config;
      if (request.config && kernel_family(target.family).unsupported_reason(pb, {}, device.info()).empty()) {
        // Parameters --config leaves out keep the family's default for this layer.
        Config full = kernel_family(target.family).default_config(pb, device.info());
        for (const auto& [name, value] : *request.config) full[name] = value;
        request.config = full;
      }
      harness::PlanImplementation impl(request);
      // A named copy: clang before 16 cannot capture the structured binding `layer` in a lambda.
      const std::string& layer_name = layer->name;
      auto skip_row = [&](const std::string& algorithm, const std::string& why) {
        std::cerr << why << "\n";
        auto cells = head;
        cells.insert(cells.end(), {"-", "-", "-"});
        if (against) cells.push_back("-");
        cells.insert(cells.end(), {device.info().id, algorithm, why});
        if (against) {
          const auto none = against->empty_cells();
          cells.insert(cells.end(), none.begin(), none.end());
        }
        table.add_row(cells, {{"layer", layer_name}, {"direction", dir}, {"algorithm", algorithm}, {"skipped", why}});
      };
      if (const std::string why = impl.unsupported_reason(pb, device.info()); !why.empty()) {
        skip_row(target.label(), "unsupported: " + why);
        continue;
      }
      std::unique_ptr<harness::Workload> workload;
      std::string check = "skipped";
      try {
        workload = std::make_unique<harness::Workload>(device, pb, 1);
        impl.prepare(*workload);
        if (opt.verify) {
          const harness::Check result = harness::check_once(impl, *workload, 512);
          if (!result.passed) {
            throw Error(fmt::format("{} computes {} wrongly: {}", impl.algorithm(), pb.to_string(), result.message));
          }
          check = fmt::format("{:.1e}", result.rel_l2_error);
        }
      } catch (const Error& e) {
        failures.push_back(fmt::format("{} {} {}: {}", layer->name, dir, impl.algorithm(), e.what()));
        skip_row(impl.algorithm(), fmt::format("FAILED: {}", e.what()));
        continue;
      }
      const Timing t = harness::time_runs(impl, *workload, opt.warmup, opt.repeats);
      ++ran;
      const double gflops = pb.flops() / (t.median_ms * 1e6);
      const double gbs = pb.bytes() / (t.median_ms * 1e6);
      // % peak divides what the algorithm performed, so Winograd's effective GFLOP/s cannot read above 100%.
      const double percent_peak = peak > 0 ? 100 * impl.performed_flops(pb) / (t.median_ms * 1e6) / peak : 0;
      std::cerr << fmt::format("{:.3f} ms, {:.1f} GFLOP/s\n", t.median_ms, gflops);
      auto cells = head;
      cells.insert(cells.end(), {fmt::format("{:.3f}", t.median_ms), fmt::format("{:.1f}", gflops),
                                 fmt::format("{:.1f}", gbs)});
      if (against) cells.push_back(peak > 0 ? fmt::format("{:.1f}", percent_peak) : "-");
      cells.insert(cells.end(), {device.info().id, impl.algorithm(), check});
      nlohmann::json compared;
      if (against) {
        try {
          // convtune's output of one more run is what the libraries are compared with.
          workload->poison();
          impl.run();
          workload->queue().finish();
          const std::vector<float> mine = workload->output();
          auto outcome = against->compare(*workload, mine, t.median_ms, opt.warmup, opt.repeats);
          cells.insert(cells.end(), outcome.cells.begin(), outcome.cells.end());
          compared = std::move(outcome.values);
          for (auto& f : outcome.failures) failures.push_back(fmt::format("{} {}: {}", layer->name, dir, f));
        } catch (const Error& e) {
          const auto none = against->empty_cells();
          cells.insert(cells.end(), none.begin(), none.end());
          failures.push_back(fmt::format("{} {}: reading convtune's output: {}", layer->name, dir, e.what()));
        }
      }
      table.add_row(cells, {{"layer", layer->name},
                            {"direction", dir},
                            {"problem", pb.to_string()},
                            {"ms", t.median_ms},
                            {"min_ms", t.min_ms},
                            {"gflops", gflops},
                            {"gbytes_per_s", gbs},
                            {"device", device.info().id},
                            {"algorithm", impl.algorithm()},
                            {"check_rel_l2", check},
                            {"percent_of_fp32_peak", peak > 0 ? nlohmann::json(percent_peak) : nlohmann::json()},
                            {"against", compared}});
    }
  }
  std::cout << fmt::format("device: {} ({}), median of {} after {} warm-up\n", device.info().id, device.info().name,
                           opt.repeats, opt.warmup);
  table.print(std::cout);
  if (against) {
    for (const auto& [name, line] : against->describe()) std::cout << fmt::format("{}: {}\n", name, line);
    std::cout << (peak > 0 ? fmt::format("measured FP32 peak: {:.0f} GFLOP/s\n", peak)
                           : fmt::format("measured FP32 peak: none ({})\n", peak_why));
    std::cout << "convtune/X: convtune's time over X's; above 1 convtune is slower\n";
  }
  for (const std::string& out : opt.out) {
    nlohmann::json metadata = {{"device", device.info().name},
                               {"device_id", device.info().id},
                               {"driver", device.info().driver_version},
                               {"date", utc_now()},
                               {"batch_scale", opt.batch_scale},
                               {"repeats", opt.repeats},
                               {"command", command_line()}};
    if (against) {
      metadata["math"] = opt.math;
      metadata["fp32_peak_gflops"] = peak > 0 ? nlohmann::json(peak) : nlohmann::json(peak_why);
      for (const auto& [name, line] : against->describe()) metadata["libraries"][name] = line;
    }
    table.write(out, metadata);
    std::cout << fmt::format("wrote {}\n", out);
  }
  if (!opt.markdown.empty()) {
    write_markdown(opt.markdown, device, opt, *against, peak, peak_why, table);
    std::cout << fmt::format("wrote {}\n", opt.markdown);
  }
  if (!failures.empty()) {
    std::string text;
    for (const auto& f : failures) text += "\n  " + f;
    throw Error(fmt::format("{} check(s) failed:{}", failures.size(), text));
  }
  // A request nothing could run (an element type or math mode no family implements, say) is a failure, not a
  // table of "unsupported" rows with exit status 0.
  if (ran == 0) throw Unsupported("nothing ran: no implementation computes any of the requested rows (see the table)");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Time convolution layers (a suite or --layer) on a device");
  cmd->add_option("--suite", opt->suite, "Suite name (alexnet, seeds) or path of a suite file");
  cmd->add_option("--layer", opt->layers,
                  "One layer, e.g. N=1,C=64,H=27,K=192,R=5,pad=2 (W defaults to H, S to R); repeatable");
  cmd->add_option("--gemm", opt->gemms,
                  "One matrix product C = op(A) op(B), e.g. M=100,N=256,K=3136,trans_b=1 (also batch, lda..., "
                  "stride_a...); repeatable");
  cmd->add_option("--backend,--device", opt->device, "Device: cpu, opencl[:N], cuda[:N] or best")
      ->capture_default_str();
  auto* algorithm = cmd->add_option("--algorithm", opt->algorithm,
                                    "On the CPU backend: auto (the plan's choice: tuned entries, else cpu_blocked for "
                                    "convolutions and cpu_gemm for GEMMs), blocked (cpu_blocked), or the baselines "
                                    "threaded (cpu_direct/cpu_gemm THREADS=0), sequential (THREADS=1) and reference "
                                    "(cpu_reference)")
                        ->capture_default_str();
  std::string family_names;
  for (const auto& family : kernel_families()) family_names += (family_names.empty() ? "" : ", ") + family->name();
  cmd->add_option("--family", opt->family,
                  "auto (the plan's choice), all (a row per family), or one family: " + family_names)
      ->capture_default_str();
  cmd->add_option("--config", opt->config, "Parameters for --family, e.g. TILE_M=64,TILE_N=64; those left out keep the family's default for each layer");
  cmd->add_option("--direction", opt->direction, "fwd, bwd-data, bwd-filter or all")->capture_default_str();
  cmd->add_option("--batch-scale", opt->batch_scale, "Multiply every layer's N by this (at least 1 remains)")
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "Untimed runs before timing")->capture_default_str();
  cmd->add_option("--repeats", opt->repeats, "Timed runs; the median is reported")->capture_default_str();
  cmd->add_flag("!--no-verify", opt->verify, "Skip the batch-1 check against the reference");
  cmd->add_option("--out", opt->out, "Also write the table to FILE.csv, FILE.json or FILE.md (repeatable)");
  cmd->add_option("--against", opt->against,
                  "Also run these reference libraries on the same inputs: cudnn, cublas, clblast, onednn "
                  "(comma-separated)")
      ->delimiter(',');
  auto* math = cmd->add_option("--math", opt->math,
                               "Math mode of every row and of the reference libraries: fp32 (tensor cores off), tf32 "
                               "(TF32 tensor cores) or 3xtf32 (split TF32 at FP32 accuracy; the libraries run fp32)")
                   ->capture_default_str();
  cmd->add_option("--markdown", opt->markdown, "With --against: write a Markdown section (device, libraries, "
                  "command, table) to FILE");
  cmd->callback([opt, algorithm, math] { run_bench(*opt, algorithm->count() > 0, math->count() > 0); });
}

}  // namespace convtune::cli
