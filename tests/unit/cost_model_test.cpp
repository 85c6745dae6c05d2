// The cost model behind untuned family choices: deterministic fits, no model (and the rank order) where a device
// has no data, its picks on the shipped H200 data where the issue saw the built-in rules miss, its checked accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/families/untuned_order.h"
#include "src/tuning_db/cost_model.h"
#include "src/tuning_db/tuning_database.h"
#include "tests/support/hopper_device.h"

namespace convtune {
namespace {

ConvProblem conv(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t rs, int64_t stride, int64_t pad,
                 int64_t groups = 1, Direction d = Direction::Forward) {
  ConvProblem p;
  p.n = n, p.c = c, p.h = p.w = hw, p.k = k, p.r = p.s = rs;
  p.stride = {stride, stride}, p.pad = {pad, pad}, p.groups = groups, p.direction = d;
  return p;
}

// The H200 entries convtune ships, read as the plans read them.
const TuningDatabase& shipped() {
  static const TuningDatabase db(std::filesystem::temp_directory_path() / "convtune-cost-model-test-none.json",
                                 shipped_tuning_dir());
  return db;
}

std::vector<CostSample> shipped_h200_samples() {
  return cost_samples(shipped().list(), [](const TuningEntry& e) { return e.device.name == "NVIDIA H200"; });
}

// The poor-fit rules as plans on the device of the shipped entries (a Hopper GPU) apply them.
bool poor_fit(const std::string& family, const ConvProblem& problem) {
  static const DeviceInfo hopper = test::described_hopper();
  return !kernel_family(family).untuned_poor_fit(Problem(problem), hopper).empty();
}

std::string untuned_family(const ConvProblem& problem, const TuningDatabase& db, const DeviceInfo& device) {
  PlanRequest request{Problem(problem)};
  request.tuning = &db;
  const PlanDescriptor d = PlanDescriptor::create(device, request);
  EXPECT_EQ(d.tier(), ConfigTier::BuiltInDefault) << d.explanation();
  return d.family().name();
}

TEST(CostModel, FitDoesNotDependOnSampleOrderAndPredictsTheSameEveryTime) {
  std::vector<CostSample> samples = shipped_h200_samples();
  ASSERT_GE(samples.size(), 100u);
  const CostModel a = CostModel::fit(samples);
  std::mt19937 rng(7);
  std::shuffle(samples.begin(), samples.end(), rng);
  const CostModel b = CostModel::fit(samples);
  const ConvProblem p = conv(64, 128, 28, 128, 3, 1, 1, 1, Direction::BackwardData);
  for (const char* family : {"implicit_gemm", "direct_tiled", "im2col_gemm", "winograd"}) {
    ASSERT_TRUE(a.predict_ms(family, p)) << family;
    EXPECT_EQ(*a.predict_ms(family, p), *b.predict_ms(family, p)) << family;  // bit for bit
  }
  EXPECT_FALSE(a.predict_ms("gemm", p));  // no convolution samples
  ConvProblem tf32 = p;
  tf32.math = MathMode::TF32;
  EXPECT_FALSE(a.predict_ms("implicit_gemm", tf32));  // fitted on fp32 math only
}

TEST(CostModel, Fp16WithoutItsOwnFitTakesBf16s) {
  // Two families measured in bf16 only, then one of them in fp16 too (with other times): fp16 problems take the
  // bf16 fit where there is no fp16 one, their own where there is.
  std::vector<CostSample> samples;
  for (int64_t i = 0; i < 8; ++i) {
    ConvProblem p = conv(8 << (i % 4), 64 << (i / 4), 28, 128, 3, 1, 1);
    p.type = ElementType::BF16;
    samples.push_back({"implicit_gemm_wgmma", p, 0.1 * static_cast<double>(1 + i)});
    samples.push_back({"col2im_wgmma", p, 0.2 * static_cast<double>(1 + i)});
    p.type = ElementType::F16;
    samples.push_back({"col2im_wgmma", p, 0.05 * static_cast<double>(1 + i)});
  }
  const CostModel model = CostModel::fit(samples);
  ConvProblem bf16 = conv(16, 64, 28, 128, 3, 1, 1), fp16 = bf16;
  bf16.type = ElementType::BF16, fp16.type = ElementType::F16;
  ASSERT_TRUE(model.predict_ms("implicit_gemm_wgmma", fp16));
  EXPECT_EQ(*model.predict_ms("implicit_gemm_wgmma", fp16), *model.predict_ms("implicit_gemm_wgmma", bf16));
  ASSERT_TRUE(model.predict_ms("col2im_wgmma", fp16));
  EXPECT_LT(*model.predict_ms("col2im_wgmma", fp16), *model.predict_ms("col2im_wgmma", bf16));  // its own fit
  ConvProblem fp32 = bf16;
  fp32.type = ElementType::F32;
  EXPECT_FALSE(model.predict_ms("implicit_gemm_wgmma", fp32));  // no such fallback for other types
}

TEST(CostModel, TooFewSamplesGiveNoModelAndPlansKeepTheRankOrder) {
  std::vector<CostSample> few;
  for (int i = 0; i < static_cast<int>(kCostModelMinSamples) - 1; ++i)
    few.push_back({"direct_tiled", conv(8 << i, 16, 28, 32, 3, 1, 1), 0.1 * (i + 1)});
  EXPECT_TRUE(CostModel::fit(few).empty());

  // A device none of the shipped entries describe (another architecture): no model, the built-in rank order.
  DeviceInfo other = test::described_hopper();
  other.architecture = "sm_80";
  other.name = "another GPU";
  EXPECT_EQ(cost_model_for(shipped(), other), nullptr);
  const ConvProblem s2 = conv(32, 64, 56, 128, 3, 2, 1);
  EXPECT_EQ(untuned_family(s2, shipped(), other), "implicit_gemm");
  // Strided backward-data is a poor fit for implicit_gemm and (ungrouped) direct_tiled: the rank order goes on.
  EXPECT_EQ(untuned_family(s2.with_direction(Direction::BackwardData), shipped(), other), "im2col_gemm");
}

// Claims in the rank order: the first claimant decides. Unpredicted, it goes ahead of the predictions; predicted,
// the predictions decide and a later, unpredicted claimant does not jump ahead (fft's H100 entries once made fft
// predictable on ucla5x5 and handed the layer to winograd's claim, at 2.3-3.2x fft's time).
TEST(CostModel, TheFirstClaimantDecidesWhetherTheClaimGoesAhead) {
  std::vector<CostSample> samples;
  for (int64_t n : {32, 64, 128})
    for (int64_t c : {64, 128}) samples.push_back({"fft", conv(n, c, 27, 192, 5, 1, 2), 0.004 * double(n * c) / 64});
  const CostModel model = CostModel::fit(samples);
  const ConvProblem target = conv(64, 96, 27, 192, 5, 1, 2);
  ASSERT_TRUE(model.predict_ms("fft", target));
  ASSERT_FALSE(model.predict_ms("winograd", target));
  const auto everyone_claims = [](const std::string&) { return true; };
  std::string why;
  EXPECT_EQ(cost_model_choice(model, {"fft", "winograd"}, target, {}, &why, everyone_claims), "fft") << why;
  EXPECT_EQ(cost_model_choice(model, {"winograd", "fft"}, target, {}, &why, everyone_claims), "winograd") << why;
  EXPECT_NE(why.find("winograd claims the problem"), std::string::npos) << why;
}

// Outside what the samples cover the model says nothing: the shipped layers all take 10-160 GFLOP with groups 1,
// so a 0.1-GFLOP depthwise layer or any grouped one gets no prediction (and the plan its rules).
TEST(CostModel, PredictsOnlyWithinTheMeasuredRange) {
  const std::shared_ptr<const CostModel> model = cost_model_for(shipped(), test::described_hopper());
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->predict_ms("implicit_gemm", conv(64, 128, 28, 128, 3, 1, 1)));
  EXPECT_FALSE(model->predict_ms("implicit_gemm", conv(32, 256, 28, 256, 3, 1, 1, 256)));  // depthwise
  EXPECT_FALSE(model->predict_ms("implicit_gemm", conv(64, 128, 28, 128, 3, 1, 1, 4)));    // grouped
  EXPECT_FALSE(model->predict_ms("implicit_gemm", conv(8, 16, 15, 24, 5, 2, 1)));           // tiny
}

// The issue's misses (H200, no tuned shape within distance 6): depthwise 3x3 forward ran on implicit_gemm at 0.293 ms
// where direct_tiled took 0.030 (now the depthwise family's: the other families leave depthwise layers to it); a C=3 7x7
// stride-2 layer's backward-data on direct_tiled at 1.71 ms where im2col_gemm took 0.60 (the model, fitted on the two
// C=3 AlexNet layers). Hopper devices get the H200's model through the architecture fallback.
TEST(CostModel, UntunedPlansOnHopperTakeTheFamiliesTheIssueMeasuredFaster) {
  const DeviceInfo hopper = test::described_hopper();
  ASSERT_NE(cost_model_for(shipped(), hopper), nullptr);
  EXPECT_EQ(untuned_family(conv(32, 256, 28, 256, 3, 1, 1, 256), shipped(), hopper), "depthwise");
  EXPECT_EQ(untuned_family(conv(32, 3, 224, 64, 7, 2, 3, 1, Direction::BackwardData), shipped(), hopper),
            "im2col_gemm");
  // Misses measured on the H200 before these rules, each against the family a tune found fastest:
  // strided backward-data (implicit_gemm 0.53 and 0.076 ms, im2col_gemm 0.18 and 0.013), a short backward-filter
  // reduction (implicit_gemm 0.033, direct_tiled 0.012) and 8 channels a group (implicit_gemm 0.036, direct_tiled 0.026).
  EXPECT_EQ(untuned_family(conv(32, 64, 56, 128, 3, 2, 1, 1, Direction::BackwardData), shipped(), hopper),
            "im2col_gemm");
  const ConvProblem odd = parse_problem("N=8,C=16,H=15,W=13,K=24,R=7,S=5,stride=2,pad=1");
  EXPECT_EQ(untuned_family(odd.with_direction(Direction::BackwardData), shipped(), hopper), "im2col_gemm");
  EXPECT_EQ(untuned_family(odd.with_direction(Direction::BackwardFilter), shipped(), hopper), "direct_tiled");
  // Up to 15 taps over at most 8 channels, strided backward-data stays direct_tiled's (3x5 stride 2 over 5
  // channels: 0.0104-0.0107 ms against im2col_gemm's 0.0116-0.0121).
  const ConvProblem odd35 = parse_problem("N=16,C=5,H=31,W=17,K=7,R=3,S=5,stride=2,dir=bwd-data");
  EXPECT_EQ(kernel_family("direct_tiled").untuned_poor_fit(Problem(odd35), hopper), "");
  EXPECT_EQ(untuned_family(conv(32, 256, 14, 256, 3, 1, 1, 32), shipped(), hopper), "direct_tiled");
  // Depthwise backward-data on a GPU: direct_tiled's on 28 columns and wider at stride 1 (0.0267-0.0295 ms against
  // the depthwise default's 0.0323-0.0337 on the 28x28 layer), the depthwise family's on 14x14 and at stride 2, and
  // on a CPU device (PoCL) everywhere.
  EXPECT_EQ(untuned_family(conv(32, 256, 28, 256, 3, 1, 1, 256, Direction::BackwardData), shipped(), hopper),
            "direct_tiled");
  EXPECT_EQ(untuned_family(conv(32, 512, 14, 512, 3, 1, 1, 512, Direction::BackwardData), shipped(), hopper),
            "depthwise");
  EXPECT_EQ(untuned_family(conv(64, 144, 56, 144, 3, 2, 1, 144, Direction::BackwardData), shipped(), hopper),
            "depthwise");
  DeviceInfo cpu_opencl = hopper;
  cpu_opencl.backend = BackendKind::OpenCL, cpu_opencl.is_gpu = false;
  const Problem wide(conv(32, 256, 28, 256, 3, 1, 1, 256, Direction::BackwardData));
  EXPECT_EQ(kernel_family("depthwise").untuned_poor_fit(wide, cpu_opencl), "");
  EXPECT_NE(kernel_family("direct_tiled").untuned_poor_fit(wide, cpu_opencl), "");
  EXPECT_NE(kernel_family("depthwise").untuned_poor_fit(wide, hopper), "");
  EXPECT_EQ(kernel_family("direct_tiled").untuned_poor_fit(wide, hopper), "");
  // Where a tuned shape is near, its entry still decides (the nearest tier comes first).
  PlanRequest alex{Problem(conv(128, 192, 13, 384, 3, 1, 1))};
  alex.tuning = &shipped();
  EXPECT_NE(PlanDescriptor::create(hopper, alex).tier(), ConfigTier::BuiltInDefault);
}

// Leave-one-shape-out on the shipped H200 entries (`convtune db fit --rows`): with 42 problems where two or
// more families were measured, the refitted model picked the measured best on 41 and every pick ran within 90% of
// the best's tuned speed. The bounds leave room for retuned entries, not for a model that stopped learning. Since
// fp32 refuses Winograd's alpha-8 tiles, 5x5 winograd entries in fp32 are F(2x2,5x5) and slower; one pick (fmnist2
// backward-filter: winograd 8.71 ms where implicit_gemm took 6.75) ran at 0.78 of the best. The rows the model
// leaves to the rules are the C=1 Fashion-MNIST layer's, outside the others' range once held out: nine since its
// tf32 and 3xtf32 problems have two families measured too (the rules picked the best family on all nine).
// Since the fft entries, three 3x3 backward-filter rows have fft fastest (0.79-0.89 of its speed for winograd, the
// untuned pick), which the untuned choice passes over by rule (fft's poor fit below 25 taps): counted apart.
// With the fft_wgmma entries, fifteen more: AlexNet's and u6's 13x13 3x3 layers in tf32 and
// 3xtf32, where fft_wgmma's entries beat winograd_tc's (the untuned pick, 0.71-0.95 of fft_wgmma's speed). The rule
// stays: 3x3 layers of other sizes were not measured, and fft lost on a 512-channel 14x14 one. And one reachable row
// the model misses: Fashion-MNIST's conv2 backward-filter in tf32, where implicit_gemm_tc (3.80 ms) runs at 0.65 of
// fft_wgmma's imported default (2.47 ms): once that shape is held out, fft_wgmma's fit has seven shapes, none of
// them cut into chunks.
// With the H100's tf32 choices measured on the H200 and imported, implicit_gemm_nhwc_wgmma
// and implicit_gemm_shifted_wgmma have tf32 entries here, and they are the best on the 5x5 layers where the model,
// holding each shape out, still picks the older families: Fashion-MNIST's conv2 forward (implicit_gemm_tc, 0.35 of
// implicit_gemm_nhwc_wgmma's 1.16 ms), backward-data (winograd_tc, 0.74) and backward-filter (implicit_gemm_tc, 0.61
// of fft_tc), and u2 forward (fft_wgmma, 0.70) and backward-filter (0.87). Those new families have entries on seven
// to twenty shapes of this device, none other at N=10000: Fashion-MNIST's conv2 alone is held to 0.35. Of 119 rows,
// 7 reachable ones now miss the best (5 of them below 0.9), and the rules answer 10 (one more C=1 row).
TEST(CostModel, LeaveOneShapeOutOnTheShippedH200Entries) {
  const CostModelCheck check = leave_one_shape_out(
      shipped_h200_samples(), poor_fit, [](const std::string& f) { return untuned_rank(f); },
      kCostModelRidge, [](const std::string& f, const ConvProblem& p) {
        return !kernel_family(f).untuned_claim(Problem(p), test::described_hopper()).empty();
      });
  ASSERT_GE(check.rows.size(), 40u);
  EXPECT_LE(check.unpredicted(), 10u);
  // Rows whose fastest entry is a family the untuned choice passes over by rule (fft and fft_wgmma on 3x3 layers,
  // where their entries are tuned) judge the rule, not the model: counted apart and printed.
  size_t below_90 = 0, below_75 = 0, out_of_reach = 0, picked = 0;
  for (const CostModelCheckRow& row : check.rows) {
    const bool reachable = !poor_fit(row.best, row.problem);
    out_of_reach += !reachable;
    picked += row.chosen == row.best;
    const std::string what = row.problem.to_string() + ": picked " + row.chosen + " " + std::to_string(row.chosen_ms) +
                             " ms, best " + row.best + " " + std::to_string(row.best_ms) + " ms";
    if (reachable) {
      below_90 += row.ratio() < 0.9;
      below_75 += row.ratio() < 0.75;
      EXPECT_GE(row.ratio(), row.problem.n == 10000 ? 0.35 : 0.6) << what;
      if (row.ratio() < 0.9) std::cout << "reachable, below 0.9: " << what << " (" << row.ratio() << ")\n";
    } else {
      EXPECT_TRUE(row.problem.r * row.problem.s < 25 && (row.best == "fft" || row.best == "fft_wgmma")) << what;
      EXPECT_GE(row.ratio(), 0.7) << what;
      std::cout << "best passed over by rule: " << what << " (" << row.ratio() << ")\n";
    }
  }
  EXPECT_GE(picked + out_of_reach, check.rows.size() - 7);
  EXPECT_LE(out_of_reach, 18u);
  EXPECT_LE(below_90, 5u);
  EXPECT_LE(below_75, 4u);
}

TEST(CostModel, ChoosingTakesMicroseconds) {
  const std::shared_ptr<const CostModel> model = cost_model_for(shipped(), test::described_hopper());
  ASSERT_NE(model, nullptr);
  const std::vector<std::string> families = {"implicit_gemm", "direct_tiled", "im2col_gemm", "winograd"};
  const ConvProblem p = conv(16, 64, 56, 64, 3, 1, 1);
  const int rounds = 2000;
  const auto start = std::chrono::steady_clock::now();
  size_t picked = 0;
  for (int i = 0; i < rounds; ++i) picked += cost_model_choice(*model, families, p, nullptr, nullptr).has_value();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / rounds;
  EXPECT_EQ(picked, static_cast<size_t>(rounds));
  EXPECT_LT(us, 200.0);  // about 2 us in a release build; the bound holds under the sanitizers
  std::cout << "cost model choice: " << us << " us\n";
}

}  // namespace
}  // namespace convtune
