// fft: the twiddle tables, support, the size the plan takes untuned, then every direction on PoCL against the float64
// reference: the large tile sizes on a 5x5 layer, rectangular and 7x7 filters, groups, a chunked batch with a short
// last chunk, backward-filter slices, the fused bias and ReLU; the measured error beside the FP32 tolerance the family
// is held to. The conformance harness (family_conformance_test) covers the standard cases with sampled
// configurations.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "convtune/plan.h"
#include "src/families/fft/fft_plan.h"
#include "src/harness/implementation.h"
#include "src/tuning_db/tuning_database.h"
#include "tests/support/epilogue_check.h"
#include "tests/support/opencl_device.h"
#include "tests/support/plan_check.h"

using namespace convtune;
using namespace convtune::testing_support;

namespace {

constexpr Direction kDirections[] = {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};

const KernelFamily& family() { return kernel_family("fft"); }

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

Config config_with(const ConvProblem& pb, const DeviceInfo& device, const Config& changes) {
  Config config = family().default_config(pb, device);
  for (const auto& [name, value] : changes) config[name] = value;
  return config;
}

}  // namespace

TEST(FftTwiddles, ExactAtQuarterTurnsAndNoSpaces) {
  EXPECT_EQ(fft::twiddles(4, false), "1.000000000e+00f,0.000000000e+00f,-1.000000000e+00f,0.000000000e+00f");
  EXPECT_EQ(fft::twiddles(4, true), "0.000000000e+00f,1.000000000e+00f,0.000000000e+00f,-1.000000000e+00f");
  EXPECT_EQ(fft::twiddles(12, true).find(' '), std::string::npos);
}

TEST(Fft, SupportNamesWhatIsMissing) {
  const DeviceInfo device = described_device();
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=8,H=9,W=9,K=8,R=3,stride=2,pad=1"), {}, device).find("stride 1"),
            std::string::npos);
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=8,H=9,W=9,K=8,R=3,dilation=2,pad=2"), {}, device).find("dilation 1"),
            std::string::npos);
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=8,H=40,W=40,K=8,R=32"), {}, device).find("at most 31"),
            std::string::npos);
  // Any filter shape up to 31 taps a side: rectangular, 1x1 (a poor fit, but computed), 7x7.
  for (const char* ok : {"N=1,C=8,H=9,W=9,K=8,R=5,pad=2", "N=1,C=8,H=17,W=17,K=8,R=1,S=7,pad_w=3",
                         "N=1,C=8,H=9,W=9,K=8,R=1", "N=1,C=8,H=12,W=12,K=8,R=7,pad=3"})
    EXPECT_EQ(family().unsupported_reason(parse_problem(ok), {}, device), "") << ok;
  EXPECT_NE(family().untuned_poor_fit(parse_problem("N=1,C=8,H=9,W=9,K=8,R=1"), device).find("1x1"), std::string::npos);
  // 3x3 is winograd's: fft computes it when named or tuned, but an untuned plan (or the cost model) passes it over.
  EXPECT_NE(family().untuned_poor_fit(parse_problem("N=8,C=64,H=14,W=14,K=64,R=3,pad=1"), device).find("25 taps"),
            std::string::npos);
  EXPECT_EQ(family().untuned_poor_fit(parse_problem("N=8,C=64,H=14,W=14,K=64,R=5,pad=2"), device), "");
}

// The untuned size: the fewest estimated operations among the sizes that cover the output at most once; never a
// size whose tile is mostly padding.
TEST(Fft, DefaultSizeCoversTheOutput) {
  const DeviceInfo device = described_device();
  const ConvProblem alex3 = parse_problem("N=128,C=384,H=13,W=13,K=384,R=3,pad=1");
  EXPECT_LE(family().default_config(alex3, device).at("FFT_SIZE"), 16);
  const ConvProblem small = parse_problem("N=8,C=64,H=7,W=7,K=64,R=3,pad=1");
  EXPECT_EQ(family().default_config(small, device).at("FFT_SIZE"), 10);  // 8 outputs a side cover 7
  Config too_large = family().default_config(small, device);
  too_large["FFT_SIZE"] = 16;
  EXPECT_NE(config_problem(family(), too_large, small, device).find("one tile covers the output"), std::string::npos);
}

// Every direction and tile size against the float64 reference in full, each error printed beside the FP32
// tolerance it is held to (factor 1: the DFTs' rounding grows with log T, not with the filter's size).
TEST(Fft, EveryDirectionAndSizeMatchesTheReference) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  struct Case {
    std::string problem;
    std::vector<int64_t> sizes;
  };
  // The conformance harness samples configurations over its own cases (odd sizes, padding, long reductions); these
  // pin the sizes and filter shapes its cases do not reach. Each check compiles a program (about 3 s on PoCL).
  const std::vector<Case> cases = {
      {"N=2,C=8,H=27,W=27,K=8,R=5,pad=2", {20, 32}},        // 5x5 (alex2's image), the largest size
      {"N=1,C=4,H=12,W=12,K=4,R=7,pad=3", {14}},            // 7x7
      {"N=2,C=8,H=15,W=12,K=8,R=1,S=7,pad_w=3", {10}},      // 1x7, inception-style
      {"N=2,C=8,H=6,W=6,K=12,R=3,pad=1,groups=4", {8}},     // groups
  };
  uint64_t seed = 31;
  for (const Case& c : cases) {
    for (Direction direction : kDirections) {
      for (int64_t size : c.sizes) {
        const ConvProblem pb = parse_problem(c.problem).with_direction(direction);
        // Two images a chunk where there are two; two slices for backward-filter where there are two tiles.
        const int64_t chunk = pb.n >= 2 ? 2 : 1;
        const bool slices = direction == Direction::BackwardFilter && fft::layout(pb, size, chunk, 1).tiles >= 2;
        const Config config = config_with(pb, device->info(),
                                          {{"FFT_SIZE", size}, {"SPLIT", slices ? 2 : 1}, {"VECTOR_WIDTH", 1},
                                           {"BATCH_CHUNK", chunk}});
        SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), to_string(config)));
        ASSERT_EQ(config_problem(family(), config, pb, device->info()), "");
        const harness::Check check = testing_support::check_plan(*device, pb, "fft", config, ++seed);
        EXPECT_TRUE(check.passed) << check.message;
        std::cout << fmt::format("fft FFT_SIZE={:<2} {:<10} {:<40} rel L2 {:.2e} = {:.3f}x the FP32 tolerance\n", size,
                                 to_string(direction), parse_problem(c.problem).to_string().substr(0, 40),
                                 check.rel_l2_error, check.rel_l2_error / harness::tolerance(pb));
      }
    }
  }
}

TEST(Fft, ChunkedBatchAndBackwardFilterSlices) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  // N=5 in chunks of 2 (2 + 2 + 1), 1 x 2 tiles an image; backward-filter sums the chunks into 2 slices of M (2
  // tiles each); vector loads of width 2.
  const std::string problem = "N=5,C=8,H=5,W=8,K=6,R=3,pad=1";
  uint64_t seed = 71;
  for (Direction direction : kDirections) {
    const ConvProblem pb = parse_problem(problem).with_direction(direction);
    Config changes = {{"FFT_SIZE", 8}, {"BATCH_CHUNK", 2}, {"VECTOR_WIDTH", 2}, {"TRANSFORM_TILES", 4}};
    changes["SPLIT"] = direction == Direction::BackwardFilter ? 2 : 1;
    const Config config = config_with(pb, device->info(), changes);
    SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), to_string(config)));
    ASSERT_EQ(config_problem(family(), config, pb, device->info()), "");
    const KernelRecipe recipe = family().recipe(pb, {}, config, device->info());
    int gemms = 0;
    for (const LaunchStep& step : recipe.steps) gemms += step.kernel == "gemm";
    EXPECT_EQ(gemms, 3);
    const harness::Check check = testing_support::check_plan(*device, pb, "fft", config, ++seed);
    EXPECT_TRUE(check.passed) << check.message;
  }
}

// Bias and ReLU fused into the forward output transform, over a 3x3 and a 5x5 filter with groups and a partial last
// tile; pooling and other directions are refused.
TEST(Fft, ForwardBiasAndReluAreFusedIntoTheOutputTransform) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const Epilogue bias_relu{true, true, 1};
  uint64_t seed = 91;
  for (const char* text : {"N=2,C=6,H=9,W=7,K=8,R=3,pad=1,groups=2", "N=2,C=4,H=10,W=9,K=6,R=5,pad=2"}) {
    const ConvProblem pb = parse_problem(text);
    const Config config = family().default_config(pb, device->info());
    SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), to_string(config)));
    ASSERT_EQ(family().unsupported_reason(pb, bias_relu, device->info()), "");
    const auto x = random_values(static_cast<size_t>(pb.x_elements()), ++seed);
    const auto w = random_values(static_cast<size_t>(pb.w_elements()), ++seed);
    const auto bias = random_values(static_cast<size_t>(pb.k), ++seed);
    for (const Epilogue& epilogue : {bias_relu, Epilogue{true, false, 1}}) {
      const auto want = host_forward(pb, epilogue, x, w, bias);
      const auto got = device_forward(*device, "fft", pb, epilogue, config, x, w, bias, static_cast<int64_t>(want.size()));
      EXPECT_LE(relative_max_error(got, want), 1e-5) << to_string(epilogue);
    }
  }
  const ConvProblem pb = parse_problem("N=1,C=4,H=8,W=8,K=4,R=3,pad=1");
  EXPECT_NE(family().unsupported_reason(pb, {true, true, 2}, device->info()).find("max-pool"), std::string::npos);
  EXPECT_NE(family().unsupported_reason(pb.with_direction(Direction::BackwardData), bias_relu, device->info())
                .find("forward direction only"),
            std::string::npos);
}

// Another shape's fft entry is not carried to a 3x3 layer (fewer than 25 taps: the untuned rules' poor fit, as
// fft_wgmma's 13x13 entries were to a 7x7 layer at 1.6-2.1x cuDNN on the H200): the plan takes the neighbour entry
// of a family that suits it, and names why fft's was skipped. Its own shape's entry still chooses fft, and a plan
// that names fft still takes the neighbour's parameters.
TEST(Fft, ANeighboursEntryIsNotCarriedToALayerFftSuitsPoorly) {
  const DeviceInfo device = described_device();
  const ConvProblem tuned = parse_problem("N=32,C=256,H=13,W=13,K=256,R=3,pad=1");
  const ConvProblem asked = parse_problem("N=32,C=256,H=7,W=7,K=256,R=3,pad=1");
  ASSERT_NE(fft::poor_fit(asked), "");
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / fmt::format("convtune_fft_neighbour_{}.json", static_cast<long>(getpid()));
  TuningDatabase db(file);
  db.insert(make_tuning_entry(device, "fft", family().kernel_version(), tuned,
                              family().default_config(tuned, device), 0.1));
  const KernelFamily& winograd = kernel_family("winograd");
  db.insert(make_tuning_entry(device, "winograd", winograd.kernel_version(), tuned,
                              winograd.default_config(tuned, device), 0.2));

  PlanRequest request;
  request.tuning = &db;
  request.problem = tuned;
  const PlanDescriptor exact = PlanDescriptor::create(device, request);
  EXPECT_EQ(exact.family().name(), "fft") << exact.explanation();
  EXPECT_EQ(exact.tier(), ConfigTier::Exact);

  request.problem = asked;
  const PlanDescriptor carried = PlanDescriptor::create(device, request);
  EXPECT_EQ(carried.family().name(), "winograd") << carried.explanation();
  EXPECT_EQ(carried.tier(), ConfigTier::Nearest);
  EXPECT_NE(carried.explanation().find("poor fit here untuned (a 3x3 filter: fewer than 25 taps"), std::string::npos)
      << carried.explanation();

  request.family = "fft";
  const PlanDescriptor named = PlanDescriptor::create(device, request);
  EXPECT_EQ(named.family().name(), "fft");
  EXPECT_EQ(named.tier(), ConfigTier::Nearest) << named.explanation();
  std::filesystem::remove(file);
}
