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
#include "src/measure/device_ceilings.h"
#include "tools/convtune/against.h"
#include "tools/convtune/bench_target.h"
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
  std::string device = "cpu";
  std::string algorithm = "threaded";
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

// One target per algorithm to compare: the CPU path, or one plan per requested kernel family.
std::vector<std::unique_ptr<BenchTarget>> make_targets(Device& device, const BenchOptions& opt) {
  std::vector<std::unique_ptr<BenchTarget>> targets;
  if (device.info().backend == BackendKind::Cpu) {
    targets.push_back(make_cpu_target(device, opt.algorithm));
    return targets;
  }
  const std::optional<Config> config = opt.config.empty() ? std::nullopt : std::optional(parse_config(opt.config));
  if (opt.family == "all") {
    if (config) throw InvalidArgument("--config needs one --family, not all");
    for (const auto& f : kernel_families()) targets.push_back(make_plan_target(device, f->name(), std::nullopt));
  } else {
    if (config && opt.family == "auto") throw InvalidArgument("--config needs --family NAME");
    targets.push_back(make_plan_target(device, opt.family == "auto" ? "" : opt.family, config));
  }
  return targets;
}

// The FP32 FMA ceiling `convtune peak` measures, for the "% peak" column; 0 with `why` set where none exists.
double measured_fp32_peak(Device& device, std::string& why) {
  if (!device.info().can_run_kernels) {
    why = device.info().backend == BackendKind::Cpu ? "the CPU backend runs no kernels, so no FMA ceiling is measured"
                                                    : device.info().cannot_run_reason;
    return 0;
  }
  try {
    CeilingOptions options;
    // Only the FMA figure is used; small bandwidth buffers keep this quick (seconds on PoCL).
    options.buffer_bytes = device.info().is_gpu ? size_t{256} << 20 : size_t{16} << 20;
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
  std::string text = fmt::format("### convtune vs {} ({}) on {} ({}), {}\n\n", libraries,
                                 reference::to_string(against.math()), device.info().name, device.info().id,
                                 utc_now());
  text += fmt::format("- device: {} ({}), driver {}\n", device.info().name, device.info().id,
                      device.info().driver_version.empty() ? "-" : device.info().driver_version);
  text += fmt::format("- host CPU: {}\n", Registry::instance().find("cpu").info().name);
  text += peak > 0 ? fmt::format("- measured FP32 peak (convtune peak's FMA kernel): {:.0f} GFLOP/s\n", peak)
                   : fmt::format("- measured FP32 peak: none ({})\n", peak_why);
  text += fmt::format("- math: {}\n", against.math() == reference::MathMode::FP32
                                          ? "fp32 (cuDNN with FMA math: tensor cores and TF32 off)"
                                          : "tf32 (cuDNN with tensor-op math: TF32 tensor cores allowed)");
  for (const auto& [name, line] : against.describe()) text += fmt::format("- {}: {}\n", name, line);
  text += fmt::format("- timing: median of {} after {} warm-up, device events (host clock on the CPU); inputs "
                      "uniform in [-1, 1); `check` is the relative L2 distance from convtune's output\n",
                      opt.repeats, opt.warmup);
  text += fmt::format("- command: `{}`\n\n", command_line());
  text += table.markdown();
  text += "\nconvtune/X is convtune's time over X's: above 1 convtune is slower, and the row says so.\n";
  write_file_atomic(path, text);
}

void run_bench(const BenchOptions& opt) {
  const std::vector<Layer> layers = select_layers(opt.suite, opt.layers);
  if (opt.repeats < 1) throw InvalidArgument(fmt::format("--repeats={} is invalid: expected 1 or more", opt.repeats));
  const auto directions = parse_directions(opt.direction);
  for (const Layer& layer : layers) scale_batch(layer.problem, opt.batch_scale).validate();
  for (const std::string& out : opt.out) prepare_output(out, false, "--out");  // before the timing, not after
  if (!opt.markdown.empty()) prepare_output(opt.markdown, false, "--markdown");

  Device& device = choose_device(opt.device, "bench");
  auto targets = make_targets(device, opt);
  std::unique_ptr<Against> against;
  if (!opt.against.empty())
    against = std::make_unique<Against>(opt.against, reference::parse_math_mode(opt.math), device);
  else if (!opt.markdown.empty())
    throw InvalidArgument("--markdown writes the side-by-side table: give --against LIST too");
  double peak = 0;
  std::string peak_why;
  if (against) {
    std::cerr << fmt::format("bench: measuring {}'s FP32 FMA ceiling for the % peak column\n", device.info().id);
    peak = measured_fp32_peak(device, peak_why);
    for (const auto& [name, line] : against->describe()) std::cerr << fmt::format("bench: {}: {}\n", name, line);
  }
  std::cerr << fmt::format("bench: {} layer(s) x {} direction(s) x {} algorithm(s) on {} ({})\n", layers.size(),
                           directions.size(), targets.size(), device.info().id, device.info().name);

  std::vector<std::string> columns = {"layer", "dir", "N", "shape", "ms", "GFLOP/s", "GB/s"};
  if (against) columns.push_back("% peak");
  columns.insert(columns.end(), {"device", "algorithm", "check"});
  if (against) {
    const auto more = against->columns();
    columns.insert(columns.end(), more.begin(), more.end());
  }
  ReportTable table(columns);
  std::vector<std::string> failures;
  const size_t total = layers.size() * directions.size() * targets.size();
  size_t done = 0;
  for (const Layer& layer : layers) {
    for (Direction dir : directions) {
      const ConvProblem pb = scale_batch(layer.problem, opt.batch_scale).with_direction(dir);
      for (auto& target : targets) {
        std::cerr << fmt::format("[{}/{}] {} {} N={} ... ", ++done, total, layer.name, to_string(dir), pb.n) << std::flush;
        const std::vector<std::string> head = {layer.name, std::string(to_string(dir)), std::to_string(pb.n), shape_text(pb)};
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
          table.add_row(cells, {{"layer", layer.name}, {"direction", to_string(dir)}, {"algorithm", algorithm}, {"skipped", why}});
        };
        if (const std::string why = target->unsupported_reason(pb); !why.empty()) {
          skip_row(target->algorithm(), "unsupported: " + why);
          continue;
        }
        std::string check = "skipped";
        try {
          target->prepare(pb);
          if (opt.verify) check = fmt::format("{:.1e}", target->verify());
        } catch (const Error& e) {
          failures.push_back(fmt::format("{} {} {}: {}", layer.name, to_string(dir), target->algorithm(), e.what()));
          skip_row(target->algorithm(), fmt::format("FAILED: {}", e.what()));
          continue;
        }
        const Timing t = target->time(opt.warmup, opt.repeats);
        const double gflops = pb.flops() / (t.median_ms * 1e6);
        const double gbs = pb.bytes() / (t.median_ms * 1e6);
        std::cerr << fmt::format("{:.3f} ms, {:.1f} GFLOP/s\n", t.median_ms, gflops);
        auto cells = head;
        cells.insert(cells.end(), {fmt::format("{:.3f}", t.median_ms), fmt::format("{:.1f}", gflops),
                                   fmt::format("{:.1f}", gbs)});
        if (against) cells.push_back(peak > 0 ? fmt::format("{:.1f}", 100 * gflops / peak) : "-");
        cells.insert(cells.end(), {device.info().id, target->algorithm(), check});
        nlohmann::json compared;
        if (against) {
          try {
            const std::vector<float> mine = target->output();
            auto outcome = against->compare(pb, *target, mine, t.median_ms, opt.warmup, opt.repeats);
            cells.insert(cells.end(), outcome.cells.begin(), outcome.cells.end());
            compared = std::move(outcome.values);
            for (auto& f : outcome.failures) failures.push_back(fmt::format("{} {}: {}", layer.name, to_string(dir), f));
          } catch (const Error& e) {
            const auto none = against->empty_cells();
            cells.insert(cells.end(), none.begin(), none.end());
            failures.push_back(fmt::format("{} {}: reading convtune's output: {}", layer.name, to_string(dir), e.what()));
          }
        }
        table.add_row(cells, {{"layer", layer.name},
                              {"direction", to_string(dir)},
                              {"problem", pb.to_string()},
                              {"ms", t.median_ms},
                              {"min_ms", t.min_ms},
                              {"gflops", gflops},
                              {"gbytes_per_s", gbs},
                              {"device", device.info().id},
                              {"algorithm", target->algorithm()},
                              {"check_rel_l2", check},
                              {"percent_of_fp32_peak", peak > 0 ? nlohmann::json(100 * gflops / peak) : nlohmann::json()},
                              {"against", compared}});
      }
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
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Time convolution layers (a suite or --layer) on a device");
  cmd->add_option("--suite", opt->suite, "Suite name (alexnet, seeds) or path of a suite file");
  cmd->add_option("--layer", opt->layers,
                  "One layer, e.g. N=1,C=64,H=27,K=192,R=5,pad=2 (W defaults to H, S to R); repeatable");
  cmd->add_option("--backend,--device", opt->device, "Device: cpu, opencl[:N], cuda[:N] or best")
      ->capture_default_str();
  cmd->add_option("--algorithm", opt->algorithm, "CPU backend path: reference, sequential or threaded")
      ->capture_default_str();
  cmd->add_option("--family", opt->family, "Kernel family on a kernel device: auto, all, implicit_gemm, direct_tiled, im2col_gemm")
      ->capture_default_str();
  cmd->add_option("--config", opt->config, "Parameters for --family, e.g. TILE_M=64,TILE_N=64 (default: the family's)");
  cmd->add_option("--direction", opt->direction, "fwd, bwd-data, bwd-filter or all")->capture_default_str();
  cmd->add_option("--batch-scale", opt->batch_scale, "Multiply every layer's N by this (at least 1 remains)")
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "Untimed runs before timing")->capture_default_str();
  cmd->add_option("--repeats", opt->repeats, "Timed runs; the median is reported")->capture_default_str();
  cmd->add_flag("!--no-verify", opt->verify, "Skip the batch-1 check against the reference");
  cmd->add_option("--out", opt->out, "Also write the table to FILE.csv, FILE.json or FILE.md (repeatable)");
  cmd->add_option("--against", opt->against,
                  "Also run these reference libraries on the same inputs: cudnn, clblast, onednn (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--math", opt->math, "Reference math: fp32 (cuDNN tensor cores off) or tf32")->capture_default_str();
  cmd->add_option("--markdown", opt->markdown, "With --against: write a Markdown section (device, libraries, "
                  "command, table) to FILE");
  cmd->callback([opt] { run_bench(*opt); });
}

}  // namespace convtune::cli
