// cpu_blocked_sweep: how much tuning buys on the CPU. Per layer and direction it times the cpu_blocked family's
// default configuration, a seeded sample of the other configurations its SearchSpace holds (what the tuner
// searches), and oneDNN on the same workload in the same process, interleaving oneDNN with the candidates so
// background load hits both sides alike; prints the default and best times (the best re-timed in rounds with
// the default and oneDNN, harness::time_in_rounds; --try configurations likewise, before the sample), their ratio to oneDNN, GFLOP/s, % of the measured FMA peak and the default's stage
// times (and writes JSON with --out). With --clock thread it times the calling thread's CPU time, which holds on a
// loaded machine for single-threaded runs; `convtune tune` and `bench --against` are the wall-clock tools.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>

#include "convtune/error.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/core/thread_pool.h"
#include "src/families/cpu_blocked/cpu_blocked.h"
#include "src/harness/implementation.h"
#include "src/harness/workload.h"
#include "src/measure/cpu_ceilings.h"
#include "src/reference_libs/reference_library.h"
#include "src/tuner/search_space.h"
#include "tools/convtune/suite.h"

using namespace convtune;
namespace cb = convtune::cpu_blocked;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string suite;
  std::vector<std::string> layers;
  double batch_scale = 1.0;
  std::string direction = "all";
  int configs = 24;      // sampled configurations besides the default
  int repeats = 5;       // timed runs per candidate
  double budget_s = 60;  // per layer and direction: sampling stops when spent
  std::string out;
  uint64_t seed = 1;
  std::string clock = "wall";  // or "thread": CPU time of the calling thread (single-threaded runs)
  // Configurations tried right after the default (before the sample), each over the default's values: a
  // hypothesis about one layer checked beside the default and oneDNN in one run.
  std::vector<std::string> tries;
};

// "thread" measures the calling thread's CPU time: on a shared machine it leaves out the time other processes
// held the core, so single-threaded comparisons (CONVTUNE_THREADS=1, OMP_NUM_THREADS=1) hold under load.
bool thread_clock = false;

double now_ms() {
  if (thread_clock) {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
  }
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

// The workload's operands as host arrays, x, w and y.
struct Operands {
  float* x;
  float* w;
  float* y;
  explicit Operands(const harness::Workload& workload) {
    const convtune::Operands ops = workload.operands();
    float* host[3];
    for (int i = 0; i < 3; ++i) host[i] = reinterpret_cast<float*>(cpu::host_memory(const_cast<Buffer&>(*ops[i])));
    x = host[0], w = host[1], y = host[2];
  }
};

// Times `body` `repeats` times; returns the sorted times in ms.
std::vector<double> times_of(int repeats, const std::function<void()>& body) {
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const double start = now_ms();
    body();
    t.push_back(now_ms() - start);
  }
  std::sort(t.begin(), t.end());
  return t;
}
double median(const std::vector<double>& t) { return t[t.size() / 2]; }

// One configuration, prepared. Weights are packed once, as the blocked CPU path does while they do not change
// and as oneDNN's weight reorder runs once outside its timing; the input and output conversions are timed.
class Candidate {
 public:
  Candidate(const ConvProblem& pb, const Config& config, const float* w) : conv_(pb, config), config_(config) {
    workspace_.resize((conv_.workspace_bytes() + 3) / 4);
    conv_.pack_weights(w);
  }
  void run(Operands& op) { conv_.run(op.x, op.w, op.y, workspace_.data()); }
  const Config& config() const { return config_; }
  cb::Convolution& conv() { return conv_; }

 private:
  cb::Convolution conv_;
  Config config_;
  std::vector<float> workspace_;
};

void sweep(const Options& opt) {
  const auto layers = cli::select_layers(opt.suite, opt.layers);
  const auto directions = cli::parse_directions(opt.direction);
  // The ceiling of the threads timed: every core's FMA loop, or with --clock thread one core's, timed on the same
  // clock (best of 10).
  double peak = 0;
  if (thread_clock) {
    float sink = 0;
    for (int r = 0; r < 10; ++r) {
      const double start = now_ms();
      const double flops = cpu_measure::fma_loop(cpu::available_isas().front(), 3'000'000, &sink);
      peak = std::max(peak, flops / ((now_ms() - start) * 1e6));
    }
  } else {
    peak = cpu_fp32_peak_gflops();
  }
  std::cerr << fmt::format("sweep: measured FP32 peak {:.0f} GFLOP/s ({}, {} thread(s)), repeats {}, up to {} sampled "
                           "configs, {} clock\n",
                           peak, cb::to_string(cb::active_isa()), ThreadPool::instance().size(), opt.repeats,
                           opt.configs, opt.clock);
  nlohmann::json rows = nlohmann::json::array();
  fmt::print("{:<8} {:<10} {:>4} {:>9} {:>9} {:>6} {:>9} {:>6} {:>7} {:>6}  {}\n", "layer", "dir", "N", "onednn",
             "default", "ratio", "best", "ratio", "GFLOP/s", "%peak", "best config / default's stages (ms)");
  for (const auto& layer : layers) {
    for (Direction dir : directions) {
      const Problem scaled = cli::scale_batch(layer.problem, opt.batch_scale);
      if (!scaled.is_conv()) throw InvalidArgument(fmt::format("{}: cpu_blocked computes convolutions only", layer.name));
      const ConvProblem pb = scaled.conv().with_direction(dir);
      Device& cpu = Registry::instance().find("cpu");
      harness::Workload workload(cpu, pb, 1);
      Operands op(workload);
      auto onednn = reference::make_onednn_reference();
      if (const std::string why = onednn->unavailable_reason(); !why.empty()) throw Error("oneDNN: " + why);
      onednn->prepare(workload);
      onednn->run();
      std::vector<double> onednn_times;
      auto time_onednn = [&] {
        const auto t = times_of(opt.repeats, [&] { onednn->run(); });
        onednn_times.insert(onednn_times.end(), t.begin(), t.end());
      };

      // Candidates: the default first, then a seeded sample of the rest of the family's search space.
      const Config def = cb::default_config(pb);
      const SearchSpace space(kernel_family(cb::kFamilyName), pb, cpu.info());
      std::vector<Config> configs = {def};
      for (const std::string& text : opt.tries) {
        Config c = def;
        for (const auto& [name, value] : parse_config(text)) c[name] = value;
        configs.push_back(c);
      }
      const size_t wanted = configs.size() + static_cast<size_t>(opt.configs);
      for (const Config& c : space.sample(static_cast<size_t>(opt.configs) + 1, opt.seed)) {
        if (configs.size() >= wanted) break;
        if (c != def) configs.push_back(c);
      }
      struct Result {
        Config config;
        double ms;
        cb::StageTimes stages;
      };
      std::vector<Result> results;
      // A side of harness::time_in_rounds, timed on this tool's clock.
      auto side_of = [](std::function<void()> run, bool openmp) {
        harness::RoundSide side;
        side.run = std::move(run);
        side.time = [](const std::function<void()>& work) { return times_of(1, work)[0]; };
        side.settle_after = openmp;
        return side;
      };
      // The tries: prepared together and timed in rounds with the default and oneDNN, so that a slow spell of a
      // shared host hits them all alike; each line is its median over the rounds.
      if (!opt.tries.empty()) {
        std::vector<std::unique_ptr<Candidate>> tried;
        std::vector<harness::RoundSide> sides;
        for (size_t i = 0; i <= opt.tries.size(); ++i) {
          tried.push_back(std::make_unique<Candidate>(pb, configs[i], op.w));
          sides.push_back(side_of([&c = *tried.back(), &op] { c.run(op); }, false));
        }
        sides.push_back(side_of([&] { onednn->run(); }, true));
        harness::time_in_rounds(sides, 1, opt.repeats);
        const double ms_o = harness::median_ms(sides.back().samples);
        for (size_t i = 0; i < tried.size(); ++i) {
          const auto& t = sides[i].samples;
          fmt::print("  {} {}: {:.3f} ms (min {:.3f}), {:.2f} of oneDNN\n", i == 0 ? "default" : "tried",
                     to_string(configs[i]), harness::median_ms(t), *std::min_element(t.begin(), t.end()),
                     harness::median_ms(t) / ms_o);
        }
        fmt::print("  oneDNN: {:.3f} ms, the same {} rounds\n", ms_o, opt.repeats);
      }
      const auto start = Clock::now();
      time_onednn();
      for (size_t i = 0; i < configs.size(); ++i) {
        if (i > 0 && std::chrono::duration<double>(Clock::now() - start).count() > opt.budget_s) break;
        Candidate cand(pb, configs[i], op.w);
        if (i == 0) workload.poison();
        cand.run(op);  // warm-up (and first-touch of the workspace)
        if (i == 0) {
          // The default is checked against the float64 reference at sampled elements before it counts.
          const auto check = workload.verify_sampled(256);
          if (!check.passed) throw Error(fmt::format("{} {}: default config wrong: {}", layer.name, to_string(dir), check.message));
        }
        const auto t = times_of(opt.repeats, [&] { cand.run(op); });
        results.push_back({configs[i], median(t), cand.conv().last_times()});
        if (i % 4 == 3) time_onednn();  // oneDNN again now and then, under the same load as the candidates
      }
      time_onednn();
      // The best candidate and the default, re-timed alternating with oneDNN.
      const auto best_it = std::min_element(results.begin(), results.end(), [](auto& a, auto& b) { return a.ms < b.ms; });
      Candidate best(pb, best_it->config, op.w);
      Candidate dflt(pb, def, op.w);
      std::vector<harness::RoundSide> sides = {side_of([&] { best.run(op); }, false),
                                               side_of([&] { dflt.run(op); }, false),
                                               side_of([&] { onednn->run(); }, true)};
      harness::time_in_rounds(sides, 1, opt.repeats);
      const double ms_b = harness::median_ms(sides[0].samples), ms_d = harness::median_ms(sides[1].samples),
                   ms_o = harness::median_ms(sides[2].samples);
      const double gflops = pb.flops() / (ms_b * 1e6);
      // % peak from the operations performed (fewer for Winograd and skipped padding taps); GFLOP/s stay effective (the direct sum's count).
      const double percent_peak = 100 * best.conv().performed_flops() / (ms_b * 1e6) / peak;
      const cb::StageTimes& st = dflt.conv().last_times();
      fmt::print("{:<8} {:<10} {:>4} {:>9.3f} {:>9.3f} {:>6.2f} {:>9.3f} {:>6.2f} {:>7.1f} {:>6.1f}  {}  [{} tried] default: in {:.3f} w {:.3f} compute {:.3f} out {:.3f}\n",
                 layer.name, to_string(dir), pb.n, ms_o, ms_d, ms_d / ms_o, ms_b, ms_b / ms_o, gflops,
                 percent_peak, to_string(best_it->config), results.size(), st.input_ms, st.weights_ms,
                 st.compute_ms, st.output_ms);
      std::cout << std::flush;
      rows.push_back({{"layer", layer.name},
                      {"direction", to_string(dir)},
                      {"problem", pb.to_string()},
                      {"onednn_ms", ms_o},
                      {"onednn_algorithm", onednn->algorithm()},
                      {"default_ms", ms_d},
                      {"default_config", to_string(def)},
                      {"default_describe", dflt.conv().describe()},
                      {"best_ms", ms_b},
                      {"best_config", to_string(best_it->config)},
                      {"best_describe", best.conv().describe()},
                      {"configs_tried", results.size()},
                      {"gflops_best", gflops},
                      {"percent_peak_best", percent_peak},
                      {"default_stages_ms", {st.input_ms, st.weights_ms, st.compute_ms, st.output_ms}}});
    }
  }
  if (!opt.out.empty()) {
    std::ofstream(opt.out) << nlohmann::json{{"peak_gflops", peak},
                                             {"isa", cb::to_string(cb::active_isa())},
                                             {"threads", ThreadPool::instance().size()},
                                             {"clock", opt.clock},
                                             {"rows", rows}}
                                  .dump(2)
                           << "\n";
    std::cerr << "sweep: wrote " << opt.out << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("cpu_blocked_sweep: default vs sampled configurations of the CPU module, beside oneDNN");
  Options opt;
  app.add_option("--suite", opt.suite, "alexnet, seeds or a suite file");
  app.add_option("--layer", opt.layers, "one layer, e.g. N=16,C=64,H=27,K=192,R=5,pad=2 (repeatable)");
  app.add_option("--batch-scale", opt.batch_scale, "multiply every layer's N (at least 1 remains)");
  app.add_option("--direction", opt.direction, "fwd, bwd-data, bwd-filter or all");
  app.add_option("--configs", opt.configs, "sampled configurations besides the default");
  app.add_option("--repeats", opt.repeats, "timed runs per candidate (median)");
  app.add_option("--budget", opt.budget_s, "seconds of sampling per layer and direction");
  app.add_option("--seed", opt.seed, "sampling seed");
  app.add_option("--try", opt.tries,
                 "a configuration timed beside the default (parameters left out keep the default's), e.g. "
                 "VECS=2,COLS=10 (repeatable); the tries, the default and oneDNN are timed in --repeats rounds "
                 "(harness::time_in_rounds)");
  app.add_option("--out", opt.out, "write the rows as JSON");
  app.add_option("--clock", opt.clock,
                 "wall, or thread: the calling thread's CPU time, for single-threaded runs on a busy machine "
                 "(needs CONVTUNE_THREADS=1 and OMP_NUM_THREADS=1)");
  CLI11_PARSE(app, argc, argv);
  if (opt.clock != "wall" && opt.clock != "thread") {
    std::cerr << "cpu_blocked_sweep: --clock=" << opt.clock << " is invalid: expected wall or thread\n";
    return 1;
  }
  thread_clock = opt.clock == "thread";
  if (thread_clock && (ThreadPool::instance().size() != 1 || !std::getenv("OMP_NUM_THREADS") ||
                       std::string(std::getenv("OMP_NUM_THREADS")) != "1")) {
    std::cerr << "cpu_blocked_sweep: --clock thread times one thread: set CONVTUNE_THREADS=1 and OMP_NUM_THREADS=1\n";
    return 1;
  }
  try {
    sweep(opt);
  } catch (const std::exception& e) {
    std::cerr << "cpu_blocked_sweep: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
