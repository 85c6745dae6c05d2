// `convtune peak`: a device's measured ceilings (copy/fill bandwidth, FP32 FMA throughput, launch latency)
// and the fill experiment of the first seed document, printed as tables or written as JSON.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "src/backend/program_cache.h"
#include "src/core/atomic_file.h"
#include "src/measure/cpu_ceilings.h"
#include "src/measure/device_ceilings.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/output_path.h"
#include "tools/convtune/progress.h"
#include "tools/convtune/report_table.h"

namespace convtune::cli {

namespace {

struct PeakOptions {
  std::string device = kDefaultDevice;
  int64_t size = 10000;
  int repeats = 10;
  size_t buffer_mib = 0;
  bool skip_fill = false;
  bool skip_ceilings = false;
  std::string out;
  bool json = false;
};

// One line per measurement, numbered against the most there can be, with an estimate of the rest from the mean so
// far (the steps differ in length, so it is rough, and says so).
class StepProgress {
 public:
  explicit StepProgress(int most) : most_(std::max(most, 1)), start_(std::chrono::steady_clock::now()) {}
  void operator()(const std::string& what) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string eta =
        done_ > 0 ? fmt::format(", ETA ~{}", format_duration(elapsed / done_ * std::max(most_ - done_, 0))) : "";
    ++done_;
    std::cerr << fmt::format("peak: [{}/{}{}] measuring {}...\n", done_, most_, eta, what);
  }

 private:
  int most_;
  int done_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// Where the text goes: standard output, or nowhere with --json (standard output then holds only the JSON).
std::ostream& text_out(const PeakOptions& opt) {
  static std::ostringstream discarded;
  return opt.json ? discarded : std::cout;
}

void run_peak(const PeakOptions& opt) {
  if (!opt.skip_fill) check_fill_size(opt.size);  // before the ceilings, which take seconds to measure
  if (!opt.out.empty()) prepare_output(opt.out, false, "--out");  // before the measurements, not after
  Device& device = choose_device(opt.device, "peak");
  std::ostream& out = text_out(opt);
  const bool cpu = device.info().backend == BackendKind::Cpu, kernels = device.info().can_run_kernels;
  // The ceilings: one CPU step or four device steps; the fill: the CPU loops, then up to nine kernels.
  auto progress = std::make_shared<StepProgress>((opt.skip_ceilings ? 0 : cpu ? 1 : kernels ? 4 : 0) +
                                                 (opt.skip_fill ? 0 : 1 + (kernels ? 9 : 0)));
  const std::function<void(const std::string&)> say = [progress](const std::string& what) { (*progress)(what); };
  const DeviceInfo& info = device.info();
  out << fmt::format("device: {} ({}), driver {}, {} compute units\n\n", info.id, info.name,
                           info.driver_version, info.compute_units);
  nlohmann::ordered_json doc = {{"convtune", version_text()}, {"device", info.name},    {"device_id", info.id},
                        {"driver", info.driver_version}, {"command", command_line()}};

  if (!opt.skip_ceilings && info.backend == BackendKind::Cpu) {
    // The CPU runs convtune's C++ paths, not kernels: its ceilings are SIMD FMA loops and memory copies.
    say("CPU FMA throughput and memory bandwidth");
    CpuCeilingOptions co;
    co.buffer_bytes = opt.buffer_mib << 20;
    co.repeats = opt.repeats;
    const CpuCeilings c = measure_cpu_ceilings(co);
    out << fmt::format("CPU ceilings ({}, {} FP32 lanes; best of {}; buffers of {} MiB):\n", c.isa, c.lanes,
                             opt.repeats, c.buffer_bytes >> 20);
    out << fmt::format("  FP32 FMA, 1 thread    {:10.1f} GFLOP/s\n", c.fma_gflops_one);
    out << fmt::format("  FP32 FMA, {} threads  {:10.1f} GFLOP/s\n", c.threads, c.fma_gflops_all);
    out << fmt::format("  copy, {} threads      {:10.1f} GB/s (bytes read + written)\n", c.threads, c.copy_gbs);
    out << fmt::format("  read, {} threads      {:10.1f} GB/s\n\n", c.threads, c.read_gbs);
    doc["cpu_ceilings"] = {{"isa", c.isa},           {"lanes", c.lanes},           {"threads", c.threads},
                           {"fma_gflops_one_thread", c.fma_gflops_one}, {"fma_gflops_all_threads", c.fma_gflops_all},
                           {"copy_gbs", c.copy_gbs}, {"read_gbs", c.read_gbs},     {"buffer_bytes", c.buffer_bytes}};
  } else if (!opt.skip_ceilings) {
    if (!info.can_run_kernels) {
      out << fmt::format("ceilings: skipped: {} runs no kernels ({}); use --device opencl for PoCL\n\n", info.id,
                               info.cannot_run_reason);
    } else {
      CeilingOptions co;
      co.buffer_bytes = opt.buffer_mib << 20;
      co.repeats = opt.repeats;
      co.progress = say;
      const Ceilings c = measure_ceilings(device, co);
      out << fmt::format("ceilings (buffers of {} MiB, median of {}):\n", c.buffer_bytes >> 20, opt.repeats);
      out << fmt::format("  copy, kernel          {:10.1f} GB/s (bytes read + written)\n", c.copy_gbs);
      out << fmt::format("  copy, runtime's own   {:10.1f} GB/s (bytes read + written)\n", c.copy_api_gbs);
      out << fmt::format("  fill                  {:10.1f} GB/s (bytes written)\n", c.fill_gbs);
      out << fmt::format("  FP32 FMA              {:10.1f} GFLOP/s\n", c.fma_gflops);
      out << fmt::format("  launch latency        {:10.2f} us (one empty launch + wait, host clock)\n",
                               c.launch_latency_us);
      out << fmt::format("  launch rate           {:10.2f} us per launch (1000 back to back)\n\n", c.launch_rate_us);
      doc["ceilings"] = {{"copy_kernel_gbs", c.copy_gbs},       {"copy_runtime_gbs", c.copy_api_gbs},
                         {"fill_gbs", c.fill_gbs},              {"fma_gflops", c.fma_gflops},
                         {"launch_latency_us", c.launch_latency_us}, {"launch_rate_us", c.launch_rate_us},
                         {"buffer_bytes", c.buffer_bytes}};
    }
  }

  if (!opt.skip_fill) {
    out << fmt::format("fill experiment: a {} x {} float table ({:.0f} MB), median of {}\n", opt.size,
                             opt.size, opt.size * opt.size * 4 / 1e6, opt.repeats);
    const auto rows = run_fill_experiment(info.can_run_kernels ? &device : nullptr, opt.size, opt.repeats, say);
    ReportTable table({"method", "ms", "GB/s", "speed-up", "note"});
    for (const auto& r : rows) {
      const bool ran = r.ms > 0;
      table.add_row({r.method, ran ? fmt::format("{:.3f}", r.ms) : "-", ran ? fmt::format("{:.1f}", r.gbs) : "-",
                     ran ? fmt::format("{:.1f}x", r.speedup) : "-", r.note},
                    {{"method", r.method}, {"ms", r.ms}, {"gbytes_per_s", r.gbs}, {"speedup", r.speedup}, {"note", r.note}});
    }
    table.print(out, table_width());
    doc["fill_experiment"] = {{"size", opt.size}, {"rows", table.json()}};
  }
  const ProgramCache& cache = ProgramCache::instance();
  out << fmt::format("\nprograms: {} compiled, {} loaded from the program cache ({})\n", cache.compiles(),
                           cache.disk_hits(), cache.directory().empty() ? "memory only" : cache.directory().string());
  if (!opt.out.empty()) {
    write_file_atomic(opt.out, doc.dump(2) + "\n");
    out << fmt::format("wrote {}\n", opt.out);
  }
  if (opt.json) std::cout << doc.dump(2) << "\n";
}

}  // namespace

void add_peak_command(CLI::App& app) {
  auto opt = std::make_shared<PeakOptions>();
  auto* cmd = app.add_subcommand("peak", "Measure a device's ceilings (bandwidth, FP32 FMA throughput, launch "
                                         "latency) and time filling a large table by several methods");
  add_device_option(cmd, opt->device);
  cmd->add_option("--size", opt->size, "Fill experiment table is SIZE x SIZE floats")->capture_default_str();
  cmd->add_option("--repeats", opt->repeats, "Timed runs per measurement (median reported)")
      ->capture_default_str()
      ->check(positive_integer());
  cmd->add_option("--buffer-mib", opt->buffer_mib, "Bandwidth buffer size in MiB (default 1024, less on small devices)");
  cmd->add_flag("--skip-fill", opt->skip_fill, "Only the ceilings");
  cmd->add_flag("--skip-ceilings", opt->skip_ceilings, "Only the fill experiment");
  cmd->add_option("--out", opt->out, "Also write the results to FILE.json");
  add_json_flag(cmd, opt->json);
  cmd->callback([opt, cmd] {
    refuse_inapplicable(cmd, "--size", !opt->skip_fill, "sizes the fill experiment, which --skip-fill leaves out");
    refuse_inapplicable(cmd, "--buffer-mib", !opt->skip_ceilings,
                        "sizes the bandwidth buffers of the ceilings, which --skip-ceilings leaves out");
    run_peak(*opt);
  });
}

}  // namespace convtune::cli
