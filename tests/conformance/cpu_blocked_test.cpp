// The cpu_blocked family on every ISA this CPU runs (AVX-512, AVX2 forced, scalar forced): its default and sampled
// configurations through plans on the standard cases plus wider-channel ones, every direction, the adjoint
// identity and the harness's canaries; every valid configuration of one problem; the errors a bad configuration
// gives; packed weights reused only while the weights are unchanged.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "convtune/tuning.h"
#include "src/backend/cpu/caches.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cpu/reference.h"
#include "src/core/thread_pool.h"
#include "src/conformance/conformance.h"
#include "src/families/cpu_blocked/cpu_blocked.h"
#include "src/families/cpu_blocked/plan.h"
#include "src/families/widened.h"
#include "src/tuner/search_space.h"
#include "tests/support/forced_isa.h"
#include "tests/support/plan_check.h"

using namespace convtune;
namespace cb = convtune::cpu_blocked;

namespace {

Device& cpu_device() { return Registry::instance().find("cpu"); }
const KernelFamily& family() { return kernel_family("cpu_blocked"); }

// Cases with more channels than a vector holds, long rows, groups of 16+ channels, strided and dilated
// backward-data, rows of padding only, and problems large enough to run threaded: the standard list's are small,
// single-vector ones.
std::vector<conformance::Case> cases() {
  auto out = conformance::standard_cases();
  const std::vector<std::pair<std::string, std::string>> wide = {
      {"3x3-C40-K36-pad1", "N=2,C=40,H=9,W=11,K=36,R=3,pad=1"},
      {"5x5-C33-K20-stride2-pad2", "N=1,C=33,H=13,W=12,K=20,R=5,stride=2,pad=2"},
      {"1x1-C48-K40", "N=2,C=48,H=4,W=5,K=40,R=1"},
      {"3x3-long-row", "N=1,C=3,H=4,W=70,K=5,R=3,pad=1"},
      {"3x3-groups2-C32-K48", "N=1,C=32,H=6,W=7,K=48,R=3,pad=1,groups=2"},
      {"3x3-stride3-dilation2-C17-K18", "N=1,C=17,H=15,W=14,K=18,R=3,stride=3,pad=2,dilation=2"},
      // Output rows and columns whose every tap reads padding (the kernels skip padding taps: zero-length
      // reductions there), and padding beyond a dilated filter's reach.
      {"3x3-pad3-C20-K18", "N=2,C=20,H=5,W=6,K=18,R=3,pad=3"},
      {"1x1-stride2-pad1-C17-K20", "N=1,C=17,H=6,W=7,K=20,R=1,stride=2,pad=1"},
      {"3x3-dilation3-pad4", "N=1,C=5,H=7,W=9,K=6,R=3,pad=4,dilation=3"},
      // Channel-blocked input with dilated rows (a call per filter row; the default with whole channel blocks), and
      // strided backward-data's dilated phases, with channels past a block's end.
      {"3x3-dilation2-C32-K20-pad2", "N=2,C=32,H=11,W=10,K=20,R=3,pad=2,dilation=2"},
      {"3x5-dilation_w3-stride2-C20-K24", "N=1,C=20,H=9,W=16,K=24,R=3,S=5,stride=2,pad_h=1,pad_w=5,dilation_h=1,dilation_w=3"},
      // Above the few MFLOP where the module starts waking the thread pool: the threaded splits.
      {"3x3-threaded-C40-K36", "N=2,C=40,H=16,W=16,K=36,R=3,pad=1"},
      {"5x5-threaded-stride2-C24-K32", "N=4,C=24,H=20,W=20,K=32,R=5,stride=2,pad=2"},
      // Threaded with images enough for each thread to copy its own (LAYOUT 2, Winograd's per-image copies).
      {"3x3-threaded-N4-C24-K20", "N=4,C=24,H=12,W=12,K=20,R=3,pad=1"},
      // Backward-filter's whole-plane dots (ORIENT 1, LAYOUT 1: stride_h 1): one input channel as fmnist1 (its
      // default there, threaded), and column strides and dilations the per-column x copies take element by
      // element, with padding on one side only.
      {"5x5-C1-K32-pad2-threaded", "N=8,C=1,H=20,W=20,K=32,R=5,pad=2"},
      {"3x5-C2-K10-stride_w2-dilation_w2", "N=2,C=2,H=9,W=17,K=10,R=3,S=5,stride_h=1,stride_w=2,pad_h=1,pad_w=3,dilation_h=1,dilation_w=2"},
  };
  for (const auto& [name, text] : wide) out.push_back({name, parse_problem(text)});
  return out;
}

// The built-in default, as an untuned plan picks it (the tuning database is not consulted).
std::unique_ptr<harness::Implementation> default_plan() {
  PlanRequest request;
  request.family = "cpu_blocked";
  request.use_tuning = false;
  return std::make_unique<harness::PlanImplementation>(request);
}

// A plan of one sampled valid configuration per problem: the `index`-th of a seeded shuffle of the family's
// SearchSpace (what the tuner enumerates), among those that set the `required` values when the problem has such
// configurations.
class SampledPlan final : public harness::Implementation {
 public:
  SampledPlan(int index, Config required) : index_(index), required_(std::move(required)) {}
  std::string name() const override { return "convtune"; }
  std::string unsupported_reason(const Problem& problem, const DeviceInfo& device) const override {
    return family().unsupported_reason(problem, {}, device);
  }
  void prepare(harness::Workload& workload) override {
    const Problem& pb = workload.problem();
    std::vector<Config> configs = SearchSpace(family(), pb, workload.device().info()).configs();
    if (configs.empty()) throw Error("no valid configuration for " + pb.to_string());
    std::vector<Config> matching;
    for (const Config& c : configs)
      if (std::all_of(required_.begin(), required_.end(), [&](const auto& kv) { return c.at(kv.first) == kv.second; }))
        matching.push_back(c);
    if (!matching.empty()) configs = matching;
    std::mt19937_64 rng(std::hash<std::string>()(pb.to_string()) + static_cast<uint64_t>(index_));
    std::shuffle(configs.begin(), configs.end(), rng);
    PlanRequest request;
    request.family = "cpu_blocked";
    request.config = configs[static_cast<size_t>(index_) % configs.size()];
    plan_ = std::make_unique<harness::PlanImplementation>(request);
    plan_->prepare(workload);
  }
  void run() override { plan_->run(); }
  std::string algorithm() const override { return plan_ ? plan_->algorithm() : "cpu_blocked (sampled)"; }

 private:
  int index_;
  Config required_;
  std::unique_ptr<harness::PlanImplementation> plan_;
};

using test::ForcedCaches;
using test::ForcedIsa;

void check_all(const std::vector<conformance::Target>& targets, const std::string& what) {
  const auto list = cases();
  const auto summary = conformance::run(targets, list, 2026, nullptr);
  for (const auto& f : summary.failures) ADD_FAILURE() << what << ": " << f;
  std::cout << "conformance: cpu_blocked " << what << ": " << list.size() << " cases x 3 directions x "
            << targets.size() << " configurations + adjoint: " << summary.checks << " checks, " << summary.passed
            << " passed, " << summary.failures.size() << " failed, " << summary.skipped << " skipped\n";
  EXPECT_EQ(summary.skipped, 0);
  EXPECT_EQ(summary.checks, static_cast<int>(list.size() * targets.size() * 4));
}

// Runs `plan` on x, w and y (host vectors; the written one is overwritten) and returns the written operand.
std::vector<float> run_plan(const Plan& plan, std::vector<float>& x, std::vector<float>& w, std::vector<float>& y) {
  auto wrap = [](std::vector<float>& v) {
    return cpu::wrap_host_memory(reinterpret_cast<std::byte*>(v.data()), v.size() * sizeof(float));
  };
  const auto bx = wrap(x), bw = wrap(w), by = wrap(y);
  plan.run({bx.get(), bw.get(), by.get()});
  const int written = plan.problem().written_operand();
  return written == 0 ? x : written == 1 ? w : y;
}

// The float64 reference's written operand for these inputs.
std::vector<float> reference_of(const Problem& pb, std::vector<float> x, std::vector<float> w, std::vector<float> y) {
  cpu::HostOperands host;
  host.data = {x.data(), w.data(), y.data()};
  cpu::compute_reference(pb, host);
  const int written = pb.written_operand();
  return written == 0 ? x : written == 1 ? w : y;
}

}  // namespace

TEST(CpuBlocked, DefaultAndSampledConfigurationsOnEveryIsa) {
  for (cb::Isa isa : cb::available_isas()) {
    ForcedIsa forced(isa);
    // The default, and one sampled configuration of each orientation and input layout of the direct form
    // (backward-filter has three orientations, the second with row dots or whole-plane dots, the third with whole
    // or per-tile copies; forward and backward-data
    // two, the pixel one only at unit stride, and three layouts, the third copied per image by each thread) and of
    // Winograd (3x3, stride 1, dilation 1 cases; elsewhere any configuration) and of plane vectors (ALGO 2: forward
    // at stride 1; elsewhere any configuration).
    std::vector<conformance::Target> targets = {{"cpu/cpu_blocked", &cpu_device(), default_plan}};
    const std::vector<Config> kinds = {{{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 0}}, {{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 1}},
                                       {{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 2}},
                                       {{"ALGO", 0}, {"ORIENT", 1}, {"LAYOUT", 0}}, {{"ALGO", 0}, {"ORIENT", 1}, {"LAYOUT", 1}},
                                       {{"ALGO", 0}, {"ORIENT", 2}, {"LAYOUT", 0}},
                                       {{"ALGO", 0}, {"ORIENT", 2}, {"LAYOUT", 1}}, {{"ALGO", 1}}, {{"ALGO", 2}}};
    for (size_t k = 0; k < kinds.size(); ++k)
      targets.push_back({"cpu/cpu_blocked-" + to_string(kinds[k]), &cpu_device(),
                         [k, kinds] { return std::make_unique<SampledPlan>(static_cast<int>(k), kinds[k]); }});
    check_all(targets, std::string(cb::to_string(isa)));
  }
}

TEST(CpuBlocked, CompilesAvx2AndScalarBesideTheBest) {
  // CI machines run AVX-512; the forced paths must exist there so the test above covers all three.
  const auto isas = cb::available_isas();
  EXPECT_EQ(isas.back(), cb::Isa::Scalar);
  if (std::find(isas.begin(), isas.end(), cb::Isa::Avx512) != isas.end()) {
    EXPECT_NE(std::find(isas.begin(), isas.end(), cb::Isa::Avx2), isas.end());
  }
}

TEST(CpuBlocked, EveryValidConfigurationOfOneProblemIsRight) {
  // All of one problem's space (the tuner's SearchSpace) in each direction on the best ISA: block shapes,
  // remainders, orders and thread splits (4.6 MFLOP: above the single-thread threshold). One workload per
  // direction: its reference is computed once for all of the direction's configurations.
  const ConvProblem base = parse_problem("N=2,C=28,H=14,W=18,K=18,R=3,pad=1");
  int configurations = 0;
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const ConvProblem pb = base.with_direction(d);
    const SearchSpace space(family(), pb, cpu_device().info());
    harness::Workload workload(cpu_device(), pb, 11);
    for (const Config& config : space.configs()) {
      const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
      EXPECT_TRUE(r.passed) << to_string(d) << " " << to_string(config) << ": " << r.message;
      ++configurations;
    }
  }
  std::cout << "conformance: cpu_blocked every valid configuration of one problem: " << configurations
            << " configurations\n";
  EXPECT_GT(configurations, 100);
}

TEST(CpuBlocked, PlanarInputCopiedPerRowBlockIsRight) {
  // Planar input (LAYOUT 0) whose whole padded copy would outgrow L2 is copied a row block at a time by each
  // thread (ORDER 1, or pixel vectors); the standard cases are too small to take that path. Forward strided and
  // at stride 1 (pixel vectors too), backward-data at stride 1 with input-channel passes (IC_CHUNK), row blocks
  // that divide the rows and that leave a short last block.
  struct Trial {
    const char* problem;
    Direction direction;
    const char* config;
  };
  const std::vector<Trial> trials = {
      {"N=2,C=3,H=300,W=300,K=8,R=5,stride=2,pad=2", Direction::Forward, "ORIENT=0,VECS=1,COLS=14,ROW_BLOCK=16,ORDER=1"},
      {"N=2,C=3,H=300,W=300,K=8,R=5,stride=2,pad=2", Direction::Forward, "ORIENT=0,VECS=1,COLS=5,ROW_BLOCK=32,ORDER=1"},
      {"N=2,C=3,H=300,W=300,K=8,R=3,pad=1", Direction::Forward, "ORIENT=1,VECS=2,COLS=6,ROW_BLOCK=8,ORDER=0"},
      {"N=2,C=3,H=300,W=300,K=8,R=3,pad=1", Direction::Forward, "ORIENT=0,VECS=1,COLS=12,ROW_BLOCK=16,ORDER=1"},
      {"N=2,C=4,H=180,W=180,K=20,R=3,pad=1", Direction::BackwardData,
       "ORIENT=0,VECS=1,COLS=8,ROW_BLOCK=16,ORDER=1,IC_CHUNK=16"},
      {"N=2,C=4,H=180,W=180,K=20,R=3,pad=1", Direction::BackwardData, "ORIENT=1,VECS=3,COLS=4,ROW_BLOCK=32,ORDER=1"},
  };
  // Every ISA but scalar (the blocks fit AVX2's 16 registers; scalar vectors of one lane take other paths).
  for (const cb::Isa isa : cb::available_isas()) {
    if (isa == cb::Isa::Scalar) continue;
    const ForcedIsa forced(isa);
    for (const Trial& t : trials) {
      const ConvProblem pb = parse_problem(t.problem).with_direction(t.direction);
      Config config = cb::default_config(pb);
      config["ALGO"] = 0, config["LAYOUT"] = 0, config["IC_CHUNK"] = 0;
      for (const auto& [name, value] : parse_config(t.config)) config[name] = value;
      const cb::Convolution conv(pb, config);
      EXPECT_NE(conv.describe().find("rows per item by each thread"), std::string::npos)
          << cb::to_string(isa) << ": " << conv.describe();
      harness::Workload workload(cpu_device(), pb, 5);
      const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
      EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                            << r.message;
    }
  }
}

TEST(CpuBlocked, ChannelBlockedInputCopiedPerRowBlockIsRight) {
  // Channel-blocked input copied per thread (LAYOUT 2) whose image outgrows the per-image copy is copied a row
  // block at a time: row blocks that divide the rows and a short last one, stride 2, channels past the last whole
  // block, groups, backward-data with input-channel passes and at strides 2 and 3 (phases), one output-channel block
  // under ORDER 0; every ISA (the blocks are small enough for AVX2's registers).
  struct Trial {
    const char* problem;
    Direction direction;
    const char* config;
  };
  const std::vector<Trial> trials = {
      {"N=2,C=24,H=110,W=110,K=20,R=3,pad=1", Direction::Forward, "VECS=1,COLS=6,ROW_BLOCK=8,ORDER=1"},
      {"N=2,C=24,H=110,W=110,K=1,R=3,pad=1", Direction::Forward, "VECS=1,COLS=6,ROW_BLOCK=16,ORDER=0"},
      {"N=2,C=24,H=111,W=109,K=20,R=5,stride=2,pad=2", Direction::Forward, "VECS=1,COLS=6,ROW_BLOCK=16,ORDER=1"},
      {"N=1,C=48,H=110,W=110,K=20,R=3,pad=1,groups=2", Direction::Forward, "VECS=1,COLS=5,ROW_BLOCK=8,ORDER=1"},
      {"N=2,C=20,H=110,W=110,K=24,R=3,pad=1", Direction::BackwardData, "VECS=1,COLS=6,ROW_BLOCK=8,ORDER=1,IC_CHUNK=16"},
      // Strided backward-data: one copy of the rows a row block's phases read, the phases inside row blocks.
      {"N=2,C=20,H=219,W=217,K=48,R=3,stride=2,pad=1", Direction::BackwardData, "VECS=1,COLS=6,ROW_BLOCK=8,ORDER=1"},
      {"N=1,C=20,H=221,W=221,K=48,R=5,stride=2,pad=2", Direction::BackwardData, "VECS=2,COLS=4,ROW_BLOCK=16,ORDER=1"},
      {"N=1,C=12,H=260,W=259,K=40,R=3,stride=3,pad=1", Direction::BackwardData, "VECS=1,COLS=6,ROW_BLOCK=8,ORDER=1"},
  };
  for (const cb::Isa isa : cb::available_isas()) {
    const ForcedIsa forced(isa);
    for (const Trial& t : trials) {
      const ConvProblem pb = parse_problem(t.problem).with_direction(t.direction);
      Config config = cb::default_config(pb);
      config["ALGO"] = 0, config["ORIENT"] = 0, config["LAYOUT"] = 2, config["IC_CHUNK"] = 0;
      for (const auto& [name, value] : parse_config(t.config)) config[name] = value;
      const cb::Convolution conv(pb, config);
      EXPECT_NE(conv.describe().find("rows per item by each thread"), std::string::npos)
          << cb::to_string(isa) << ": " << conv.describe();
      harness::Workload workload(cpu_device(), pb, 6);
      const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
      EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                            << r.message;
    }
  }
}

TEST(CpuBlocked, PartialVectorsAndTransposedStoresAreRight) {
  // The block stores' edge cases on every vector ISA: rows of 1-11 pixels (pixel vectors end in a partial vector
  // of every length; AVX2 stores it in 4-, 2- and 1-float pieces), output channels 1-11 (channel vectors with every
  // count of valid lanes, written to NCHW rows four pixels at a time plus a tail), a single pass and two passes of
  // input channels (the second adds to the first: accumulate).
  int64_t checked = 0;
  for (const cb::Isa isa : cb::available_isas()) {
    if (isa == cb::Isa::Scalar) continue;
    const ForcedIsa forced(isa);
    for (int64_t w = 1; w <= 11; w += 2) {
      for (int64_t k : {1, 4, 7, 11}) {
        for (int64_t orient : {0, 1}) {
          for (int64_t chunk : {0, 16}) {
            const ConvProblem pb = parse_problem(fmt::format("N=2,C=20,H=3,W={},K={},R=3,pad=1", w, k));
            Config config = cb::default_config(pb);
            config["ALGO"] = 0, config["LAYOUT"] = 0, config["ORIENT"] = orient, config["IC_CHUNK"] = chunk;
            config["VECS"] = 1, config["COLS"] = std::min<int64_t>(orient == 0 ? w : k, 6);
            harness::Workload workload(cpu_device(), pb, 7);
            const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
            EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                                  << r.message;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(CpuBlocked, StrideTwoStoresAndColumnPartsAreRight) {
  // Stride-2 backward-data writes every other pixel of dx (phases): channel vectors store a block's transposed rows
  // and pixel vectors their lanes spread two floats apart, with phase rows of 1 to 17 pixels (partial halves) and a
  // second pass of input channels (accumulate). Threaded items too few for the threads (one image, a few channel
  // blocks): rows split into column parts, which the plan's description names. Every vector ISA.
  int64_t checked = 0;
  const auto check = [&](cb::Isa isa, const ConvProblem& pb, const Config& config, uint64_t seed) {
    harness::Workload workload(cpu_device(), pb, seed);
    const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
    EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                          << r.message;
    ++checked;
  };
  for (const cb::Isa isa : cb::available_isas()) {
    if (isa == cb::Isa::Scalar) continue;
    const ForcedIsa forced(isa);
    for (int64_t w : {2, 9, 15, 34}) {
      for (int64_t orient : {0, 1}) {
        for (int64_t chunk : {0, 16}) {
          const ConvProblem pb =
              parse_problem(fmt::format("N=2,C=24,H=5,W={},K=20,R=3,stride=2,pad=1", w)).with_direction(Direction::BackwardData);
          Config config = cb::default_config(pb);
          config["ALGO"] = 0, config["LAYOUT"] = 0, config["ORIENT"] = orient, config["IC_CHUNK"] = chunk;
          config["VECS"] = 1, config["COLS"] = orient == 0 ? std::min<int64_t>(6, (w + 1) / 2) : 4;
          check(isa, pb, config, 11);
        }
      }
    }
    // Row phases no filter tap reaches (whole dx rows of zeros, cleared by the first column phase with columns):
    // 1x1 at strides 2 and 3, a one-column dx, a 2x1 filter at stride 3.
    for (const char* text : {"N=2,C=20,H=5,W=1,K=24,R=1,stride=2", "N=1,C=17,H=7,W=8,K=20,R=1,stride=3",
                             "N=2,C=16,H=6,W=9,K=16,R=2,S=1,stride=3", "N=2,C=24,H=9,W=10,K=20,R=1,stride=2"}) {
      for (int64_t orient : {0, 1}) {
        const ConvProblem pb = parse_problem(text).with_direction(Direction::BackwardData);
        Config config = cb::default_config(pb);
        config["ALGO"] = 0, config["LAYOUT"] = 0, config["ORIENT"] = orient, config["IC_CHUNK"] = 0;
        config["VECS"] = 1, config["COLS"] = orient == 0 ? 1 : 4;  // phase rows of one or two pixels
        check(isa, pb, config, 19);
      }
    }
    // (channels written, in blocks of one vector: 32 and 48 in the 3x3 layer's directions, 48 in the 1x1's forward)
    for (const auto& [text, d] : std::vector<std::pair<const char*, Direction>>{
             {"N=1,C=48,H=20,W=24,K=32,R=3,pad=1", Direction::Forward},
             {"N=1,C=48,H=20,W=24,K=32,R=3,pad=1", Direction::BackwardData},
             {"N=1,C=960,H=7,W=7,K=48,R=1", Direction::Forward}}) {
      const ConvProblem pb = parse_problem(text).with_direction(d);
      Config config = cb::default_config(pb);
      config["ALGO"] = 0, config["ORIENT"] = 0, config["VECS"] = 1, config["COLS"] = 4, config["ROW_BLOCK"] = 0;
      const cb::Convolution conv(pb, config);
      if (ThreadPool::instance().size() > 1)
        EXPECT_NE(conv.describe().find("column parts"), std::string::npos) << conv.describe();
      check(isa, pb, config, 13);
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(CpuBlocked, PlaneVectorsAreRight) {
  // ALGO 2 (pixel vectors along whole planes over column-shifted input copies) on every ISA: planes that end in a
  // partial vector of many lengths, rows of one pixel, padding wider than the filter reaches (copies all zeros), dilation, groups, a
  // channel count above one, row blocks of one row, a few rows and a short last block, and threaded work.
  int64_t checked = 0;
  const std::vector<std::string> problems = {
      "N=2,C=1,H=7,W=7,K=7,R=3,pad=1",
      "N=1,C=3,H=5,W=1,K=20,R=3,S=1,pad_h=1,pad_w=0",
      "N=2,C=2,H=9,W=11,K=17,R=5,pad=3",
      "N=1,C=4,H=10,W=9,K=12,R=3,pad=2,dilation=2,groups=2",
      "N=8,C=1,H=28,W=28,K=32,R=5,pad=2",
      // Copies of only zeros: filter columns 0 and 1 read only padding for every output column (Q = 4), and rows
      // of only padding above and below the image in one item.
      "N=1,C=2,H=4,W=2,K=8,R=3,S=5,pad_h=2,pad_w=5,dilation=2",
  };
  for (const cb::Isa isa : cb::available_isas()) {
    const ForcedIsa forced(isa);
    for (const std::string& text : problems) {
      const ConvProblem pb = parse_problem(text);
      for (int64_t rows : {0, 1, 2}) {
        for (const auto& [vecs, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {2, 6}}) {
          Config config = cb::default_config(pb);
          config["ALGO"] = 2, config["ORIENT"] = 1, config["LAYOUT"] = 0, config["IC_CHUNK"] = 0, config["ORDER"] = 0;
          config["WIDTH"] = 0, config["ROW_BLOCK"] = rows;
          config["VECS"] = std::min<int64_t>(vecs, cb::detail::ceil_div(pb.p() * pb.q(), cb::detail::kernel_table(isa).lanes));
          config["COLS"] = std::min<int64_t>(cols, pb.k / pb.groups);
          harness::Workload workload(cpu_device(), pb, 5);
          const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
          EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                                << r.message;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(CpuBlocked, FusedWinogradBlocksAreRight) {
  // Winograd forward and backward-data fused in blocks of ROW_BLOCK tile rows (counted across images): blocks
  // inside one image, whole images and blocks spanning two, a short last block, per-image copies (8 images: each
  // thread copies its own, and copies again when a block moves to the next image) and the whole copy up front (2
  // images), groups, a last oc block of fewer vectors, dy's padding 2 - pad for backward-data (pad 0, 1, 2), and
  // one thread beside the pool's threads. Checked in full against the float64 reference on every ISA (a block the
  // ISA's registers do not hold gives way to the widest one of its VECS that does).
  struct Trial {
    const char* problem;
    const char* config;
  };
  const std::vector<Trial> trials = {
      {"N=8,C=40,H=14,W=18,K=36,R=3,pad=1", "VECS=2,COLS=8,ROW_BLOCK=1"},
      {"N=8,C=40,H=14,W=18,K=36,R=3,pad=1", "VECS=3,COLS=5,ROW_BLOCK=2"},
      {"N=8,C=40,H=14,W=18,K=36,R=3,pad=1", "VECS=1,COLS=12,ROW_BLOCK=8"},
      {"N=8,C=40,H=14,W=18,K=36,R=3,pad=1", "VECS=2,COLS=7,ROW_BLOCK=4"},
      {"N=8,C=20,H=13,W=13,K=24,R=3,pad=0", "VECS=2,COLS=6,ROW_BLOCK=2"},
      {"N=8,C=20,H=13,W=13,K=24,R=3,pad=2", "VECS=1,COLS=9,ROW_BLOCK=8"},
      {"N=2,C=36,H=15,W=11,K=20,R=3,pad=1", "VECS=2,COLS=4,ROW_BLOCK=2"},
      {"N=2,C=36,H=15,W=11,K=20,R=3,pad=1", "VECS=1,COLS=14,ROW_BLOCK=8"},
      {"N=6,C=32,H=9,W=10,K=48,R=3,pad=1,groups=2", "VECS=1,COLS=10,ROW_BLOCK=4"},
      {"N=1,C=5,H=6,W=7,K=3,R=3,pad=1", "VECS=1,COLS=3,ROW_BLOCK=1"},
  };
  int checked = 0;
  for (cb::Isa isa : cb::available_isas()) {
    ForcedIsa forced(isa);
    for (const Trial& t : trials) {
      for (Direction d : {Direction::Forward, Direction::BackwardData}) {
        const ConvProblem pb = parse_problem(t.problem).with_direction(d);
        Config config = cb::default_config(pb);
        config["ALGO"] = 1, config["ORIENT"] = 0, config["LAYOUT"] = 0, config["IC_CHUNK"] = 0, config["ORDER"] = 0;
        for (const auto& [name, value] : parse_config(t.config)) config[name] = value;
        while (config["COLS"] > 1 && !config_problem(family(), config, pb, cpu_device().info()).empty()) --config["COLS"];
        while (config["VECS"] > 1 && !config_problem(family(), config, pb, cpu_device().info()).empty()) --config["VECS"];
        const cb::Convolution conv(pb, config);
        EXPECT_NE(conv.describe().find("fused in blocks"), std::string::npos) << conv.describe();
        harness::Workload workload(cpu_device(), pb, 9);
        const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
        EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                              << r.message;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(20 * cb::available_isas().size()));
}

TEST(CpuBlocked, OneByOnePlanesAreRight) {
  // 1x1 filters at stride 1 without padding are computed over planes of one row of H*W pixels (computed_problem):
  // planes of whole vectors that pixel vectors read in place, planes with a partial last vector (copied with
  // slack), planes long enough to be cut into column blocks (pixel_rows), groups, and backward-filter's results
  // converted from every orientation's block layout. Every direction, the default and sampled configurations of
  // each orientation and order, every ISA, against the float64 reference.
  const std::vector<const char*> problems = {
      "N=3,C=24,H=8,W=8,K=40,R=1",           // 64 pixels: whole vectors on AVX-512 and AVX2
      "N=4,C=20,H=7,W=7,K=36,R=1",           // 49 pixels: a partial last vector
      "N=2,C=64,H=47,W=50,K=24,R=1",         // 2350 pixels: several column blocks and a tail
      "N=2,C=32,H=6,W=8,K=48,R=1,groups=2",  // groups
      "N=1,C=40,H=5,W=13,K=20,R=1,dilation=2",  // one image, an odd plane; dilation means nothing to a 1x1 filter
  };
  const std::vector<Config> kinds = {{{"ORIENT", 0}, {"ORDER", 0}}, {{"ORIENT", 0}, {"ORDER", 1}},
                                     {{"ORIENT", 1}, {"ORDER", 0}}, {{"ORIENT", 1}, {"ORDER", 1}},
                                     {{"ORIENT", 2}}};
  int checked = 0;
  for (cb::Isa isa : cb::available_isas()) {
    ForcedIsa forced(isa);
    for (const char* text : problems) {
      for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
        const ConvProblem pb = parse_problem(text).with_direction(d);
        const ConvProblem computed = cb::computed_problem(pb);
        EXPECT_EQ(computed.h, 1);
        EXPECT_EQ(computed.w, pb.h * pb.w);
        std::vector<Config> configs = {cb::default_config(pb)};
        const std::vector<Config> space = SearchSpace(family(), pb, cpu_device().info()).configs();
        for (size_t k = 0; k < kinds.size(); ++k) {
          std::vector<Config> matching;
          for (const Config& c : space)
            if (std::all_of(kinds[k].begin(), kinds[k].end(), [&](const auto& kv) {
                  return c.count(kv.first) && c.at(kv.first) == kv.second;
                }))
              matching.push_back(c);
          if (!matching.empty()) configs.push_back(matching[(k * 7919 + checked) % matching.size()]);
        }
        harness::Workload workload(cpu_device(), pb, 17);
        for (const Config& config : configs) {
          const auto r = testing_support::check_plan_on(workload, "cpu_blocked", config);
          EXPECT_TRUE(r.passed) << cb::to_string(isa) << " " << pb.to_string() << " " << to_string(config) << ": "
                                << r.message;
          ++checked;
        }
      }
    }
  }
  std::cout << "conformance: cpu_blocked 1x1 planes: " << checked << " checks\n";
  EXPECT_GE(checked, static_cast<int>(15 * 4 * cb::available_isas().size()));
}

TEST(CpuBlocked, PixelVectorsReadWholeVectorPlanesInPlace) {
  // A 1x1 layer whose planes are whole vectors is read where it lies by pixel vectors (no padded copy); one whose
  // planes end mid-vector is copied with slack, so no vector read leaves the buffer.
  const ForcedIsa avx512_or_best(cb::available_isas().front());
  const int64_t lanes = cb::vector_lanes(cb::active_isa());
  if (lanes == 1) GTEST_SKIP() << "scalar: every plane is whole vectors";
  Config config = cb::default_config(parse_problem("N=2,C=24,H=8,W=8,K=40,R=1"));
  config["ORIENT"] = 1, config["LAYOUT"] = 0, config["IC_CHUNK"] = 0;
  const cb::Convolution whole(parse_problem("N=2,C=24,H=8,W=8,K=40,R=1"), config);
  EXPECT_NE(whole.describe().find("input read in place"), std::string::npos) << whole.describe();
  const cb::Convolution partial(parse_problem("N=2,C=24,H=7,W=7,K=40,R=1"), config);
  EXPECT_NE(partial.describe().find("input copied"), std::string::npos) << partial.describe();
}

TEST(CpuBlocked, PixelVectorBlocksLeaveNoSmallLastBlock) {
  // Eight output channels per group under pixel vectors: 4 x 4 twice, not 4 x 5 + 4 x 3, which the block model
  // rates the same but which ran 12-17% slower (cpu_blocked.cpp, best_bcast_block). Every vector ISA: pixel vectors
  // split the 8 channels into equal blocks, or channel vectors hold them whole (AVX2: one vector of 8); AVX-512
  // exactly 4 x 4 under pixel vectors along rows (the block shapes compiled differ per ISA), 1 x 8 along planes.
  for (const cb::Isa isa : cb::available_isas()) {
    if (isa == cb::Isa::Scalar) continue;
    const ForcedIsa forced(isa);
    for (const char* text : {"N=8,C=256,H=56,W=56,K=256,R=3,S=3,pad=1,groups=32",
                             "N=8,C=256,H=56,W=56,K=256,R=3,S=3,pad=1,groups=32,dir=bwd-data"}) {
      const Config config = cb::default_config(parse_problem(text));
      const int64_t lanes = cb::vector_lanes(isa);
      if (config.at("ORIENT") == 1) {
        EXPECT_EQ(8 % config.at("COLS"), 0) << cb::to_string(isa) << " " << text << ": " << to_string(config);
      } else {
        EXPECT_EQ(8 % lanes, 0) << cb::to_string(isa) << " " << text << ": " << to_string(config);
        EXPECT_EQ(config.at("VECS"), 8 / lanes) << cb::to_string(isa) << " " << text << ": " << to_string(config);
      }
      if (isa == cb::Isa::Avx512) {
        // Forward runs along whole planes there (ALGO 2: one vector under all 8 channels, rows of 56 filling 56 of
        // 64 lanes); backward-data along rows.
        const bool forward = std::string(text).find("dir=") == std::string::npos;
        EXPECT_EQ(config.at("ORIENT"), 1) << text;
        EXPECT_EQ(config.at("ALGO"), forward ? 2 : 0) << text;
        EXPECT_EQ(config.at("VECS"), forward ? 1 : 4) << text;
        EXPECT_EQ(config.at("COLS"), forward ? 8 : 4) << text;
      }
    }
  }
}

TEST(CpuBlocked, DefaultsAreValidForEveryCase) {
  // The default must satisfy the family's own constraints wherever the family computes, or an untuned plan fails.
  for (const auto& c : cases()) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = c.problem.with_direction(d);
      EXPECT_EQ(config_problem(family(), family().default_config(pb, cpu_device().info()), pb, cpu_device().info()), "")
          << c.name << " " << to_string(d);
    }
  }
  // 1x1 layers, whose defaults take their own branches (planes of one row, dots over input channels): a grid of
  // channel counts on both sides, plane sizes and groups, on every ISA.
  int checked = 0;
  for (cb::Isa isa : cb::available_isas()) {
    ForcedIsa forced(isa);
    for (int c : {1, 3, 8, 24, 33, 144, 512})
      for (int k : {1, 4, 24, 32, 40, 160, 1024})
        for (int hw : {1, 7, 28, 56})
          for (int g : {1, 2}) {
            if (c % g != 0 || k % g != 0) continue;
            const ConvProblem base = parse_problem(fmt::format("N=2,C={},H={},W={},K={},R=1,groups={}", c, hw, hw, k, g));
            for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
              const ConvProblem pb = base.with_direction(d);
              EXPECT_EQ(config_problem(family(), family().default_config(pb, cpu_device().info()), pb,
                                       cpu_device().info()),
                        "")
                  << cb::to_string(isa) << " " << pb.to_string();
              ++checked;
            }
          }
  }
  EXPECT_GT(checked, 1000);
}

TEST(CpuBlocked, DefaultsFollowTheCpuCaches) {
  // The planners size their blocks by the caches the CPU reports: on a Zen 3's 32 KiB L1d and 512 KiB L2 the
  // fused Winograd blocks and the input-channel passes shrink against the developer host's 48 KiB and 2 MiB.
  const auto config_with = [](cpu::CacheSizes caches, const std::string& text) {
    ForcedCaches forced(caches);
    const ConvProblem pb = parse_problem(text);
    return family().default_config(pb, cpu_device().info());
  };
  const cpu::CacheSizes developer{48 << 10, 2 << 20, 32 << 20}, zen3{32 << 10, 512 << 10, 32 << 20};
  const std::string fused = "N=16,C=64,H=56,K=64,R=3,pad=1", ucla = "N=1,C=256,H=228,K=256,R=5";
  EXPECT_EQ(config_with(developer, fused).at("ALGO"), 1);
  EXPECT_GT(config_with(developer, fused).at("ROW_BLOCK"), config_with(zen3, fused).at("ROW_BLOCK"));
  EXPECT_GT(config_with(zen3, fused).at("ROW_BLOCK"), 0);
  const int64_t ucla_dev = config_with(developer, ucla).at("IC_CHUNK"), ucla_zen3 = config_with(zen3, ucla).at("IC_CHUNK");
  EXPECT_GT(ucla_zen3, 0);
  EXPECT_TRUE(ucla_dev == 0 || ucla_dev > ucla_zen3) << ucla_dev << " " << ucla_zen3;
  // CONVTUNE_CPU_CACHES' syntax, and what a bad value says.
  const cpu::CacheSizes parsed = cpu::parse_cache_sizes("32K,512K,33554432");
  EXPECT_EQ(parsed.l1d, 32 << 10);
  EXPECT_EQ(parsed.l2, 512 << 10);
  EXPECT_EQ(parsed.l3, 32 << 20);
  EXPECT_EQ(cpu::cache_text(parsed.l2), "512 KiB");
  EXPECT_EQ(cpu::cache_text(0), "?");
  const auto error_of = [](const char* text) -> std::string {
    try {
      cpu::parse_cache_sizes(text);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(error_of("32K,5x,1M").find("L2 '5x' is not a size"), std::string::npos) << error_of("32K,5x,1M");
  EXPECT_NE(error_of("32K,512K").find("expected three sizes L1D,L2,L3"), std::string::npos) << error_of("32K,512K");
}

TEST(CpuBlocked, DefaultsAndSampledConfigurationsAreRightWithTinyCaches) {
  // Planned for caches far smaller than any CPU's (4 KiB L1d, 32 KiB L2), the small conformance cases take the
  // branches large layers take on real caches: input-channel passes, reduction tiles of a few rows, copies per row
  // block, smaller fused Winograd blocks (a fifth of the cases' defaults change). Every case and direction, the
  // default (valid by the family's constraints) and a sampled configuration of each kind, on this CPU's best ISA.
  const cpu::CacheSizes tiny{4 << 10, 32 << 10, 1 << 20};
  int changed = 0;
  for (const auto& c : cases()) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = c.problem.with_direction(d);
      const Config real = family().default_config(pb, cpu_device().info());
      ForcedCaches forced(tiny);
      const Config small = family().default_config(pb, cpu_device().info());
      changed += small != real;
      EXPECT_EQ(config_problem(family(), small, pb, cpu_device().info()), "") << c.name << " " << to_string(d);
    }
  }
  EXPECT_GE(changed, 10) << "the tiny caches no longer change the cases' defaults: this test checks nothing new";
  ForcedCaches forced(tiny);
  std::vector<conformance::Target> targets = {{"cpu/cpu_blocked", &cpu_device(), default_plan}};
  const std::vector<Config> kinds = {{{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 1}}, {{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 2}},
                                     {{"ALGO", 0}, {"ORIENT", 1}, {"LAYOUT", 1}}, {{"ALGO", 0}, {"ORIENT", 2}, {"LAYOUT", 1}},
                                     {{"ALGO", 1}}, {{"ALGO", 2}}};
  for (size_t k = 0; k < kinds.size(); ++k)
    targets.push_back({"cpu/cpu_blocked-" + to_string(kinds[k]), &cpu_device(),
                       [k, kinds] { return std::make_unique<SampledPlan>(static_cast<int>(100 + k), kinds[k]); }});
  check_all(targets, "4 KiB L1d, 32 KiB L2");
}

TEST(CpuBlocked, InvalidConfigurationsNameTheParameter) {
  const ConvProblem pb = parse_problem("N=1,C=8,H=8,K=8,R=3,pad=1");
  auto error_of = [](const ConvProblem& problem, const Config& config) -> std::string {
    PlanRequest request;
    request.problem = problem;
    request.family = "cpu_blocked";
    request.config = config;
    try {
      Plan::create(cpu_device(), request);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "accepted";
  };
  const Config def = cb::default_config(pb);
  EXPECT_EQ(error_of(pb, def), "accepted");
  Config c = def;
  c["VECS"] = 5;
  EXPECT_NE(error_of(pb, c).find("VECS=5 is not a candidate value (expected one of 1, 2, 3, 4, 6, 8)"), std::string::npos)
      << error_of(pb, c);
  c = def;
  c.erase("COLS");
  EXPECT_NE(error_of(pb, c).find("parameter COLS is missing"), std::string::npos) << error_of(pb, c);
  c = def;
  c["TILE"] = 1;
  EXPECT_NE(error_of(pb, c).find("unknown parameter TILE=1"), std::string::npos) << error_of(pb, c);
  // Pixel vectors need unit-stride rows: forward with stride 2 cannot use them. The constraint says so.
  const ConvProblem strided = parse_problem("N=1,C=8,H=8,K=8,R=3,stride=2");
  c = cb::default_config(strided);
  c["ORIENT"] = 1;
  EXPECT_NE(error_of(strided, c).find("ORIENT 1 (vectors over pixels) only where input rows are read at unit stride"),
            std::string::npos)
      << error_of(strided, c);
  EXPECT_THROW(cb::Convolution(strided, c), InvalidArgument);
  // A register block beyond the ISA's registers names the registers it has.
  c = def;
  c["VECS"] = 8, c["COLS"] = 28;
  EXPECT_NE(error_of(pb, c).find("VECS x COLS + VECS + 1 at most that many"), std::string::npos)
      << error_of(pb, c);
}

TEST(CpuBlocked, PackedWeightsGiveTheSameResultAndStagesAreTimed) {
  const ConvProblem pb = parse_problem("N=2,C=24,H=10,K=40,R=3,pad=1");
  const auto data = testing_support::reference_data(pb, 3);
  cb::Convolution conv(pb, cb::default_config(pb));
  std::vector<float> workspace((conv.workspace_bytes() + 3) / 4);
  auto x = data.operands[0], w = data.operands[1];
  std::vector<float> y1(static_cast<size_t>(pb.y_elements())), y2(y1.size());
  conv.run(x.data(), w.data(), y1.data(), workspace.data());
  EXPECT_GE(conv.last_times().weights_ms, 0.0);
  conv.pack_weights(w.data());
  std::fill(w.begin(), w.end(), 0.0f);  // the packed copy is used, not w
  conv.run(x.data(), w.data(), y2.data(), workspace.data());
  EXPECT_EQ(conv.last_times().weights_ms, 0.0);
  EXPECT_EQ(y1, y2);
  EXPECT_GT(conv.last_times().compute_ms, 0.0);
  EXPECT_FALSE(conv.describe().empty());
}

TEST(CpuBlocked, PlanRepacksWeightsChangedInPlace) {
  // A plan keeps its packed weights between runs while their bytes are unchanged; weights changed in the same
  // buffer (a training step), at the start or only at the very end, must be packed again. Direct and Winograd
  // (which caches its filter transform) in forward and backward-data. The third problem's weights (147,456 floats)
  // are large enough for the compare to be split over the thread pool in pieces.
  for (const char* text : {"N=2,C=24,H=10,K=40,R=3,pad=1", "N=2,C=40,H=12,K=36,R=3,pad=1", "N=1,C=256,H=4,K=64,R=3,pad=1"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData}) {
      const ConvProblem pb = parse_problem(text).with_direction(d);
      for (int64_t algo : {0, 1}) {
        Config config = cb::default_config(pb);
        if (algo == 1) {
          const auto space = SearchSpace(family(), pb, cpu_device().info()).configs();
          const auto it = std::find_if(space.begin(), space.end(), [](const Config& c) { return c.at("ALGO") == 1; });
          ASSERT_NE(it, space.end()) << pb.to_string();
          config = *it;
        }
        PlanRequest request;
        request.problem = pb;
        request.family = "cpu_blocked";
        request.config = config;
        const Plan plan = Plan::create(cpu_device(), request);
        const auto data = testing_support::reference_data(pb, 5);
        std::vector<float> x = data.operands[0], w = data.operands[1], y = data.operands[2];
        const double tol = harness::tolerance(pb);
        auto check = [&](const char* when) {
          const std::vector<float> want = reference_of(pb, x, w, y);
          const std::vector<float> got = run_plan(plan, x, w, y);
          EXPECT_LE(harness::relative_l2(got, want), tol) << pb.to_string() << " " << to_string(config) << ": " << when;
        };
        check("first run");
        check("same weights again");
        w.back() += 0.5f;  // only the last weight changes
        check("last weight changed in place");
        w[w.size() / 2] -= 0.5f;  // only a middle weight changes
        check("middle weight changed in place");
        for (float& v : w) v = -v;
        check("every weight changed in place");
      }
    }
  }
}

TEST(CpuBlocked, WorkspaceStaysNearTheOperandSizes) {
  for (const auto& c : cases()) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = c.problem.with_direction(d);
      cb::Convolution conv(pb, cb::default_config(pb));
      const double operands = 4.0 * static_cast<double>(pb.x_elements() + pb.w_elements() + pb.y_elements());
      // Padded copies grow by the borders and channel padding to whole vectors; 64 KiB covers alignment and slack
      // on tiny cases.
      EXPECT_LE(static_cast<double>(conv.workspace_bytes()), 16 * operands + 65536) << c.name << " " << to_string(d);
    }
  }
}

TEST(CpuBlocked, UntunedPlansOnTheCpuPickIt) {
  // Without tuning data the CPU backend's convolutions go to cpu_blocked, in every direction; cpu_reference stays
  // last and matrix products stay with cpu_gemm.
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    PlanRequest request;
    request.problem = parse_problem("N=2,C=16,H=12,K=32,R=3,pad=1").with_direction(d);
    request.use_tuning = false;
    EXPECT_EQ(PlanDescriptor::create(cpu_device().info(), request).family().name(), "cpu_blocked") << to_string(d);
  }
  PlanRequest gemm;
  gemm.problem = parse_gemm("M=8,N=16,K=32");
  gemm.use_tuning = false;
  EXPECT_EQ(PlanDescriptor::create(cpu_device().info(), gemm).family().name(), "cpu_gemm");
  // Last of the families that compute FP32 tensors (the widened ones, 16-bit only, rank after them all).
  std::string last;
  for (const auto& f : kernel_families())
    if (!families::is_widened(*f)) last = f->name();
  EXPECT_EQ(last, "cpu_reference");
}

TEST(CpuBlocked, CpuFingerprintNamesTheIsaThreadsAndCaches) {
  // Tuning entries are keyed on the fingerprint: it must change with the ISA the kernels run and the threads.
  // The device's description is made once, with the ISA active then (CONVTUNE_CPU_ISA's, or the best); tests that
  // force another for a scope run after it may leave active_isa() elsewhere, so the ISA named is one of the CPU's.
  const DeviceInfo& info = cpu_device().info();
  const std::string fingerprint = info.fingerprint();
  bool names_an_isa = false;
  for (cb::Isa isa : cb::available_isas())
    names_an_isa = names_an_isa || fingerprint.find(std::string(cb::to_string(isa)) + ", ") != std::string::npos;
  EXPECT_TRUE(names_an_isa) << fingerprint;
  EXPECT_NE(fingerprint.find(" threads, L1d "), std::string::npos) << fingerprint;
  EXPECT_NE(fingerprint.find(info.name), std::string::npos) << fingerprint;
}

TEST(CpuBlocked, PercentOfPeakCountsWhatWinogradPerforms) {
  // bench's % peak divides the operations performed: Winograd F(4x4, 3x3) on alex5 (16 images) does 36 products
  // per 4x4 tile instead of 144 (13x13 outputs padded to 16x16 tiles) plus its transforms: 0.386 of the direct sum.
  const Problem winograd(parse_problem("N=16,C=256,H=13,K=256,R=3,pad=1"));
  const Config wino = family().default_config(winograd, cpu_device().info());
  ASSERT_EQ(wino.at("ALGO"), 1);
  const double fraction = family().performed_flops(winograd, wino) / winograd.flops();
  EXPECT_GT(fraction, 0.38);
  EXPECT_LT(fraction, 0.40);
  PlanRequest request;
  request.problem = winograd;
  request.family = "cpu_blocked";
  request.config = wino;
  EXPECT_DOUBLE_EQ(Plan::create(cpu_device(), request).performed_flops(), family().performed_flops(winograd, wino));
  // The direct form performs the direct sum without padding, and less the taps it skips with padding: forward
  // skips filter rows that read padding rows only (5x5, padding 2, 14 rows: 64 of 70 row taps are real), and
  // backward-filter with channel vectors the columns too (64/70 squared).
  const Problem unpadded(parse_problem("N=2,C=32,H=14,K=64,R=5"));
  const Config plain = family().default_config(unpadded, cpu_device().info());
  ASSERT_EQ(plain.at("ALGO"), 0);
  EXPECT_DOUBLE_EQ(family().performed_flops(unpadded, plain), unpadded.flops());
  const Problem direct(parse_problem("N=2,C=32,H=14,K=64,R=5,pad=2"));
  const Config config = family().default_config(direct, cpu_device().info());
  ASSERT_EQ(config.at("ALGO"), 0);
  EXPECT_NEAR(family().performed_flops(direct, config) / direct.flops(), 64.0 / 70.0, 1e-12);
  const Problem filter(direct.conv().with_direction(Direction::BackwardFilter));
  Config channel_vectors = family().default_config(filter, cpu_device().info());
  ASSERT_EQ(channel_vectors.at("ORIENT"), 0);
  EXPECT_NEAR(family().performed_flops(filter, channel_vectors) / filter.flops(), (64.0 / 70.0) * (64.0 / 70.0), 1e-12);
}

TEST(CpuBlocked, ParallelSharesRunsEveryItemOnce) {
  // Winograd's GEMMs hand out contiguous shares, a thread whose share is done taking from the back of another's:
  // every item exactly once, whatever the counts, and also when one thread is much slower (the others then take
  // most of its share) or the pool has fewer threads than asked.
  for (const int64_t count : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{17}, int64_t{100}, int64_t{3456}}) {
    for (const unsigned threads : {1u, 2u, 3u, 8u}) {
      for (const bool slow : {false, true}) {
        std::vector<std::atomic<int>> runs(static_cast<size_t>(count));
        std::atomic<int64_t> total{0};
        cb::detail::parallel_shares(count, threads, [&](int64_t item, unsigned thread) {
          if (slow && thread == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
          runs[static_cast<size_t>(item)].fetch_add(1);
          total.fetch_add(1);
        });
        EXPECT_EQ(total.load(), count) << count << " items, " << threads << " threads";
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "item " << i << " of " << count << ", " << threads << " threads";
      }
    }
  }
}

// A nearest tuned shape's configuration carries only from the same regime (carry_refusal): a register block its
// shape clamped (one vector of output channels, VECS 1) and channels that filled less than a vector (orientation
// chosen for half-empty vectors) make the plan run the family's built-in default, the entry still naming the
// family; an entry of the same regime runs as tuned. Each ISA, as lanes differ.
TEST(CpuBlocked, NearestShapesOfAnotherRegimeRunTheDefault) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "convtune-carry-regime-never-written.json";
  for (cb::Isa isa : cb::available_isas()) {
    const ForcedIsa forced(isa);
    const int64_t lanes = cpu::vector_lanes(isa);
    const DeviceInfo& info = cpu_device().info();
    const auto layer = [](int64_t c, int64_t k, int64_t hw, Direction d) {
      return Problem(parse_problem(fmt::format("N=8,C={},H={},K={},R=5,pad=2", c, hw, k)).with_direction(d));
    };
    // Plans `asked` with one entry of `config` tuned for `tuned`; returns the plan's configuration.
    const auto plan_with = [&](const Problem& tuned, const Config& config, const Problem& asked, std::string* why) {
      EXPECT_EQ(config_problem(family(), config, tuned, info), "") << to_string(config);
      TuningDatabase db(file);
      db.insert(make_tuning_entry(info, "cpu_blocked", family().kernel_version(), tuned, config, 1.0));
      PlanRequest request;
      request.problem = asked;
      request.tuning = &db;
      const PlanDescriptor plan = PlanDescriptor::create(info, request);
      EXPECT_EQ(plan.family().name(), "cpu_blocked") << plan.explanation();
      EXPECT_EQ(plan.tier(), ConfigTier::Nearest) << plan.explanation();
      *why = plan.explanation();
      return plan.config();
    };
    std::string why;
    // Forward: one vector of output channels clamps VECS to 1; four vectors free it.
    const Problem one_vector = layer(2 * lanes, lanes, 14, Direction::Forward);
    const Problem four_vectors = layer(2 * lanes, 4 * lanes, 14, Direction::Forward);
    const Config clamped = {{"ALGO", 0}, {"ORIENT", 0}, {"VECS", 1}, {"COLS", 4}, {"ROW_BLOCK", 0},
                            {"ORDER", 1}, {"LAYOUT", 0}, {"IC_CHUNK", 0}, {"WIDTH", 0}};
    EXPECT_NE(family().carry_refusal(clamped, one_vector, four_vectors, info).find("VECS 1: the largest"),
              std::string::npos);
    EXPECT_EQ(plan_with(one_vector, clamped, four_vectors, &why), family().default_config(four_vectors, info)) << why;
    EXPECT_NE(why.find("the built-in default instead (VECS 1"), std::string::npos) << why;
    // The same configuration between two shapes of four vectors or more runs as tuned.
    const Problem wider = layer(2 * lanes, 6 * lanes, 18, Direction::Forward);
    Config free = clamped;
    free["VECS"] = 2;
    EXPECT_EQ(plan_with(four_vectors, free, wider, &why), free) << why;
    if (lanes == 1) continue;  // one lane: no channel count fills less than a vector
    // Backward-data over half a vector of (written) input channels, carried to two vectors.
    const Problem half = layer(lanes / 2, 2 * lanes, 14, Direction::BackwardData);
    const Problem two = layer(2 * lanes, 2 * lanes, 14, Direction::BackwardData);
    const Config pixels = {{"ALGO", 0}, {"ORIENT", 1}, {"VECS", 1}, {"COLS", 4}, {"ROW_BLOCK", 0},
                           {"ORDER", 0}, {"LAYOUT", 0}, {"IC_CHUNK", 0}, {"WIDTH", 0}};
    EXPECT_EQ(plan_with(half, pixels, two, &why), family().default_config(two, info)) << why;
    EXPECT_NE(why.find("fill less than a " + std::to_string(lanes) + "-lane vector"), std::string::npos) << why;
  }
}
