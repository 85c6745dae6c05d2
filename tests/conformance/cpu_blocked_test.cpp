// Conformance of cpu_blocked on every ISA this CPU runs (AVX-512, AVX2 forced, scalar forced): the default
// configuration and sampled configurations on the standard cases plus wider-channel ones, every direction, the
// adjoint identity and the harness's canaries; plus the module's interface (config errors, packed weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "convtune/error.h"
#include "src/conformance/conformance.h"
#include "src/cpu_kernels/cpu_blocked.h"

using namespace convtune;
namespace cb = convtune::cpu_blocked;

namespace {

// Cases with more channels than a vector holds, long rows, groups of 16+ channels, strided and dilated
// backward-data, and problems large enough to run threaded: the standard list's are small, single-vector ones.
std::vector<conformance::Case> cases() {
  auto out = conformance::standard_cases();
  const std::vector<std::pair<std::string, std::string>> wide = {
      {"3x3-C40-K36-pad1", "N=2,C=40,H=9,W=11,K=36,R=3,pad=1"},
      {"5x5-C33-K20-stride2-pad2", "N=1,C=33,H=13,W=12,K=20,R=5,stride=2,pad=2"},
      {"1x1-C48-K40", "N=2,C=48,H=4,W=5,K=40,R=1"},
      {"3x3-long-row", "N=1,C=3,H=4,W=70,K=5,R=3,pad=1"},
      {"3x3-groups2-C32-K48", "N=1,C=32,H=6,W=7,K=48,R=3,pad=1,groups=2"},
      {"3x3-stride3-dilation2-C17-K18", "N=1,C=17,H=15,W=14,K=18,R=3,stride=3,pad=2,dilation=2"},
      // Above the few MFLOP where the module starts waking the thread pool: the threaded splits.
      {"3x3-threaded-C40-K36", "N=2,C=40,H=16,W=16,K=36,R=3,pad=1"},
      {"5x5-threaded-stride2-C24-K32", "N=4,C=24,H=20,W=20,K=32,R=5,stride=2,pad=2"},
  };
  for (const auto& [name, text] : wide) out.push_back({name, parse_problem(text)});
  return out;
}

// Runs one sampled valid configuration per problem: the `index`-th of a seeded shuffle of the problem's space,
// among those that set the `required` values when the problem has such configurations.
class SampledBlocked final : public HostConvolution {
 public:
  explicit SampledBlocked(int index, Config required = {}) : index_(index), required_(std::move(required)) {}
  std::string name() const override { return "blocked-sample" + std::to_string(index_); }
  void run(const ConvProblem& pb, const ConvOperands& op) override {
    if (pb != problem_) {
      auto configs = cb::valid_configs(pb);
      if (configs.empty()) throw Error("no valid configuration for " + pb.to_string());
      std::vector<Config> matching;
      for (const Config& c : configs)
        if (std::all_of(required_.begin(), required_.end(), [&](const auto& kv) { return c.at(kv.first) == kv.second; }))
          matching.push_back(c);
      if (!matching.empty()) configs = matching;
      std::mt19937_64 rng(std::hash<std::string>()(pb.to_string()) + static_cast<uint64_t>(index_));
      std::shuffle(configs.begin(), configs.end(), rng);
      config_ = configs[static_cast<size_t>(index_) % configs.size()];
      problem_ = pb;
    }
    cb::Convolution conv(pb, config_);
    std::vector<float> workspace((conv.workspace_bytes() + 3) / 4);
    conv.run(op.x, op.w, op.y, workspace.data());
  }

 private:
  int index_;
  Config required_;
  ConvProblem problem_{.n = 0};
  Config config_;
};

// Sets the ISA for one scope.
struct ForcedIsa {
  explicit ForcedIsa(cb::Isa isa) { cb::force_isa(isa); }
  ~ForcedIsa() { cb::force_isa(std::nullopt); }
};

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

}  // namespace

TEST(CpuBlocked, DefaultAndSampledConfigurationsOnEveryIsa) {
  for (cb::Isa isa : cb::available_isas()) {
    ForcedIsa forced(isa);
    // The default, and one sampled configuration of each orientation and input layout of the direct form
    // (backward-filter has three orientations; forward and backward-data two, the pixel one only at unit stride,
    // and two layouts) and of Winograd (3x3, stride 1, dilation 1 cases; elsewhere any configuration).
    std::vector<conformance::Target> targets = {{"cpu/blocked", [] { return make_cpu_convolution("blocked"); }}};
    const std::vector<Config> kinds = {{{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 0}}, {{"ALGO", 0}, {"ORIENT", 0}, {"LAYOUT", 1}},
                                       {{"ALGO", 0}, {"ORIENT", 1}}, {{"ALGO", 0}, {"ORIENT", 2}}, {{"ALGO", 1}}};
    for (size_t k = 0; k < kinds.size(); ++k)
      targets.push_back({"cpu/blocked-" + to_string(kinds[k]),
                         [k, kinds] { return std::make_unique<SampledBlocked>(static_cast<int>(k), kinds[k]); }});
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
  // All of one problem's space in each direction on the best ISA: block shapes, remainders, orders and thread
  // splits (4.6 MFLOP: above the single-thread threshold).
  const ConvProblem base = parse_problem("N=2,C=28,H=14,W=18,K=18,R=3,pad=1");
  int configurations = 0;
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const ConvProblem pb = base.with_direction(d);
    const auto inputs = conformance::make_inputs(pb, 11);
    for (const Config& config : cb::valid_configs(pb)) {
      auto impl = make_cpu_convolution("blocked[" + to_string(config) + "]");
      const auto r = conformance::check(*impl, pb, inputs);
      EXPECT_TRUE(r.passed) << to_string(d) << " " << to_string(config) << ": " << r.message;
      ++configurations;
    }
  }
  std::cout << "conformance: cpu_blocked every valid configuration of one problem: " << configurations
            << " configurations\n";
  EXPECT_GT(configurations, 100);
}

TEST(CpuBlocked, InvalidConfigurationsNameTheParameter) {
  const ConvProblem pb = parse_problem("N=1,C=8,H=8,K=8,R=3,pad=1");
  Config c = cb::default_config(pb);
  EXPECT_EQ(cb::invalid_reason(pb, c), "");
  c["VECS"] = 5;
  EXPECT_NE(cb::invalid_reason(pb, c).find("VECS=5 is invalid: expected one of 1, 2, 3, 4, 6, 8"), std::string::npos);
  c = cb::default_config(pb);
  c.erase("COLS");
  EXPECT_NE(cb::invalid_reason(pb, c).find("COLS is missing"), std::string::npos);
  c = cb::default_config(pb);
  c["TILE"] = 1;
  EXPECT_NE(cb::invalid_reason(pb, c).find("unknown parameter TILE"), std::string::npos);
  // Pixel vectors need unit-stride rows: forward with stride 2 cannot use them.
  const ConvProblem strided = parse_problem("N=1,C=8,H=8,K=8,R=3,stride=2");
  c = cb::default_config(strided);
  c["ORIENT"] = 1;
  EXPECT_NE(cb::invalid_reason(strided, c).find("pixel vectors need input rows read at unit stride"), std::string::npos);
  EXPECT_THROW(cb::Convolution(strided, c), InvalidArgument);
}

TEST(CpuBlocked, PackedWeightsGiveTheSameResultAndStagesAreTimed) {
  const ConvProblem pb = parse_problem("N=2,C=24,H=10,K=40,R=3,pad=1");
  const auto inputs = conformance::make_inputs(pb, 3);
  cb::Convolution conv(pb, cb::default_config(pb));
  std::vector<float> workspace((conv.workspace_bytes() + 3) / 4);
  auto x = inputs.x, w = inputs.w;
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
