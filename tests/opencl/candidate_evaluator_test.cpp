// The tuner's candidate evaluation on PoCL: a correct candidate is timed, a wrong one and one that does not
// compile are recorded as failures with their kind, whether compiled ahead (prefetch) or not.
#include <gtest/gtest.h>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "src/tuner/candidate_evaluator.h"
#include "tests/support/opencl_device.h"

namespace convtune {
namespace {

// A family outside the registry whose MODE parameter picks a right, a wrong or a broken kernel.
class FakeFamily final : public KernelFamily {
 public:
  std::string name() const override { return "fake"; }
  std::string description() const override { return "test family"; }
  std::string unsupported_reason(const Problem& generic, const Epilogue&, const DeviceInfo&) const override {
    if (!generic.is_conv()) return "convolutions only";
    const ConvProblem& p = generic.conv();
    return p.c == 1 && p.k == 1 && p.r == 1 && p.s == 1 && p.direction == Direction::Forward ? "" : "only 1x1x1 fwd";
  }
  std::vector<Parameter> parameters(const Problem&) const override { return {{"MODE", {0, 1, 2}, "outcome"}}; }
  std::vector<Constraint> constraints(const Problem&) const override { return {}; }
  Config default_config(const Problem&, const DeviceInfo&) const override { return {{"MODE", 0}}; }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  KernelRecipe recipe(const Problem& generic, const Epilogue&, const Config& c, const DeviceInfo&) const override {
    const ConvProblem& p = generic.conv();
    KernelRecipe r;
    r.source = {"test/fake_convolution.cl", {{"MODE", std::to_string(c.at("MODE"))}}, {}};
    LaunchStep step;
    step.kernel = "fake_convolution";
    step.args = {ArgSource::of_operand(0), ArgSource::of_operand(1), ArgSource::of_operand(2),
                 ArgSource::fixed(static_cast<int>(p.y_elements()))};
    step.geometry.global[0] = static_cast<size_t>(p.y_elements());
    r.steps.push_back(step);
    return r;
  }
};

using test::opencl_device;

TEST(CandidateEvaluator, TimesRightCandidatesAndNamesEachKindOfFailure) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  const FakeFamily family;
  const ConvProblem problem = parse_problem("N=2,C=1,H=16,K=1,R=1");
  CandidateEvaluator evaluator(*device, family, problem, {1, 2, 0, 64, 7});
  evaluator.prefetch({{"MODE", 2}});  // compiled ahead: the failure arrives at evaluate()

  const Evaluation right = evaluator.evaluate({{"MODE", 0}});
  ASSERT_TRUE(right.ms.has_value()) << right.failure;
  EXPECT_GT(*right.ms, 0);
  EXPECT_GT(evaluator.best_ms(), 0);

  const Evaluation wrong = evaluator.evaluate({{"MODE", 1}});
  EXPECT_FALSE(wrong.ms.has_value());
  EXPECT_EQ(wrong.failure.rfind("wrong result:", 0), 0u) << wrong.failure;

  const Evaluation broken = evaluator.evaluate({{"MODE", 2}});
  EXPECT_FALSE(broken.ms.has_value());
  EXPECT_EQ(broken.failure.rfind("compile error:", 0), 0u) << broken.failure;
  EXPECT_NE(broken.failure.find("fake_convolution.cl"), std::string::npos) << broken.failure;

  const Evaluation invalid = evaluator.evaluate({{"MODE", 7}});  // not a candidate value: refused before compiling
  EXPECT_EQ(invalid.failure.rfind("compile error:", 0), 0u) << invalid.failure;
  EXPECT_NE(invalid.failure.find("MODE=7"), std::string::npos) << invalid.failure;
}

}  // namespace
}  // namespace convtune
