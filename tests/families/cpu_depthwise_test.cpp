// cpu_depthwise beyond the shared CPU conformance test: every VECS and FORM (planes, channel-blocked) on every ISA
// (AVX-512, AVX2, scalar) against the float64 reference on depthwise shapes the standard cases leave out (strides 2
// and 3 per axis, dilation, odd and one-pixel images, multipliers, padding wider than the filter's reach, images
// narrower than a vector, large filters on small planes, channel counts that leave a block part-empty); untuned
// plans on the CPU take it for depthwise layers, with the channel-blocked form where rows are short, strided or the
// filter large, and leave one-group layers to cpu_blocked; backward-filter's shares are summed in a fixed order
// (bit-identical reruns); other layers are refused by name.
#include <gtest/gtest.h>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/backend/cpu/isa.h"
#include "src/families/cpu_depthwise/channel_form.h"
#include "src/harness/workload.h"
#include "tests/support/forced_isa.h"
#include "tests/support/plan_check.h"

using namespace convtune;

namespace {

Device& cpu_device() { return Registry::instance().find("cpu"); }

using test::ForcedIsa;

const std::vector<std::string> kShapes = {
    "N=2,C=5,H=13,W=11,K=5,R=3,pad=1,groups=5",                      // odd sizes
    "N=1,C=3,H=20,W=37,K=6,R=3,stride=2,pad=1,groups=3",             // multiplier 2, stride 2
    "N=2,C=4,H=17,W=23,K=4,R=5,S=3,stride=3x2,pad=2x1,groups=4",     // strides differ per axis
    "N=1,C=2,H=9,W=40,K=6,R=3,dilation=2x3,pad=2x3,groups=2",       // dilation, multiplier 3
    "N=3,C=3,H=1,W=1,K=3,R=3,pad=1,groups=3",                        // one pixel
    "N=1,C=2,H=6,W=5,K=2,R=3,pad=3,groups=2",                        // padding past the filter's reach
    "N=2,C=8,H=33,W=70,K=8,R=7,stride=2,pad=3,groups=8",             // rows longer than a vector block
    "N=1,C=3,H=14,W=45,K=3,R=5,stride=2,pad=2,groups=3",             // stride 2 from an even padding
    "N=1,C=1,H=12,W=12,K=4,R=5,pad=2",                               // one group of one channel
    "N=2,C=3,H=10,W=17,K=3,R=3,S=5,stride=2x3,pad=1x2,groups=3",     // stride 3 along rows
    // Read in place (unit strides, 3x3 and 5x5; 7x7 copies): rows of several blocks, no padding, padding wider
    // than the filter's reach (backward-data's own padding negative).
    "N=1,C=3,H=11,W=150,K=3,R=3,pad=1,groups=3",
    "N=2,C=3,H=20,W=70,K=3,R=7,pad=3,groups=3",
    "N=1,C=2,H=9,W=9,K=2,R=5,groups=2",
    "N=1,C=2,H=7,W=19,K=2,R=3,pad=4,dilation=2,groups=2",
    // The channel-blocked form's cases: ConvNeXt's 7x7 on 7x7 planes, EfficientNet's 5x5 stride 2, channels that
    // fill one block and part of the next (20: 16 + 4 on AVX-512, 8 + 8 + 4 on AVX2), planes of one row or
    // column, stride 2 with dilation, a 9x9 filter, stride 2 on odd images from padding 0.
    "N=2,C=20,H=7,W=7,K=20,R=7,pad=3,groups=20",
    "N=1,C=17,H=28,W=28,K=17,R=5,stride=2,pad=2,groups=17",
    "N=1,C=33,H=14,W=14,K=33,R=5,pad=2,groups=33",
    "N=2,C=18,H=1,W=23,K=18,R=3,S=7,pad=1x3,groups=18",
    "N=1,C=16,H=19,W=1,K=16,R=5,S=1,stride=2,pad=2x0,groups=16",
    "N=1,C=24,H=21,W=17,K=24,R=3,stride=2,pad=2,dilation=2,groups=24",
    "N=1,C=9,H=15,W=16,K=9,R=9,pad=4,groups=9",
    "N=3,C=19,H=13,W=11,K=19,R=3,stride=2,groups=19",
};

}  // namespace

TEST(CpuDepthwise, EveryVecsOnEveryIsaMatchesTheReference) {
  int checks = 0;
  for (const std::string& text : kShapes) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = parse_problem(text).with_direction(d);
      harness::Workload workload(cpu_device(), pb, 5);
      const bool has_form = cpu_depthwise::channel_form_applies(pb);
      for (cpu::Isa isa : cpu::available_isas()) {
        ForcedIsa forced(isa);
        for (int64_t form : {0, 1}) {
          if (form == 1 && !has_form) continue;
          for (int64_t vecs : {1, 2, 4}) {
            if (form == 1 && vecs != 4) continue;  // VECS belongs to the plane form
            Config config{{"VECS", vecs}};
            if (has_form) config["FORM"] = form;
            const auto r = testing_support::check_plan_on(workload, "cpu_depthwise", config);
            EXPECT_TRUE(r.passed) << pb.to_string() << " " << cpu::to_string(isa) << " VECS=" << vecs
                                  << " FORM=" << form << ": " << r.message;
            ++checks;
          }
        }
      }
    }
  }
  std::cout << "cpu_depthwise: " << checks << " checks\n";
}

TEST(CpuDepthwise, UntunedPlansTakeItForDepthwiseLayersOnly) {
  const auto family_of = [](const char* text) {
    PlanRequest request{Problem(parse_problem(text))};
    request.use_tuning = false;
    return PlanDescriptor::create(cpu_device().info(), request).family().name();
  };
  EXPECT_EQ(family_of("N=8,C=144,H=56,K=144,R=3,pad=1,groups=144"), "cpu_depthwise");
  EXPECT_EQ(family_of("N=8,C=144,H=56,K=144,R=3,stride=2,pad=1,groups=144"), "cpu_depthwise");
  EXPECT_EQ(family_of("N=8,C=32,H=28,K=64,R=3,pad=1,groups=32"), "cpu_depthwise");  // multiplier 2
  EXPECT_EQ(family_of("N=8,C=1,H=28,K=32,R=5,pad=2"), "cpu_blocked");               // one group
  EXPECT_EQ(family_of("N=8,C=256,H=28,K=256,R=3,pad=1,groups=32"), "cpu_blocked");  // 8 channels a group
  // The form the untuned plan runs: channel-blocked for ConvNeXt's 7x7 and EfficientNet's 5x5 stride 2 (every
  // direction), planes for MobileNetV2's 56x56 3x3; channel multipliers have planes only.
  const auto form_of = [](const char* text, Direction d) {
    PlanRequest request{Problem(parse_problem(text).with_direction(d))};
    request.use_tuning = false;
    const Config config = PlanDescriptor::create(cpu_device().info(), request).config();
    return config.count("FORM") ? config.at("FORM") : int64_t{-1};
  };
  EXPECT_EQ(form_of("N=1,C=384,H=14,K=384,R=7,pad=3,groups=384", Direction::Forward), 1);
  EXPECT_EQ(form_of("N=1,C=384,H=14,K=384,R=7,pad=3,groups=384", Direction::BackwardData), 1);
  EXPECT_EQ(form_of("N=1,C=240,H=28,K=240,R=5,stride=2,pad=2,groups=240", Direction::Forward), 1);
  EXPECT_EQ(form_of("N=8,C=144,H=56,K=144,R=3,pad=1,groups=144", Direction::Forward), 0);
  EXPECT_EQ(form_of("N=1,C=384,H=14,K=384,R=7,pad=3,groups=384", Direction::BackwardFilter), 1);
  EXPECT_EQ(form_of("N=8,C=144,H=56,K=144,R=3,pad=1,groups=144", Direction::BackwardFilter), 0);
  EXPECT_EQ(form_of("N=8,C=32,H=14,K=64,R=7,pad=3,groups=32", Direction::Forward), -1);
  const std::string why = kernel_family("cpu_depthwise")
                              .unsupported_reason(Problem(parse_problem("N=1,C=16,H=8,K=16,R=3,groups=2")), {},
                                                  cpu_device().info());
  EXPECT_NE(why.find("depthwise"), std::string::npos) << why;
}

TEST(CpuDepthwise, BackwardFilterRerunsAreBitIdentical) {
  // Few channels, many images: the images are split into shares per channel, summed in order.
  const ConvProblem pb =
      parse_problem("N=16,C=2,H=15,W=15,K=2,R=3,pad=1,groups=2").with_direction(Direction::BackwardFilter);
  PlanRequest request{Problem(pb)};
  request.family = "cpu_depthwise";
  harness::Workload workload(cpu_device(), pb, 3);
  const Plan plan = Plan::create(cpu_device(), request);
  plan.run(workload.queue(), workload.operands());
  const std::vector<float> first = workload.output();
  for (int i = 0; i < 5; ++i) {
    plan.run(workload.queue(), workload.operands());
    EXPECT_EQ(workload.output(), first);
  }
}

TEST(CpuDepthwise, PlanesKeepTheirZerosBetweenLayers) {
  // A thread's scratch planes keep a layer's zero borders between planes and runs; another layer's planes in
  // between (other sizes, padding, strides) must not leave their values where the first layer expects zeros.
  // The first three in planes, the last three in the channel-blocked form, whose copies keep their borders the
  // same way.
  const std::vector<std::string> layers = {"N=3,C=4,H=9,W=13,K=4,R=3,pad=1,groups=4",
                                           "N=3,C=4,H=12,W=7,K=4,R=5,pad=2,groups=4",
                                           "N=2,C=4,H=11,W=19,K=4,R=3,stride=2,pad=1,groups=4",
                                           "N=3,C=20,H=7,W=7,K=20,R=7,pad=3,groups=20",
                                           "N=3,C=20,H=9,W=8,K=20,R=5,stride=2,pad=2,groups=20",
                                           "N=2,C=20,H=7,W=7,K=20,R=3,pad=1,groups=20"};
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    std::vector<std::unique_ptr<harness::Workload>> workloads;
    std::vector<Plan> plans;
    std::vector<std::vector<float>> first;
    for (const std::string& text : layers) {
      const ConvProblem pb = parse_problem(text).with_direction(d);
      Config config{{"VECS", 4}};
      if (cpu_depthwise::channel_form_applies(pb)) config["FORM"] = plans.size() < 3 ? 0 : 1;
      PlanRequest request{Problem(pb)};
      request.family = "cpu_depthwise";
      request.config = config;
      workloads.push_back(std::make_unique<harness::Workload>(cpu_device(), pb, 7));
      plans.push_back(Plan::create(cpu_device(), request));
      const auto r = testing_support::check_plan_on(*workloads.back(), "cpu_depthwise", config);
      EXPECT_TRUE(r.passed) << pb.to_string() << ": " << r.message;
      plans.back().run(workloads.back()->queue(), workloads.back()->operands());
      first.push_back(workloads.back()->output());
    }
    for (int round = 0; round < 3; ++round) {
      for (size_t i = 0; i < layers.size(); ++i) {
        plans[i].run(workloads[i]->queue(), workloads[i]->operands());
        EXPECT_EQ(workloads[i]->output(), first[i]) << layers[i] << " " << to_string(d) << ", round " << round;
      }
    }
  }
}
