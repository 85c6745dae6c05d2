// implicit_gemm_sweep: measures implicit_gemm configurations on real layers (AlexNet 2-5 at N=128, seed 000's
// ucla5x5) on one or more devices: each configuration is compiled (in parallel), checked against the float64
// reference at sampled elements on random inputs, then timed (median of --repeats after warm-up). Prints GFLOP/s
// per layer per configuration and the best per layer; --csv appends every row to a file. With --conformance it
// also checks the standard conformance cases (full reference) in all directions with a few configurations.
// Not a ctest test: a measurement tool for the GPU machine (scripts/gpu/pack.sh carries it in .carry/bin).
//
//   implicit_gemm_sweep --device cuda:0 --device opencl:0 [--layer alex3|PROBLEM|none]... [--direction fwd]...
//                       [--sweep] [--config TILE_M=128,...]... [--config-file FILE] [--no-default]
//                       [--repeats 10] [--budget SECONDS] [--jobs 12] [--conformance] [--csv FILE]
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/backend/cpu/reference.h"
#include "src/conformance/conformance.h"
#include "tests/support/plan_check.h"

using namespace convtune;

namespace {

const std::vector<std::pair<std::string, std::string>> kLayers = {
    {"alex2", "N=128,C=64,H=27,W=27,K=192,R=5,S=5,stride=1,pad=2"},
    {"alex3", "N=128,C=192,H=13,W=13,K=384,R=3,S=3,stride=1,pad=1"},
    {"alex4", "N=128,C=384,H=13,W=13,K=256,R=3,S=3,stride=1,pad=1"},
    {"alex5", "N=128,C=256,H=13,W=13,K=256,R=3,S=3,stride=1,pad=1"},
    {"ucla5x5", "N=1,C=256,H=228,W=228,K=256,R=5,S=5,stride=1,pad=0"},
};

struct Options {
  std::vector<std::string> devices, layers, configs;
  std::vector<std::pair<std::string, std::string>> file_configs;  // (direction or "all", configuration)
  std::vector<Direction> directions;
  bool sweep = false, conformance = false, defaults = true;
  int repeats = 10, jobs = 12;
  double budget = 1e9;  // seconds per device for the layer measurements
  std::string csv;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The configurations a sweep tries: large tiles (the ones that can reach half of an H100's FP32 peak) with the
// loads staged through registers or copied asynchronously, two reduction depths, two register caps.
std::vector<Config> sweep_configs(const ConvProblem& pb, const DeviceInfo& info) {
  struct Tiling {
    int64_t tm, tn, thm, thn;
  };
  const Tiling tilings[] = {{128, 128, 16, 16}, {128, 64, 16, 16}, {64, 128, 16, 16}, {64, 256, 8, 32},
                            {128, 64, 16, 8},   {64, 128, 8, 16},  {64, 64, 8, 8},    {256, 64, 32, 8}};
  std::vector<Config> out;
  const KernelFamily& family = kernel_family("implicit_gemm");
  for (const Tiling& t : tilings)
    for (int64_t tk : {8, 16})
      for (auto [async, capped] : {std::pair<int64_t, bool>{1, true}, {0, true}, {0, false}, {1, false}}) {
        // The cap that lets two (256 work-items) or three (128) work-groups share a multiprocessor.
        const int64_t regs = !capped ? 0 : t.thm * t.thn >= 256 ? 128 : 168;
        Config c = {{"TILE_M", t.tm},       {"TILE_N", t.tn},   {"TILE_K", tk},          {"THREADS_M", t.thm},
                    {"THREADS_N", t.thn},   {"VECTOR_WIDTH", 4}, {"LOCAL_PADDING", 4},   {"UNROLL_K", tk},
                    {"SPLIT_K", 1},         {"ASYNC_COPY", async}, {"MAX_REGISTERS", regs}};
        if (config_problem(family, c, pb, info).empty()) out.push_back(c);
      }
  return out;
}

std::vector<float> random_values(int64_t count, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    f = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  return v;
}

// Compiles every configuration's program on `jobs` threads (the program cache keeps them for Plan::create).
std::map<std::string, std::string> precompile(Device& device, const ConvProblem& pb, const std::vector<Config>& configs,
                                              int jobs) {
  const KernelFamily& family = kernel_family("implicit_gemm");
  std::map<std::string, std::string> errors;
  std::mutex mutex;
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, jobs); ++j) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < configs.size(); i = next++) {
        try {
          // Invalid configurations fail in Plan::create with the constraint's name; nothing to compile.
          if (!config_problem(family, configs[i], pb, device.info()).empty()) continue;
          device.build(family.recipe(pb, {}, configs[i], device.info()).source);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          errors[to_string(configs[i])] = e.what();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// "128x128x8 t16x16 v4 p4 u8 a1 r128 s1": the table's short form of a configuration (the CSV has the full one).
std::string brief(const Config& c) {
  auto g = [&](const char* k) { return c.count(k) ? c.at(k) : -1; };
  return fmt::format("{}x{}x{} t{}x{} v{} p{} u{} a{} r{} s{}", g("TILE_M"), g("TILE_N"), g("TILE_K"), g("THREADS_M"),
                     g("THREADS_N"), g("VECTOR_WIDTH"), g("LOCAL_PADDING"), g("UNROLL_K"), g("ASYNC_COPY"),
                     g("MAX_REGISTERS"), g("SPLIT_K"));
}

struct Row {
  std::string device, layer, direction, config, status, brief;
  double ms = 0, gflops = 0;
};

std::string first_line(const std::string& text, size_t max = 300) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

void append_csv(const std::string& path, const Row& r) {
  if (path.empty()) return;
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return;
  std::string status = r.status;
  std::replace(status.begin(), status.end(), '"', '\'');
  fmt::print(f, "{},{},{},\"{}\",{:.4f},{:.1f},\"{}\"\n", r.device, r.layer, r.direction, r.config, r.ms, r.gflops,
             status);
  std::fclose(f);
}

// Measures every configuration of one layer and direction on one device; returns the rows.
std::vector<Row> measure_layer(Device& device, const std::string& layer, const ConvProblem& pb,
                               std::vector<Config> configs, const Options& opt, Clock::time_point device_start) {
  std::vector<Row> rows;
  const DeviceInfo& info = device.info();
  const std::string dir(to_string(pb.direction));
  // Deduplicate, keeping order.
  std::set<std::string> seen;
  std::vector<Config> unique;
  for (const Config& c : configs)
    if (seen.insert(to_string(c)).second) unique.push_back(c);

  const auto compile_start = Clock::now();
  const auto compile_errors = seconds_since(device_start) > opt.budget ? std::map<std::string, std::string>{}
                                                                       : precompile(device, pb, unique, opt.jobs);
  fmt::print("  {} {} {}: {} configurations compiled in {:.1f} s ({} failed)\n", info.id, layer, dir, unique.size(),
             seconds_since(compile_start), compile_errors.size());
  std::fflush(stdout);

  // One workload for every configuration: seeded inputs, poisoned output, reference values computed once.
  harness::Workload workload(device, pb, 77);
  Queue& queue = workload.queue();
  const Operands ops = workload.operands();

  for (const Config& config : unique) {
    Row row{info.id, layer, dir, to_string(config), "", brief(config), 0, 0};
    if (seconds_since(device_start) > opt.budget) {
      row.status = "skipped (time budget)";
    } else if (auto it = compile_errors.find(row.config); it != compile_errors.end()) {
      row.status = "compile failed: " + first_line(it->second);
    } else {
      try {
        Plan plan = Plan::create(device, {pb, {}, "implicit_gemm", config});
        workload.poison();
        plan.run(queue, ops);
        queue.finish();
        const auto check = workload.verify_sampled(512);
        if (!check.passed) {
          row.status = "WRONG: " + check.message;
        } else {
          const Timing t = measure(queue, [&] { plan.run(queue, ops); }, 2, opt.repeats);
          row.ms = t.median_ms;
          row.gflops = pb.flops() / (t.median_ms * 1e6);
          row.status = fmt::format("ok (rel err {:.1e}, min {:.3f} ms, max {:.3f} ms)", check.rel_l2_error, t.min_ms,
                                   t.max_ms);
        }
      } catch (const std::exception& e) {
        row.status = "error: " + first_line(e.what());
      }
    }
    fmt::print("  {:9} {:8} {:10} {:8.1f} GFLOP/s {:8.3f} ms  {:40} {}\n", info.id, layer, dir, row.gflops, row.ms,
               row.brief, row.status.substr(0, row.status.rfind(", min")) + (row.status.rfind("ok", 0) == 0 ? ")" : ""));
    std::fflush(stdout);
    append_csv(opt.csv, row);
    rows.push_back(row);
  }
  return rows;
}

// The standard conformance cases in every direction with the device's default and two variants, full reference.
int run_conformance(Device& device, const Options& opt) {
  const KernelFamily& family = kernel_family("implicit_gemm");
  const DeviceInfo& info = device.info();
  const auto start = Clock::now();
  int checks = 0, failures = 0;
  uint64_t seed = 4004;
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    std::vector<std::pair<ConvProblem, std::vector<Config>>> work;
    for (const auto& c : conformance::standard_cases()) {
      const ConvProblem pb = c.problem.with_direction(d);
      std::vector<Config> configs = {family.default_config(pb, info)};
      Config staged = configs[0];
      staged["ASYNC_COPY"] = 0;
      configs.push_back(staged);
      Config small = {{"TILE_M", 32},    {"TILE_N", 64},      {"TILE_K", 16},       {"THREADS_M", 8},
                      {"THREADS_N", 16}, {"VECTOR_WIDTH", 2}, {"LOCAL_PADDING", 2}, {"UNROLL_K", 4},
                      {"SPLIT_K", d == Direction::BackwardFilter ? 2 : 1},
                      {"ASYNC_COPY", configs[0].at("ASYNC_COPY")}, {"MAX_REGISTERS", 0}};
      if (config_problem(family, small, pb, info).empty()) configs.push_back(small);
      work.push_back({pb, configs});
    }
    // Compile all of this direction in parallel first.
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (int j = 0; j < opt.jobs; ++j)
      threads.emplace_back([&] {
        for (size_t i = next++; i < work.size(); i = next++)
          for (const Config& c : work[i].second) {
            try {
              device.build(family.recipe(work[i].first, {}, c, info).source);
            } catch (const std::exception&) {
            }
          }
      });
    for (auto& t : threads) t.join();
    for (const auto& [pb, configs] : work) {
      ++seed;
      for (const Config& c : configs) {
        ++checks;
        try {
          const auto result = testing_support::check_plan(device, pb, "implicit_gemm", c, seed);
          if (!result.passed) {
            ++failures;
            fmt::print("  CONFORMANCE FAIL {} {} [{}]: {}\n", info.id, pb.to_string(), to_string(c), result.message);
          }
        } catch (const std::exception& e) {
          ++failures;
          fmt::print("  CONFORMANCE ERROR {} {} [{}]: {}\n", info.id, pb.to_string(), to_string(c), first_line(e.what()));
        }
      }
    }
  }
  fmt::print("conformance on {}: {} checks, {} failures ({:.1f} s)\n", info.id, checks, failures, seconds_since(start));
  return failures;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument(fmt::format("{} needs a value", a));
      return argv[++i];
    };
    if (a == "--device") o.devices.push_back(value());
    else if (a == "--layer") o.layers.push_back(value());
    else if (a == "--direction") o.directions.push_back(parse_direction(value()));
    else if (a == "--config") o.configs.push_back(value());
    else if (a == "--config-file") {
      // One "DIRECTION CONFIG" a line (DIRECTION: fwd, bwd-data, bwd-filter or all); # starts a comment.
      const std::string path = value();
      FILE* f = std::fopen(path.c_str(), "r");
      if (!f) throw InvalidArgument(fmt::format("cannot read {}", path));
      char line[4096];
      while (std::fgets(line, sizeof line, f)) {
        std::string text(line);
        text = text.substr(0, text.find('#'));
        const size_t start = text.find_first_not_of(" \t\r\n");
        if (start == std::string::npos) continue;
        text = text.substr(start);
        const size_t space = text.find_first_of(" \t");
        if (space == std::string::npos) throw InvalidArgument(fmt::format("{}: '{}' is not DIRECTION CONFIG", path, text));
        std::string config = text.substr(space);
        config.erase(0, config.find_first_not_of(" \t"));
        config.erase(config.find_last_not_of(" \t\r\n") + 1);
        o.file_configs.push_back({text.substr(0, space), config});
      }
      std::fclose(f);
    }
    else if (a == "--sweep") o.sweep = true;
    else if (a == "--no-default") o.defaults = false;
    else if (a == "--conformance") o.conformance = true;
    else if (a == "--repeats") o.repeats = std::stoi(value());
    else if (a == "--jobs") o.jobs = std::stoi(value());
    else if (a == "--budget") o.budget = std::stod(value());
    else if (a == "--csv") o.csv = value();
    else throw InvalidArgument(fmt::format("unknown option {}", a));
  }
  if (o.devices.empty()) o.devices.push_back("best");
  if (o.layers.empty())
    for (const auto& [name, text] : kLayers) o.layers.push_back(name);
  if (o.layers == std::vector<std::string>{"none"}) o.layers.clear();  // --layer none: conformance only
  if (o.directions.empty()) o.directions.push_back(Direction::Forward);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    std::vector<Row> all;
    int failures = 0;
    for (const std::string& spec : opt.devices) {
      Device* found = nullptr;
      try {
        found = &Registry::instance().find(spec);
      } catch (const std::exception& e) {
        fmt::print("device {}: {}\n", spec, first_line(e.what()));
        continue;
      }
      Device& dev = *found;
      const DeviceInfo& info = dev.info();
      fmt::print("== {} ({}, {}, {} compute units, {})\n", info.id, info.name, info.architecture, info.compute_units,
                 info.compiler);
      const auto device_start = Clock::now();
      for (Direction d : opt.directions) {
        for (const std::string& layer : opt.layers) {
          std::string text = layer;
          for (const auto& [name, problem] : kLayers)
            if (name == layer) text = problem;
          const ConvProblem pb = parse_problem(text).with_direction(d);
          const KernelFamily& family = kernel_family("implicit_gemm");
          std::vector<Config> configs;
          if (opt.defaults) configs.push_back(family.default_config(pb, info));
          for (const auto& [direction, c] : opt.file_configs)
            if (direction == "all" || parse_direction(direction) == d) configs.push_back(parse_config(c));
          for (const std::string& c : opt.configs) {
            Config parsed = parse_config(c);
            if (!parsed.count("SPLIT_K")) parsed["SPLIT_K"] = 1;
            configs.push_back(parsed);
          }
          if (opt.sweep)
            for (const Config& c : sweep_configs(pb, info)) configs.push_back(c);
          const auto rows = measure_layer(dev, layer, pb, configs, opt, device_start);
          all.insert(all.end(), rows.begin(), rows.end());
        }
      }
      if (opt.conformance) failures += run_conformance(dev, opt);
    }
    // Best per device, layer and direction; then the default's figure beside it.
    fmt::print("\n== best per layer (GFLOP/s, median of {})\n", opt.repeats);
    std::map<std::string, const Row*> best, first;
    for (const Row& r : all) {
      const std::string key = r.device + " " + r.layer + " " + r.direction;
      if (!first.count(key)) first[key] = &r;  // the default configuration comes first
      if (r.gflops > 0 && (!best.count(key) || r.gflops > best[key]->gflops)) best[key] = &r;
    }
    for (const auto& [key, r] : best) {
      fmt::print("{:30} best {:8.1f} {:40} default {:8.1f} {}\n", key, r->gflops, r->brief, first[key]->gflops,
                 first[key]->brief);
    }
    int wrong = 0;
    for (const Row& r : all) wrong += r.status.rfind("WRONG", 0) == 0;
    fmt::print("wrong results: {}, conformance failures: {}\n", wrong, failures);
    return wrong + failures > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "implicit_gemm_sweep: {}\n", e.what());
    return 2;
  }
}
