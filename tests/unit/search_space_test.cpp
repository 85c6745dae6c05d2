// SearchSpace: enumeration with pruning matches brute force, constraints prune early, sampling is seeded.
#include <gtest/gtest.h>

#include <chrono>

#include "src/tuner/search_space.h"

using namespace convtune;

namespace {

// A synthetic family: parameters A..F with 10 values each (a million raw points), two constraints.
class SyntheticFamily final : public KernelFamily {
 public:
  std::string name() const override { return "synthetic"; }
  std::string description() const override { return "test family"; }
  std::string unsupported_reason(const Problem&, const Epilogue&, const DeviceInfo&) const override { return {}; }
  std::vector<Parameter> parameters(const Problem&) const override {
    std::vector<Parameter> ps;
    for (const char* n : {"A", "B", "C", "D", "E", "F"}) ps.push_back({n, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, ""});
    return ps;
  }
  std::vector<Constraint> constraints(const Problem&) const override {
    return {{"A*B within the device's work-group limit", {"A", "B"},
             [](const ConstraintContext& c) {
               return static_cast<size_t>(c.config.at("A") * c.config.at("B")) <= c.device.max_work_group_size;
             }},
            {"F divides K", {"F"}, [](const ConstraintContext& c) { return c.problem.conv().k % c.config.at("F") == 0; }}};
  }
  Config default_config(const Problem&, const DeviceInfo&) const override { return {}; }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  KernelRecipe recipe(const Problem&, const Epilogue&, const Config&, const DeviceInfo&) const override { return {}; }
};

}  // namespace

TEST(SearchSpace, MillionPointSpaceEnumeratesQuicklyAndMatchesBruteForce) {
  SyntheticFamily family;
  ConvProblem problem;
  problem.k = 12;  // F in {1,2,3,4,6}
  DeviceInfo device;
  device.max_work_group_size = 20;
  const auto start = std::chrono::steady_clock::now();
  SearchSpace space(family, problem, device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t ab = 0;
  for (int a = 1; a <= 10; ++a)
    for (int b = 1; b <= 10; ++b) ab += a * b <= 20;
  EXPECT_EQ(space.raw_size(), 1e6);
  EXPECT_EQ(static_cast<int64_t>(space.size()), ab * 10 * 10 * 10 * 5);
  EXPECT_LT(seconds, 1.0);
  // A and B fail together before C..F are assigned: rejections count subtrees, not leaves.
  EXPECT_EQ(space.rejections().at("A*B within the device's work-group limit"), 100 - ab);
  for (const Config& c : space.configs()) {
    EXPECT_LE(c.at("A") * c.at("B"), 20);
    EXPECT_EQ(12 % c.at("F"), 0);
  }
}

TEST(SearchSpace, SamplingIsSeededAndDistinct) {
  SyntheticFamily family;
  ConvProblem problem;
  DeviceInfo device;
  device.max_work_group_size = 4;
  SearchSpace space(family, problem, device);
  const auto a = space.sample(25, 7), b = space.sample(25, 7), c = space.sample(25, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::set<Config> distinct(a.begin(), a.end());
  EXPECT_EQ(distinct.size(), 25u);
  EXPECT_EQ(space.sample(space.size() + 5, 1).size(), space.size());
}

// A deadline stops the enumeration (a tuning run's budget): a deadline already past keeps next to nothing and says
// so; a distant one changes nothing.
TEST(SearchSpace, ADeadlineStopsTheEnumeration) {
  SyntheticFamily family;
  ConvProblem problem;
  problem.k = 12;
  DeviceInfo device;
  device.max_work_group_size = 20;
  const SearchSpace full(family, problem, device);
  EXPECT_FALSE(full.stopped_early());
  const SearchSpace past(family, problem, device, {}, SearchSpace::kMaxKept,
                         std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_TRUE(past.stopped_early());
  EXPECT_LT(past.size(), full.size());
  EXPECT_LE(past.size(), 4096u);  // the clock is read every 4096 nodes
  const SearchSpace distant(family, problem, device, {}, SearchSpace::kMaxKept,
                            std::chrono::steady_clock::now() + std::chrono::hours(1));
  EXPECT_FALSE(distant.stopped_early());
  EXPECT_EQ(distant.size(), full.size());
}
