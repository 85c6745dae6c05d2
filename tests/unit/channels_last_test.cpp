// Channels-last (NHWC) problems: their text, the reference's layout, and how plans choose for them (the families
// that read NHWC themselves first, NCHW entries carried only to those, the copies named in the explanation). No GPU
// needed: a described Hopper and the CPU device.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "convtune/conv_problem.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "convtune/tuning.h"
#include "src/backend/cpu/reference.h"
#include "tests/support/hopper_device.h"

namespace convtune {
namespace {

bool has_text(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ChannelsLast, TextRoundTripsAndNchwTextIsUnchanged) {
  const ConvProblem nchw = parse_problem("N=2,C=8,H=7,K=4,R=3,pad=1");
  EXPECT_EQ(nchw.layout, Layout::NCHW);
  EXPECT_EQ(nchw.to_string().find("layout"), std::string::npos);  // tuning entries keep their keys
  const ConvProblem nhwc = parse_problem("N=2,C=8,H=7,K=4,R=3,pad=1,layout=nhwc");
  EXPECT_EQ(nhwc.layout, Layout::NHWC);
  EXPECT_EQ(parse_problem(nhwc.to_string()), nhwc);
  EXPECT_NE(nhwc, nchw);
  EXPECT_EQ(parse_problem("N=1,C=1,H=3,K=1,layout=channels_last").layout, Layout::NHWC);
  try {
    parse_problem("N=1,C=1,H=3,K=1,layout=chwn");
    FAIL() << "an unknown layout was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(has_text(e.what(), "unknown layout 'chwn': expected nchw or nhwc")) << e.what();
  }
}

// The reference reads channels-last operands at their channels-last offsets: the same values placed in both layouts
// give the same output values.
TEST(ChannelsLast, ReferenceComputesTheSameConvolutionInBothLayouts) {
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const ConvProblem nchw = parse_problem("N=2,C=6,H=5,W=4,K=4,R=3,S=2,stride=2x1,pad=1,groups=2").with_direction(d);
    const ConvProblem nhwc = nchw.with_layout(Layout::NHWC);
    std::vector<float> x(static_cast<size_t>(nchw.x_elements())), w(static_cast<size_t>(nchw.w_elements())),
        y(static_cast<size_t>(nchw.y_elements()));
    std::vector<float> xt(x.size()), wt(w.size()), yt(y.size());
    uint32_t seed = 1;  // small integers: both layouts' sums are exact, so the outputs must be equal
    const auto value = [&] {
      seed = seed * 1103515245u + 12345u;
      return static_cast<float>(static_cast<int>(seed >> 16) % 17 - 8);
    };
    for (int64_t n = 0; n < nchw.n; ++n)
      for (int64_t c = 0; c < nchw.c; ++c)
        for (int64_t h = 0; h < nchw.h; ++h)
          for (int64_t q = 0; q < nchw.w; ++q) xt[nhwc.x_offset(n, c, h, q)] = x[nchw.x_offset(n, c, h, q)] = value();
    for (int64_t k = 0; k < nchw.k; ++k)
      for (int64_t c = 0; c < nchw.c_per_group(); ++c)
        for (int64_t r = 0; r < nchw.r; ++r)
          for (int64_t s = 0; s < nchw.s; ++s) wt[nhwc.w_offset(k, c, r, s)] = w[nchw.w_offset(k, c, r, s)] = value();
    for (int64_t n = 0; n < nchw.n; ++n)
      for (int64_t k = 0; k < nchw.k; ++k)
        for (int64_t p = 0; p < nchw.p(); ++p)
          for (int64_t q = 0; q < nchw.q(); ++q) yt[nhwc.y_offset(n, k, p, q)] = y[nchw.y_offset(n, k, p, q)] = value();
    const cpu::HostOperands a{{x.data(), w.data(), y.data()}}, b{{xt.data(), wt.data(), yt.data()}};
    for (int64_t i = 0; i < cpu::output_count(Problem(nchw)); ++i) {
      ASSERT_EQ(cpu::reference_element(Problem(nchw), a, i), cpu::reference_element(Problem(nhwc), b, i))
          << to_string(d) << " element " << i;
      // The logical order is NCHW's: the same element i lies where each layout keeps it.
      const int64_t at = cpu::output_offset(Problem(nhwc), i);
      ASSERT_LT(at, cpu::output_count(Problem(nhwc)));
    }
  }
}

PlanDescriptor plan_bf16(const ConvProblem& problem, const TuningDatabase* database) {
  PlanRequest request;
  request.problem = Problem(problem).with_precision({ElementType::BF16, MathMode::FP32});
  request.use_tuning = database != nullptr;
  request.tuning = database;
  return PlanDescriptor::create(test::described_hopper(), request);
}

// Untuned, a channels-last convolution goes to a family that reads channels-last itself where one suits it.
TEST(ChannelsLast, UntunedPlansTakeAFamilyThatReadsChannelsLast) {
  for (const char* text : {"N=64,C=64,H=56,K=64,R=3,pad=1,dir=fwd", "N=64,C=256,H=14,K=1024,R=1,dir=bwd-data",
                           "N=64,C=128,H=28,K=128,R=3,pad=1,dir=bwd-filter",
                           "N=64,C=512,H=28,K=1024,R=1,stride=2,dir=bwd-data",
                           "N=64,C=96,H=112,K=96,R=3,pad=1,groups=96,dir=fwd",
                           "N=64,C=144,H=56,K=144,R=3,stride=2,pad=1,groups=144,dir=bwd-filter"}) {
    const PlanDescriptor plan = plan_bf16(parse_problem(std::string(text) + ",layout=nhwc"), nullptr);
    EXPECT_TRUE(plan.family().computes_nhwc()) << text << ": " << plan.describe() << ": " << plan.explanation();
    EXPECT_FALSE(has_text(plan.explanation(), "transposed into NCHW copies")) << plan.explanation();
  }
}

// NCHW entries carry to channels-last problems only for the families that read channels-last themselves (their
// kernels do the same work with fewer copies); another family's NCHW time left out the transposes it would add.
TEST(ChannelsLast, NchwEntriesCarryOnlyToFamiliesThatReadChannelsLast) {
  const DeviceInfo device = test::described_hopper();
  const ConvProblem layer = parse_problem("N=64,C=64,H=56,K=64,R=3,pad=1");
  const Problem nchw = Problem(layer).with_precision({ElementType::BF16, MathMode::FP32});
  TuningDatabase db(std::filesystem::temp_directory_path() / "convtune-channels-last-test-never-written.json");
  const KernelFamily& fft = kernel_family("widened_winograd_tc");
  const KernelFamily& wg = kernel_family("implicit_gemm_nhwc_wgmma");
  db.insert(make_tuning_entry(device, fft.name(), fft.kernel_version(), nchw, fft.default_config(nchw, device), 0.1));
  db.insert(make_tuning_entry(device, wg.name(), wg.kernel_version(), nchw, wg.default_config(nchw, device), 0.5));
  EXPECT_EQ(plan_bf16(layer, &db).family().name(), "widened_winograd_tc");  // NCHW: the fastest entry
  const PlanDescriptor plan = plan_bf16(layer.with_layout(Layout::NHWC), &db);
  EXPECT_EQ(plan.family().name(), "implicit_gemm_nhwc_wgmma") << plan.explanation();
  EXPECT_EQ(plan.tier(), ConfigTier::Nearest);
  EXPECT_TRUE(has_text(plan.explanation(), "tuned in nchw")) << plan.explanation();
}

// A family that reads NCHW computes channels-last problems on copies, and its plan says so; on the CPU device every
// family does.
TEST(ChannelsLast, CopiesAreNamedInTheExplanation) {
  PlanRequest request;
  request.problem = Problem(parse_problem("N=2,C=8,H=9,K=8,R=3,pad=1,layout=nhwc"));
  request.family = "implicit_gemm";
  request.use_tuning = false;
  const PlanDescriptor plan = PlanDescriptor::create(test::described_hopper(), request);
  EXPECT_TRUE(has_text(plan.explanation(), "implicit_gemm reads NCHW: the channels-last operands are transposed"))
      << plan.explanation();
  // x and y are copied, the 3x3 filters too; a 1x1 filter's two layouts are the same bytes and are not.
  EXPECT_EQ(plan.recipe().staging_bytes.size(), 3u);
  request.problem = Problem(parse_problem("N=2,C=8,H=9,K=8,R=1,layout=nhwc"));
  EXPECT_EQ(PlanDescriptor::create(test::described_hopper(), request).recipe().staging_bytes.size(), 2u);
}

}  // namespace
}  // namespace convtune
