// `convtune bench`: times a suite or single layers on a device, all directions, with a correctness check
// against the reference first; prints ms, GFLOP/s, GB/s and writes CSV/JSON/Markdown with --out.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <vector>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/host_convolution.h"
#include "convtune/tensor.h"
#include "src/conformance/conformance.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/report_table.h"
#include "tools/convtune/suite.h"

namespace convtune::cli {

namespace {

struct BenchOptions {
  std::string suite;
  std::vector<std::string> layers;
  std::string device = "cpu";
  std::string algorithm = "threaded";
  std::string direction = "all";
  double batch_scale = 1.0;
  int warmup = 1;
  int repeats = 5;
  bool verify = true;
  std::string out;
};

std::vector<Direction> directions_of(const std::string& text) {
  if (text == "all") return {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};
  return {parse_direction(text)};
}

std::string shape_text(const ConvProblem& p) {
  std::string s = fmt::format("{}->{} {}x{} {}x{}/s{}/p{}", p.c, p.k, p.h, p.w, p.r, p.s, p.stride.h, p.pad.h);
  if (p.dilation.h > 1 || p.dilation.w > 1) s += fmt::format("/d{}", p.dilation.h);
  if (p.groups > 1) s += fmt::format("/g{}", p.groups);
  return s;
}

bool has_convolutions(const Device& device) { return device.info().backend == BackendKind::Cpu; }

// --backend best: the best device present, if convtune has convolution kernels for it; else the CPU paths.
Device& choose_device(const std::string& spec) {
  Registry& registry = Registry::instance();
  if (spec != "best") return registry.find(spec);
  Device& best = registry.best();
  if (has_convolutions(best)) return best;
  std::cerr << fmt::format("bench: the best device, {} ({}), has no convolution kernels in this version; "
                           "falling back to the CPU backend\n", best.info().id, best.info().name);
  return registry.find("cpu");
}

std::unique_ptr<HostConvolution> make_implementation(Device& device, const std::string& algorithm) {
  if (device.info().backend == BackendKind::Cpu) return make_cpu_convolution(algorithm);
  throw Unsupported(fmt::format(
      "device {} has no convolution kernels in this version of convtune (they arrive with the kernel families); "
      "use --backend cpu", device.info().id));
}

void run_bench(const BenchOptions& opt) {
  std::vector<Layer> layers;
  if (!opt.suite.empty()) layers = load_suite(opt.suite);
  int index = 0;
  for (const auto& text : opt.layers) {
    try {
      layers.push_back({fmt::format("layer{}", ++index), parse_problem(text)});
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("--layer '{}': {}", text, e.what()));
    }
  }
  if (layers.empty()) throw InvalidArgument("nothing to run: give --suite NAME or --layer N=..,C=..,H=..,K=..,R=..");
  if (opt.repeats < 1) throw InvalidArgument(fmt::format("--repeats={} is invalid: expected 1 or more", opt.repeats));
  const auto directions = directions_of(opt.direction);

  Device& device = choose_device(opt.device);
  auto impl = make_implementation(device, opt.algorithm);
  std::cerr << fmt::format("bench: {} layer(s) x {} direction(s) on {} ({}), algorithm {}\n", layers.size(),
                           directions.size(), device.info().id, device.info().name, impl->name());

  ReportTable table({"layer", "dir", "N", "shape", "ms", "GFLOP/s", "GB/s", "device", "algorithm", "check"});
  const size_t total = layers.size() * directions.size();
  size_t done = 0;
  for (const Layer& layer : layers) {
    for (Direction dir : directions) {
      ConvProblem pb = scale_batch(layer.problem, opt.batch_scale).with_direction(dir);
      pb.validate();
      std::cerr << fmt::format("[{}/{}] {} {} N={} ... ", ++done, total, layer.name, to_string(dir), pb.n) << std::flush;
      if (const std::string why = impl->unsupported_reason(pb); !why.empty()) {
        std::cerr << "unsupported\n";
        table.add_row({layer.name, std::string(to_string(dir)), std::to_string(pb.n), shape_text(pb), "-", "-", "-",
                       device.info().id, impl->name(), "unsupported: " + why},
                      {{"layer", layer.name}, {"direction", to_string(dir)}, {"unsupported", why}});
        continue;
      }
      Tensor x({pb.x_elements()}), w({pb.w_elements()}), y({pb.y_elements()});
      x.fill_random(1), w.fill_random(2), y.fill_random(3);  // never all zero: zeros hide unwritten outputs
      const ConvOperands operands{x.data(), w.data(), y.data()};
      // Correctness first: one run at full size, checked at sampled elements against the float64 reference.
      std::string check = "skipped";
      if (opt.verify) {
        impl->run(pb, operands);
        const auto result = conformance::check_sampled(pb, operands, 512, 42);
        if (!result.passed) {
          throw Error(fmt::format("{} computes {} {} wrongly: {}", impl->name(), layer.name, to_string(dir), result.message));
        }
        check = fmt::format("{:.1e}", result.rel_l2_error);
      }
      const Timing t = measure(device.queue(), [&] { impl->run(pb, operands); }, opt.warmup, opt.repeats);
      const double gflops = pb.flops() / (t.median_ms * 1e6);
      const double gbs = pb.bytes() / (t.median_ms * 1e6);
      std::cerr << fmt::format("{:.3f} ms, {:.1f} GFLOP/s\n", t.median_ms, gflops);
      table.add_row({layer.name, std::string(to_string(dir)), std::to_string(pb.n), shape_text(pb),
                     fmt::format("{:.3f}", t.median_ms), fmt::format("{:.1f}", gflops), fmt::format("{:.1f}", gbs),
                     device.info().id, impl->name(), check},
                    {{"layer", layer.name},
                     {"direction", to_string(dir)},
                     {"problem", pb.to_string()},
                     {"ms", t.median_ms},
                     {"min_ms", t.min_ms},
                     {"gflops", gflops},
                     {"gbytes_per_s", gbs},
                     {"device", device.info().id},
                     {"algorithm", impl->name()},
                     {"check_rel_l2", check}});
    }
  }
  std::cout << fmt::format("device: {} ({}), algorithm {}, median of {} after {} warm-up\n", device.info().id,
                           device.info().name, impl->name(), opt.repeats, opt.warmup);
  table.print(std::cout);
  if (!opt.out.empty()) {
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    table.write(opt.out, {{"device", device.info().name},
                          {"device_id", device.info().id},
                          {"driver", device.info().driver_version},
                          {"date", date},
                          {"batch_scale", opt.batch_scale},
                          {"repeats", opt.repeats}});
    std::cout << fmt::format("wrote {}\n", opt.out);
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
  cmd->add_option("--algorithm", opt->algorithm, "CPU path: reference, sequential or threaded")->capture_default_str();
  cmd->add_option("--direction", opt->direction, "fwd, bwd-data, bwd-filter or all")->capture_default_str();
  cmd->add_option("--batch-scale", opt->batch_scale, "Multiply every layer's N by this (at least 1 remains)")
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "Untimed runs before timing")->capture_default_str();
  cmd->add_option("--repeats", opt->repeats, "Timed runs; the median is reported")->capture_default_str();
  cmd->add_flag("!--no-verify", opt->verify, "Skip the batch-1 check against the reference");
  cmd->add_option("--out", opt->out, "Also write the table to FILE.csv, FILE.json or FILE.md");
  cmd->callback([opt] { run_bench(*opt); });
}

}  // namespace convtune::cli
