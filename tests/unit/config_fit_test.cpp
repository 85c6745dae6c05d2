// fit_config and carry_config: a tuned configuration carried to another problem keeps what fits and changes the
// least that does not, checked against implicit_gemm's real constraints on a described Hopper GPU.
#include <gtest/gtest.h>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "tests/support/hopper_device.h"

using namespace convtune;

namespace {

const KernelFamily& implicit_gemm() { return kernel_family("implicit_gemm"); }

// What tuning found for AlexNet's fifth layer, backward-filter, on an H200.
const Config kAlex5BackwardFilter = {{"ASYNC_COPY", 1}, {"LOCAL_PADDING", 4}, {"MAX_REGISTERS", 0}, {"SPLIT_K", 32},
                                     {"THREADS_M", 16}, {"THREADS_N", 16},    {"TILE_K", 16},        {"TILE_M", 128},
                                     {"TILE_N", 128},   {"UNROLL_K", 16},     {"VECTOR_WIDTH", 4}};
const ConvProblem kAlex5 =
    parse_problem("N=128,C=384,H=13,W=13,K=256,R=3,S=3,pad=1").with_direction(Direction::BackwardFilter);
// A layer never tuned: a quarter of the batch, slightly larger images.
const ConvProblem kSmallerBatch =
    parse_problem("N=32,C=384,H=15,W=15,K=256,R=3,S=3,pad=1").with_direction(Direction::BackwardFilter);

}  // namespace

TEST(FitConfig, AValidConfigurationIsKeptAsItIs) {
  const DeviceInfo gpu = test::described_hopper();
  ASSERT_EQ(config_problem(implicit_gemm(), kAlex5BackwardFilter, kAlex5, gpu), "");
  const auto fitted = fit_config(implicit_gemm(), kAlex5BackwardFilter, kAlex5, gpu);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(fitted->config, kAlex5BackwardFilter);
  EXPECT_EQ(fitted->changes, "");
}

TEST(FitConfig, ASplitThatLeavesASliceEmptyIsTheOneThingChanged) {
  const DeviceInfo gpu = test::described_hopper();
  // 32 * 225 = 7200 reduction elements make 450 tiles of 16: 32 slices of 15 would leave the last one empty.
  const std::string why = config_problem(implicit_gemm(), kAlex5BackwardFilter, kSmallerBatch, gpu);
  ASSERT_NE(why.find("each split-K slice gets at least one reduction tile"), std::string::npos) << why;

  const auto fitted = fit_config(implicit_gemm(), kAlex5BackwardFilter, kSmallerBatch, gpu);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(config_problem(implicit_gemm(), fitted->config, kSmallerBatch, gpu), "");
  // The nearest split that works is one octave away, not a different tile: everything else stays as tuned.
  Config expected = kAlex5BackwardFilter;
  expected["SPLIT_K"] = 16;
  EXPECT_EQ(fitted->config, expected) << to_string(fitted->config);
  EXPECT_EQ(fitted->changes, "SPLIT_K 32 -> 16");
}

TEST(FitConfig, ParametersOfOtherKernelCodeAreNotRepaired) {
  const DeviceInfo gpu = test::described_hopper();
  Config renamed = kAlex5BackwardFilter;
  renamed.erase("SPLIT_K");
  renamed["SLICES"] = 32;
  EXPECT_FALSE(fit_config(implicit_gemm(), renamed, kSmallerBatch, gpu));
  Config missing = kAlex5BackwardFilter;
  missing.erase("UNROLL_K");
  EXPECT_FALSE(fit_config(implicit_gemm(), missing, kSmallerBatch, gpu));
}

TEST(FitConfig, TwoParametersChangeWhenOneIsNotEnough) {
  // The same GPU through OpenCL has no asynchronous copies: on the smaller batch both the copy and the split go.
  DeviceInfo opencl = test::described_hopper();
  opencl.backend = BackendKind::OpenCL;
  const auto fitted = fit_config(implicit_gemm(), kAlex5BackwardFilter, kSmallerBatch, opencl);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(config_problem(implicit_gemm(), fitted->config, kSmallerBatch, opencl), "");
  Config expected = kAlex5BackwardFilter;
  expected["ASYNC_COPY"] = 0;
  expected["SPLIT_K"] = 16;
  EXPECT_EQ(fitted->config, expected) << fitted->changes;
  EXPECT_EQ(fitted->changes, "ASYNC_COPY 1 -> 0, SPLIT_K 32 -> 16");
}

// Carrying to another shape: backward-filter's split is recomputed for the new reduction and tile count.
TEST(CarryConfig, BackwardFilterSplitFollowsTheNewShape) {
  const DeviceInfo gpu = test::described_hopper();  // 132 multiprocessors
  // A VGG-like layer: a reduction of 16 x 14 x 14 = 3136 keeps 512 elements a slice up to 4 slices.
  const ConvProblem vgg =
      parse_problem("N=16,C=512,H=14,W=14,K=512,R=3,S=3,pad=1").with_direction(Direction::BackwardFilter);
  const auto carried = carry_config(implicit_gemm(), kAlex5BackwardFilter, kAlex5, vgg, gpu);
  ASSERT_TRUE(carried);
  Config expected = kAlex5BackwardFilter;
  expected["SPLIT_K"] = 4;
  EXPECT_EQ(carried->config, expected) << carried->changes;
  EXPECT_EQ(carried->changes, "SPLIT_K 32 -> 4");

  // A quarter of the batch: 7200 elements, 8 slices of 900. Its 128x128 tiles would then make 288 work-groups, under
  // four a multiprocessor, where the default takes 128x64 tiles: the tuned tile is larger, so the default serves.
  const auto smaller = carry_config(implicit_gemm(), kAlex5BackwardFilter, kAlex5, kSmallerBatch, gpu);
  ASSERT_TRUE(smaller);
  EXPECT_EQ(smaller->config.at("SPLIT_K"), 8);
  EXPECT_EQ(smaller->config, implicit_gemm().default_config(Problem(kSmallerBatch), gpu)) << smaller->changes;
  EXPECT_EQ(smaller->config.at("TILE_N"), 64) << smaller->changes;

  // Twice the batch: the rule's 64 slices would leave the last one empty; fitting brings it to 32.
  const ConvProblem larger =
      parse_problem("N=256,C=256,H=13,W=13,K=256,R=3,S=3,pad=1").with_direction(Direction::BackwardFilter);
  const auto doubled = carry_config(implicit_gemm(), kAlex5BackwardFilter, kAlex5, larger, gpu);
  ASSERT_TRUE(doubled);
  EXPECT_EQ(doubled->config.at("SPLIT_K"), 32);
  EXPECT_EQ(implicit_gemm().carry_config(kAlex5BackwardFilter, kAlex5, larger, gpu).at("SPLIT_K"), 64);

  // An exact shape is left as tuned.
  const auto same = carry_config(implicit_gemm(), kAlex5BackwardFilter, kAlex5, kAlex5, gpu);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->config, kAlex5BackwardFilter);
  EXPECT_EQ(same->changes, "");
}

TEST(CarryConfig, OtherDirectionsKeepTheirSplit) {
  const DeviceInfo gpu = test::described_hopper();
  // alex4 forward's split of 3 evens out a last wave; it does not scale with the shape, so it is kept.
  Config forward = kAlex5BackwardFilter;
  forward["SPLIT_K"] = 3;
  const ConvProblem vgg = parse_problem("N=16,C=512,H=14,W=14,K=512,R=3,S=3,pad=1");
  const auto carried =
      carry_config(implicit_gemm(), forward, kAlex5.with_direction(Direction::Forward), vgg, gpu);
  ASSERT_TRUE(carried);
  EXPECT_EQ(carried->config, forward);
  // Families without a rule carry everything as tuned.
  const KernelFamily& direct = kernel_family("direct_tiled");
  const Config direct_default = direct.default_config(kAlex5, gpu);
  EXPECT_EQ(direct.carry_config(direct_default, kAlex5, kSmallerBatch, gpu), direct_default);
}

// An entry of the very shape asked runs as tuned: winograd's chunk, slices and tiles and implicit_gemm's split are
// carried (recomputed) only to other shapes. Exact winograd entries used to run with the default's chunk.
TEST(CarryConfig, AnExactShapeRunsAsTuned) {
  const DeviceInfo gpu = test::described_hopper();
  const KernelFamily& winograd = kernel_family("winograd");
  const Problem alex3 = Problem(parse_problem("N=128,C=192,H=13,W=13,K=384,R=3,S=3,pad=1"));
  Config tuned = winograd.default_config(alex3, gpu);
  tuned["BATCH_CHUNK"] = tuned.at("BATCH_CHUNK") == 32 ? 64 : 32;
  ASSERT_EQ(config_problem(winograd, tuned, alex3, gpu), "");
  auto exact = carry_config(winograd, tuned, alex3, alex3, gpu);
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->config, tuned);
  // An fp32 entry serves a tf32 plan of the same shape as tuned, too.
  exact = carry_config(winograd, tuned, alex3, alex3.with_math(MathMode::TF32), gpu);
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->config, tuned);
  // Another batch gets the default's chunk.
  const Problem half = Problem(parse_problem("N=64,C=192,H=13,W=13,K=384,R=3,S=3,pad=1"));
  const auto carried = carry_config(winograd, tuned, alex3, half, gpu);
  ASSERT_TRUE(carried);
  EXPECT_EQ(carried->config.at("BATCH_CHUNK"), winograd.default_config(half, gpu).at("BATCH_CHUNK"));
  const auto split = carry_config(implicit_gemm(), kAlex5BackwardFilter, kAlex5, kAlex5, gpu);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->config, kAlex5BackwardFilter);
}
