// The untuned choice where no tuning data answers (a GPU convtune ships nothing for): Winograd's claim on wide
// 3x3 layers, fft's on wide 5x5 ones, the poor-fit rules and implicit_gemm's default covering the multiprocessors, each from a
// measurement on layers never tuned (scripts/gpu/general_shapes.txt). No GPU needed: a described Hopper.
#include <gtest/gtest.h>

#include <string>

#include "convtune/conv_problem.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "tests/support/hopper_device.h"

namespace convtune {
namespace {

// The plan a described Hopper makes with no tuning data at all.
PlanDescriptor untuned(const std::string& text) {
  PlanRequest request;
  request.problem = Problem(parse_problem(text));
  request.use_tuning = false;
  return PlanDescriptor::create(test::described_hopper(), request);
}

TEST(UntunedChoice, WinogradGoesFirstOnWideThreeTapLayers) {
  for (const char* dir : {"fwd", "bwd-data", "bwd-filter"}) {
    for (const char* layer : {"N=32,C=512,H=7,W=7,K=512,R=3,pad=1", "N=1,C=256,H=56,W=56,K=256,R=3,pad=1",
                              "N=4,C=128,H=128,W=128,K=64,R=3,pad=1"}) {
      const PlanDescriptor plan = untuned(std::string(layer) + ",dir=" + dir);
      EXPECT_EQ(plan.family().name(), "winograd") << layer << " " << dir << ": " << plan.explanation();
      EXPECT_NE(plan.explanation().find("winograd ahead of the rank order"), std::string::npos) << plan.explanation();
    }
  }
}

// 5x5 and larger filters over at least 32 channels a group go to FFT tiling on GPUs, in every direction; fewer
// channels, PoCL-like CPUs and tensor-core math do not.
TEST(UntunedChoice, FftGoesFirstOnWideFiveTapLayers) {
  for (const char* dir : {"fwd", "bwd-data", "bwd-filter"}) {
    for (const char* layer : {"N=32,C=96,H=27,W=27,K=256,R=5,pad=2,groups=2", "N=128,C=64,H=27,W=27,K=192,R=5,pad=2",
                              "N=64,C=32,H=14,W=14,K=64,R=5,pad=2", "N=8,C=64,H=40,W=40,K=64,R=7,pad=3"}) {
      const PlanDescriptor plan = untuned(std::string(layer) + ",dir=" + dir);
      EXPECT_EQ(plan.family().name(), "fft") << layer << " " << dir << ": " << plan.explanation();
      EXPECT_NE(plan.explanation().find("fft ahead of the rank order"), std::string::npos) << plan.explanation();
    }
  }
  for (const char* text : {"N=32,C=16,H=27,W=27,K=64,R=5,pad=2,dir=fwd", "N=32,C=64,H=27,W=27,K=64,R=5,pad=2,math=tf32",
                           "N=32,C=64,H=27,W=27,K=64,R=1,S=7,pad_w=3", "N=32,C=64,H=27,W=27,K=64,R=5,stride=2,pad=2"})
    EXPECT_NE(untuned(text).family().name(), "fft") << text;
}

TEST(UntunedChoice, WinogradClaimsNothingWhereItLost) {
  // Fewer than 32 channels, 8 a group, a 5x5 backward-filter over 48 x 64 channels, and tf32 (tensor cores compete).
  for (const char* text : {"N=7,C=19,H=37,W=23,K=29,R=3,pad=1,dir=fwd", "N=2,C=8,H=8,W=8,K=8,R=3,pad=1,dir=fwd",
                           "N=32,C=256,H=56,W=56,K=256,R=3,pad=1,groups=32,dir=fwd",
                           "N=32,C=48,H=35,W=35,K=64,R=5,pad=2,dir=bwd-filter",
                           "N=32,C=512,H=7,W=7,K=512,R=3,pad=1,dir=fwd,math=tf32"}) {
    const PlanDescriptor plan = untuned(text);
    EXPECT_NE(plan.family().name(), "winograd") << text << ": " << plan.explanation();
  }
  // A 5x5 layer of 48 x 64 channels is fft's in every direction.
  EXPECT_EQ(untuned("N=32,C=48,H=35,W=35,K=64,R=5,pad=2,dir=fwd").family().name(), "fft");
}

TEST(UntunedChoice, WinogradTcClaimsTheSameLayersInTensorCoreModes) {
  for (const char* math : {"tf32", "3xtf32"}) {
    const PlanDescriptor plan = untuned(std::string("N=32,C=512,H=7,W=7,K=512,R=3,pad=1,dir=fwd,math=") + math);
    EXPECT_EQ(plan.family().name(), "winograd_tc") << math << ": " << plan.explanation();
    EXPECT_NE(untuned(std::string("N=7,C=19,H=37,W=23,K=29,R=3,pad=1,dir=fwd,math=") + math).family().name(),
              "winograd_tc")
        << math;
  }
}

TEST(UntunedChoice, ShortBackwardFilterReductionsIntoFewOutputsLeaveImplicitGemm) {
  // A ResNet stem at N=1 (9,408 outputs, 12,544 long), a prime-sized layer, a 1x1 projection: direct_tiled won.
  for (const char* text : {"N=1,C=3,H=224,W=224,K=64,R=7,stride=2,pad=3,dir=bwd-filter",
                           "N=7,C=19,H=37,W=23,K=29,R=3,pad=1,dir=bwd-filter",
                           "N=64,C=144,H=28,W=28,K=32,R=1,dir=bwd-filter"}) {
    const PlanDescriptor plan = untuned(text);
    EXPECT_EQ(plan.family().name(), "direct_tiled") << text << ": " << plan.explanation();
  }
  // The same stem at N=32 (401,408 long) ran implicit_gemm fastest.
  EXPECT_EQ(untuned("N=32,C=3,H=224,W=224,K=64,R=7,stride=2,pad=3,dir=bwd-filter").family().name(), "implicit_gemm");
}

TEST(UntunedChoice, DepthwiseClaimsBackwardFilterWithOneInputChannel) {
  for (const char* text : {"N=10000,C=1,H=28,W=28,K=32,R=5,pad=2,dir=bwd-filter",
                           "N=64,C=1,H=64,W=64,K=32,R=3,stride=2,pad=1,dir=bwd-filter",
                           "N=64,C=1,H=28,W=28,K=6,R=5,pad=2,dir=bwd-filter"}) {
    const PlanDescriptor plan = untuned(text);
    EXPECT_EQ(plan.family().name(), "depthwise") << text << ": " << plan.explanation();
  }
  // Not forward (direct_tiled and implicit_gemm won there), not tf32, not C=3.
  EXPECT_NE(untuned("N=128,C=1,H=32,W=32,K=16,R=5,pad=2,dir=fwd").family().name(), "depthwise");
  EXPECT_NE(untuned("N=10000,C=1,H=28,W=28,K=32,R=5,pad=2,dir=bwd-filter,math=tf32").family().name(), "depthwise");
  EXPECT_NE(untuned("N=1,C=3,H=224,W=224,K=64,R=7,stride=2,pad=3,dir=bwd-filter").family().name(), "depthwise");
}

TEST(UntunedChoice, StridedBackwardDataKeepsDirectTiledOnlyForSmallFiltersAndFewChannels) {
  EXPECT_EQ(untuned("N=16,C=32,H=208,W=208,K=64,R=3,stride=2,pad=1,dir=bwd-data").family().name(), "direct_tiled");
  EXPECT_EQ(untuned("N=256,C=3,H=64,W=64,K=32,R=3,stride=2,pad=1,dir=bwd-data").family().name(), "direct_tiled");
  EXPECT_EQ(untuned("N=32,C=64,H=56,W=56,K=128,R=3,stride=2,pad=1,dir=bwd-data").family().name(), "im2col_gemm");
  EXPECT_EQ(untuned("N=32,C=3,H=224,W=224,K=64,R=7,stride=2,pad=3,dir=bwd-data").family().name(), "im2col_gemm");
}

TEST(UntunedChoice, ImplicitGemmDefaultCoversTheMultiprocessors) {
  // N=1 1x1, 1024 x 784 x 512: 128x128 tiles would leave 76 of 132 multiprocessors idle (56 tiles, under half).
  for (const char* dir : {"fwd", "bwd-data", "bwd-filter"}) {
    PlanRequest request;
    request.problem = Problem(parse_problem(std::string("N=1,C=512,H=28,W=28,K=1024,R=1,dir=") + dir));
    request.use_tuning = false;
    request.family = "implicit_gemm";
    const PlanDescriptor plan = PlanDescriptor::create(test::described_hopper(), request);
    EXPECT_LE(plan.config().at("TILE_M") * plan.config().at("TILE_N"), 64 * 128) << dir;
  }
  // A layer that fills the device keeps 128x128 (alex3 forward: 507 tiles).
  PlanRequest alex3;
  alex3.problem = Problem(parse_problem("N=128,C=192,H=13,W=13,K=384,R=3,pad=1"));
  alex3.use_tuning = false;
  alex3.family = "implicit_gemm";
  const PlanDescriptor plan = PlanDescriptor::create(test::described_hopper(), alex3);
  EXPECT_EQ(plan.config().at("TILE_M"), 128);
  EXPECT_EQ(plan.config().at("TILE_N"), 128);
}

}  // namespace
}  // namespace convtune
