// winograd: the transforms for every tile and filter size, then every direction on PoCL against the float64
// reference: tile sizes 2, 4, 6 with 3x3, 5x5 and 7x7 filters, odd sizes, padding beyond the filter, groups, a
// chunked batch with a short last chunk, backward-filter slices; the measured error beside the declared bound.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "convtune/tuning.h"
#include "src/families/winograd/winograd_transforms.h"
#include "src/harness/implementation.h"
#include "tests/support/epilogue_check.h"
#include "tests/support/plan_check.h"
#include "tests/support/opencl_device.h"

using namespace convtune;
using namespace convtune::testing_support;

namespace {

constexpr Direction kDirections[] = {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};

using test::opencl_device;

const KernelFamily& family() { return kernel_family("winograd"); }

// A kernel device of ordinary limits, for support, constraint and plan checks that run nothing.
DeviceInfo described_device() {
  DeviceInfo device;
  device.backend = BackendKind::OpenCL;
  device.name = "a device for this test";
  device.can_run_kernels = true;
  device.max_work_group_size = 1024;
  device.local_memory_bytes = 48 * 1024;
  device.global_memory_bytes = uint64_t{8} << 30;
  return device;
}

// The family's default configuration with some parameters replaced.
Config config_with(const ConvProblem& pb, const DeviceInfo& device, const Config& changes) {
  Config config = family().default_config(pb, device);
  for (const auto& [name, value] : changes) config[name] = value;
  return config;
}

}  // namespace

TEST(WinogradTransforms, EveryBuiltSizeComputesCorrelation) {
  for (auto [m, r] : {std::pair{2, 3}, {4, 3}, {6, 3}, {2, 5}, {4, 5}, {2, 7}, {3, 2}, {5, 2}, {7, 2}, {5, 4}, {3, 4}, {3, 6}}) {
    const winograd::Transforms t = winograd::make_transforms(m, r, winograd::default_points(m, r));
    EXPECT_LT(winograd::check_transforms(t), 1e-12) << fmt::format("F({}, {})", m, r);
  }
}

TEST(WinogradTransforms, RepeatedPointsAreRefused) {
  EXPECT_THROW(winograd::make_transforms(2, 3, {0, 1, 1}), InvalidArgument);
  EXPECT_THROW(winograd::default_points(3, 3), InvalidArgument);  // alpha 5
}

TEST(Winograd, SupportNamesWhatIsMissing) {
  const DeviceInfo device = described_device();
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=8,H=9,W=9,K=8,R=3,stride=2,pad=1"), {}, device).find("stride 1"),
            std::string::npos);
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=8,H=9,W=9,K=8,R=3,dilation=2,pad=2"), {}, device).find("dilation 1"),
            std::string::npos);
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=8,H=9,W=9,K=8,R=1"), {}, device).find("square 3x3"),
            std::string::npos);
  EXPECT_EQ(family().unsupported_reason(parse_problem("N=1,C=8,H=9,W=9,K=8,R=5,pad=2"), {}, device), "");
}

// Alpha 8 (F(6x6,3x3), F(4x4,5x5), F(2x2,7x7)) is held to 4x the FP32 tolerance: fp32 and 3xtf32 refuse it (7x7
// filters, which have no smaller tile, entirely), fp32-fast and tf32 admit it; no plan in fp32 takes it.
TEST(Winograd, AlphaEightOnlyWhereTheMathModeAdmitsItsBound) {
  const DeviceInfo device = described_device();
  for (const char* math : {"fp32", "3xtf32", "fp32-fast", "tf32"}) {
    const bool admits = std::string(math) == "fp32-fast" || std::string(math) == "tf32";
    const ConvProblem seven = parse_problem(fmt::format("N=1,C=8,H=12,W=12,K=8,R=7,pad=3,math={}", math));
    const std::string why = family().unsupported_reason(seven, {}, device);
    EXPECT_EQ(why.empty(), admits) << math << ": " << why;
    if (!admits) EXPECT_NE(why.find("fp32-fast"), std::string::npos) << why;
    const ConvProblem three = parse_problem(fmt::format("N=1,C=8,H=12,W=12,K=8,R=3,pad=1,math={}", math));
    Config six = family().default_config(three, device);
    EXPECT_EQ(six.at("M_TILE"), 4) << math;  // the default stays at alpha 6 everywhere
    six["M_TILE"] = 6;
    EXPECT_EQ(config_problem(family(), six, three, device).empty(), admits) << math;
    EXPECT_EQ(family().error_factor(three, six), 4.0);
    // Nor does fitting a stored alpha-8 configuration to an fp32 problem keep it.
    const std::optional<FittedConfig> fitted = fit_config(family(), six, three, device);
    ASSERT_TRUE(fitted.has_value());
    EXPECT_EQ(fitted->config.at("M_TILE") == 6, admits) << math;
    PlanRequest request;
    request.problem = three;
    request.family = "winograd";
    request.config = six;
    if (admits) EXPECT_NO_THROW(PlanDescriptor::create(device, request)) << math;
    else EXPECT_THROW(PlanDescriptor::create(device, request), InvalidArgument) << math;
  }
}

// A tuning entry of an alpha-8 variant stored under fp32 (tuned before fp32-fast existed, as the shipped H200 entries
// were) is skipped by fp32 plans, which say why, rather than refitted to another tile; it serves fp32-fast plans.
TEST(Winograd, Fp32EntriesOfAlphaEightServeOnlyFp32Fast) {
  const DeviceInfo device = described_device();
  const ConvProblem three = parse_problem("N=1,C=16,H=12,W=12,K=16,R=3,pad=1");
  Config six = family().default_config(three, device);
  six["M_TILE"] = 6;
  TuningDatabase db(std::filesystem::temp_directory_path() / "convtune-winograd-test-never-written.json");
  db.insert(make_tuning_entry(device, "winograd", family().kernel_version(), three, six, 0.01));
  PlanRequest request;
  request.problem = three;
  request.family = "winograd";
  request.tuning = &db;
  const PlanDescriptor in_fp32 = PlanDescriptor::create(device, request);
  EXPECT_EQ(in_fp32.tier(), ConfigTier::BuiltInDefault) << in_fp32.explanation();
  EXPECT_NE(in_fp32.explanation().find("M_TILE=6"), std::string::npos) << in_fp32.explanation();
  EXPECT_NE(in_fp32.explanation().find("held to 4x the FP32 tolerance, more than fp32 math admits (1x)"),
            std::string::npos) << in_fp32.explanation();
  ConvProblem fast = three;
  fast.math = MathMode::FP32Fast;
  request.problem = fast;
  const PlanDescriptor in_fast = PlanDescriptor::create(device, request);
  EXPECT_EQ(in_fast.tier(), ConfigTier::Exact) << in_fast.explanation();
  EXPECT_EQ(in_fast.config().at("M_TILE"), 6);
}

// Every direction, each tile size the filter allows, against the float64 reference in full; the error each
// variant shows is printed beside the tolerance it is held to (the declared factor times the direct bound).
TEST(Winograd, EveryDirectionAndTileSizeMatchesTheReference) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  struct Case {
    std::string problem;
    std::vector<int64_t> tiles;
  };
  const std::vector<Case> cases = {
      {"N=2,C=16,H=11,W=9,K=12,R=3,pad=1", {2, 4, 6}},           // odd sizes: partial tiles on both sides
      {"N=3,C=8,H=8,W=8,K=8,R=3,pad=0", {2, 4, 6}},              // no padding, outputs 6x6
      {"N=1,C=6,H=7,W=10,K=4,R=3,pad=2", {4}},                   // padding beyond the filter's half
      {"N=2,C=8,H=9,W=9,K=8,R=5,pad=2", {2, 4}},                 // 5x5
      {"N=1,C=4,H=12,W=12,K=4,R=7,pad=3", {2}},                  // 7x7
      {"N=2,C=8,H=6,W=6,K=12,R=3,pad=1,groups=4", {2, 4}},       // groups
      {"N=1,C=256,H=12,W=12,K=8,R=3,pad=1", {6}},                // a long reduction: the largest tile's error
      {"N=1,C=128,H=8,W=8,K=8,R=5,pad=2", {4}},
  };
  uint64_t seed = 21;
  for (const Case& c : cases) {
    for (Direction direction : kDirections) {
      for (int64_t m : c.tiles) {
        // Alpha 8 is fp32-fast's alone: checked there against its declared bound, and refused in fp32.
        ConvProblem pb = parse_problem(c.problem).with_direction(direction);
        const bool alpha8 = m + pb.r - 1 == 8;
        if (alpha8) pb.math = MathMode::FP32Fast;
        // Two slices for backward-filter: small problems have few tiles.
        const Config config = config_with(pb, device->info(), {{"M_TILE", m}, {"SPLIT", direction == Direction::BackwardFilter ? 2 : 1}, {"VECTOR_WIDTH", 1}});
        SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), to_string(config)));
        ASSERT_EQ(config_problem(family(), config, pb, device->info()), "");
        if (alpha8) {
          ConvProblem in_fp32 = pb;
          in_fp32.math = MathMode::FP32;
          EXPECT_NE(config_problem(family(), config, in_fp32, device->info()).find("fp32-fast"), std::string::npos);
        }
        const harness::Check check = testing_support::check_plan(*device, pb, "winograd", config, ++seed);
        EXPECT_TRUE(check.passed) << check.message;
        std::cout << fmt::format("winograd M_TILE={} alpha={} {:<10} {:<36} rel L2 {:.2e} = {:.2f}x the FP32 tolerance "
                                 "(held to {}x)\n",
                                 m, m + pb.r - 1, to_string(direction), parse_problem(c.problem).to_string().substr(0, 36),
                                 check.rel_l2_error, check.rel_l2_error / harness::tolerance(pb),
                                 family().error_factor(pb, config));
      }
    }
  }
}

TEST(Winograd, ChunkedBatchAndBackwardFilterSlices) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  // N=5 in chunks of 2 (2 + 2 + 1); backward-filter sums the chunks into 4 slices of M (24 tiles per chunk, the
  // last chunk's second image all zero tiles). Vector loads of width 2: the channels (8, 6) and 6 tiles per slice.
  const std::string problem = "N=5,C=8,H=5,W=8,K=6,R=3,pad=1";
  uint64_t seed = 51;
  for (Direction direction : kDirections) {
    const ConvProblem pb = parse_problem(problem).with_direction(direction);
    Config changes = {{"M_TILE", 2}, {"BATCH_CHUNK", 2}, {"VECTOR_WIDTH", 2}};
    if (direction == Direction::BackwardFilter) changes["SPLIT"] = 4;
    const Config config = config_with(pb, device->info(), changes);
    SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), to_string(config)));
    ASSERT_EQ(config_problem(family(), config, pb, device->info()), "");
    const KernelRecipe recipe = family().recipe(pb, {}, config, device->info());
    int gemms = 0;
    for (const LaunchStep& step : recipe.steps) gemms += step.kernel == "gemm";
    EXPECT_EQ(gemms, 3);
    const harness::Check check = testing_support::check_plan(*device, pb, "winograd", config, ++seed);
    EXPECT_TRUE(check.passed) << check.message;
  }
  // SPLIT is backward-filter's alone.
  const ConvProblem forward = parse_problem(problem);
  EXPECT_NE(config_problem(family(), config_with(forward, device->info(), {{"SPLIT", 2}}), forward, device->info()), "");
}

// The forward epilogue (bias per output channel, then ReLU) fused into the output transform, for F(2x2) and F(4x4)
// over a 3x3 and a 5x5 filter with groups and a partial last tile; pooling and other directions are refused.
TEST(Winograd, ForwardBiasAndReluAreFusedIntoTheOutputTransform) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const Epilogue bias_relu{true, true, 1};
  uint64_t seed = 71;
  for (const char* text : {"N=2,C=6,H=9,W=7,K=8,R=3,pad=1,groups=2", "N=2,C=4,H=10,W=9,K=6,R=5,pad=2"}) {
    for (int64_t m_tile : {2, 4}) {
      ConvProblem pb = parse_problem(text);
      if (m_tile + pb.r - 1 == 8) pb.math = MathMode::FP32Fast;  // F(4x4, 5x5): fp32-fast's alone
      const Config config = config_with(pb, device->info(), {{"M_TILE", m_tile}});
      SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), to_string(config)));
      ASSERT_EQ(family().unsupported_reason(pb, bias_relu, device->info()), "");
      const auto x = random_values(static_cast<size_t>(pb.x_elements()), ++seed);
      const auto w = random_values(static_cast<size_t>(pb.w_elements()), ++seed);
      const auto bias = random_values(static_cast<size_t>(pb.k), ++seed);
      for (const Epilogue& epilogue : {bias_relu, Epilogue{true, false, 1}}) {
        const auto want = host_forward(pb, epilogue, x, w, bias);
        const auto got =
            device_forward(*device, "winograd", pb, epilogue, config, x, w, bias, static_cast<int64_t>(want.size()));
        EXPECT_LE(relative_max_error(got, want), 1e-5) << to_string(epilogue);
      }
    }
  }
  const ConvProblem pb = parse_problem("N=1,C=4,H=8,W=8,K=4,R=3,pad=1");
  EXPECT_NE(family().unsupported_reason(pb, {true, true, 2}, device->info()).find("max-pool"), std::string::npos);
  EXPECT_NE(family().unsupported_reason(pb.with_direction(Direction::BackwardData), bias_relu, device->info())
                .find("forward direction only"),
            std::string::npos);
}

TEST(Winograd, DefaultsAreValidOnSmallAndLargeDevices) {
  for (auto [threads, local_kib, global_gib] : {std::tuple{1024, 48, 80}, {256, 32, 2}, {64, 16, 1}}) {
    DeviceInfo info;
    info.max_work_group_size = static_cast<size_t>(threads);
    info.local_memory_bytes = static_cast<uint64_t>(local_kib) * 1024;
    info.global_memory_bytes = static_cast<uint64_t>(global_gib) << 30;
    info.can_run_kernels = true;
    for (const char* text : {"N=64,C=64,H=224,W=224,K=64,R=3,pad=1", "N=32,C=512,H=7,W=7,K=512,R=3,pad=1",
                             "N=8,C=3,H=32,W=32,K=16,R=5,pad=2", "N=1,C=256,H=14,W=14,K=256,R=3,pad=1"}) {
      for (Direction direction : kDirections) {
        const ConvProblem pb = parse_problem(text).with_direction(direction);
        if (!family().unsupported_reason(pb, {}, info).empty()) continue;
        const Config config = family().default_config(pb, info);
        EXPECT_EQ(config_problem(family(), config, pb, info), "") << pb.to_string() << " threads " << threads;
      }
    }
  }
}

// On a GPU, backward-data over at most 40 channels a group takes 32-row GEMM tiles (1.02-1.47x faster on six such
// layers of the H200: docs/measurements/winograd_narrow_backward_data_sweep_h200.txt), and 5x5 forward and backward-data are claimed from 32 channels; elsewhere,
// and on CPU devices (PoCL), the 64-row tiles and the claim from 48 channels stay.
TEST(Winograd, NarrowBackwardDataTilesAndFiveByFiveClaimOnGpus) {
  DeviceInfo gpu = described_device();
  gpu.is_gpu = true, gpu.compute_units = 132;
  const DeviceInfo cpu = described_device();
  const ConvProblem conv2 = parse_problem("N=10000,C=32,H=14,W=14,K=64,R=5,S=5,pad=2");  // Fashion-MNIST's conv2
  auto tile_m = [](const ConvProblem& pb, const DeviceInfo& device) {
    const Config config = family().default_config(pb, device);
    EXPECT_EQ(config_problem(family(), config, pb, device), "") << pb.to_string();
    return config.at("TILE_M");
  };
  EXPECT_EQ(tile_m(conv2.with_direction(Direction::BackwardData), gpu), 32);
  // CPUs keep work-groups of at most 64 work-items (32x32 tiles) in every direction.
  EXPECT_EQ(tile_m(conv2.with_direction(Direction::BackwardData), cpu), tile_m(conv2, cpu));
  EXPECT_EQ(tile_m(conv2.with_direction(Direction::Forward), gpu), 64);
  EXPECT_EQ(tile_m(parse_problem("N=32,C=64,H=28,K=64,R=3,pad=1,dir=bwd-data"), gpu), 64);
  for (Direction d : {Direction::Forward, Direction::BackwardData}) {
    EXPECT_NE(family().untuned_claim(conv2.with_direction(d), gpu), "");
    EXPECT_EQ(family().untuned_claim(conv2.with_direction(d), cpu), "");
  }
  EXPECT_EQ(family().untuned_claim(conv2.with_direction(Direction::BackwardFilter), gpu), "");
  ConvProblem tf32 = conv2;
  tf32.math = MathMode::TF32;
  EXPECT_EQ(kernel_family("winograd_tc").untuned_claim(tf32, gpu), "");
}
