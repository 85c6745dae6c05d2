// im2col_gemm beyond the shared conformance test: a batch split into several chunks with a short last one,
// GEMM edge tiles in every direction, the workspace limit's named constraint, and defaults valid on GPU limits.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "src/conformance/conformance.h"
#include "tests/support/plan_check.h"
#include "src/families/fused_epilogue.h"
#include "src/families/im2col_gemm/im2col_gemm_spec.h"
#include "tests/support/hopper_device.h"
#include "tests/support/opencl_device.h"

using namespace convtune;

namespace {

constexpr Direction kDirections[] = {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};

using test::opencl_device;

const KernelFamily& family() { return kernel_family("im2col_gemm"); }

// Checks `config` on `text` in all three directions against the float64 reference (poisoned output, canaries).
void expect_all_directions_match(Device& device, const std::string& text, const std::string& config_text) {
  const Config config = parse_config(config_text);
  uint64_t seed = 11;
  for (Direction direction : kDirections) {
    const ConvProblem pb = parse_problem(text).with_direction(direction);
    SCOPED_TRACE(fmt::format("{} [{}]", pb.to_string(), config_text));
    ASSERT_EQ(config_problem(family(), config, pb, device.info()), "");
    const auto result = testing_support::check_plan(device, pb, "im2col_gemm", config, ++seed);
    EXPECT_TRUE(result.passed) << result.message;
  }
}

int count_steps(const KernelRecipe& recipe, const std::string& kernel) {
  int count = 0;
  for (const LaunchStep& step : recipe.steps) count += step.kernel == kernel;
  return count;
}

// Small device limits the default must respect too: an NVIDIA GPU, a 256-thread GPU, a 64-thread one.
std::vector<DeviceInfo> device_limits() {
  std::vector<DeviceInfo> out;
  for (auto [threads, local_kib, global_gib] : {std::tuple{1024, 48, 80}, {256, 32, 2}, {64, 16, 1}}) {
    DeviceInfo info;
    info.id = fmt::format("limits-{}", threads);
    info.max_work_group_size = static_cast<size_t>(threads);
    info.local_memory_bytes = static_cast<uint64_t>(local_kib) * 1024;
    info.global_memory_bytes = static_cast<uint64_t>(global_gib) << 30;
    info.can_run_kernels = true;
    out.push_back(info);
  }
  return out;
}

}  // namespace

TEST(Im2colGemm, BatchOfSeveralChunksWithAShortLastOne) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  // N=5 in chunks of 2 (2 + 2 + 1), grouped, so image and group offsets combine in every chunk; backward-filter
  // sums its chunks into dw. P*Q = 42 loads pairs (VECTOR_WIDTH 2), the filters (C/groups*R*S = 18) too.
  const std::string problem = "N=5,C=4,H=7,W=6,K=6,R=3,pad=1,groups=2";
  const std::string config =
      "BATCH_CHUNK=2,LOCAL_PADDING=1,THREADS_M=8,THREADS_N=8,TILE_K=8,TILE_M=16,TILE_N=32,UNROLL_THREADS=64,"
      "VECTOR_WIDTH=2,REGISTER_VECTOR=1,PREFETCH=1";
  for (Direction direction : kDirections) {
    const ConvProblem pb = parse_problem(problem).with_direction(direction);
    const KernelRecipe recipe = family().recipe(pb, {}, parse_config(config), device->info());
    EXPECT_EQ(count_steps(recipe, "gemm"), 3) << to_string(direction);
    EXPECT_EQ(recipe.workspace_bytes, im2col_gemm::column_bytes(pb, 2));
  }
  expect_all_directions_match(*device, problem, config);
  // One image per chunk, and three per chunk (3 + 2) with scalar loads.
  expect_all_directions_match(*device, problem,
                              "BATCH_CHUNK=1,LOCAL_PADDING=0,THREADS_M=8,THREADS_N=8,TILE_K=4,TILE_M=32,TILE_N=16,"
                              "UNROLL_THREADS=128,VECTOR_WIDTH=1,REGISTER_VECTOR=1,PREFETCH=0");
  expect_all_directions_match(*device, "N=5,C=3,H=9,W=5,K=4,R=3,S=2,stride=2,pad=1",
                              "BATCH_CHUNK=4,LOCAL_PADDING=2,THREADS_M=8,THREADS_N=16,TILE_K=16,TILE_M=16,TILE_N=64,"
                              "UNROLL_THREADS=64,VECTOR_WIDTH=1,REGISTER_VECTOR=1,PREFETCH=1");
}

TEST(Im2colGemm, GemmEdgeTilesInEveryDirection) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  // K=9 filters, C*R*S = 45, P*Q = 36: forward is 9 x 36n x 45, backward-data 45 x 36n x 9, backward-filter
  // 9 x 45 x 36n, so M, N and K all end inside a 32 x 32 x 16 tile while P*Q still allows float4 loads.
  const std::string problem = "N=3,C=5,H=6,W=6,K=9,R=3,pad=1";
  for (Direction direction : kDirections) {
    const im2col_gemm::GemmShape shape = im2col_gemm::gemm_shape(parse_problem(problem).with_direction(direction), 2);
    EXPECT_TRUE(shape.m % 32 != 0 && shape.n % 32 != 0 && shape.k % 16 != 0) << to_string(direction);
  }
  expect_all_directions_match(*device, problem,
                              "BATCH_CHUNK=2,LOCAL_PADDING=4,THREADS_M=8,THREADS_N=8,TILE_K=16,TILE_M=32,TILE_N=32,"
                              "UNROLL_THREADS=64,VECTOR_WIDTH=4,REGISTER_VECTOR=4,PREFETCH=1");
  // Tiles far larger than the matrices, and odd sizes everywhere (no vector loads possible: 7, 27, 99); vector
  // register reads and prefetching over partial tiles.
  expect_all_directions_match(*device, "N=2,C=3,H=11,W=9,K=7,R=3,pad=1",
                              "BATCH_CHUNK=2,LOCAL_PADDING=0,THREADS_M=16,THREADS_N=16,TILE_K=32,TILE_M=128,"
                              "TILE_N=128,UNROLL_THREADS=256,VECTOR_WIDTH=1,REGISTER_VECTOR=4,PREFETCH=1");
}

TEST(Im2colGemm, WorkspaceOverTheLimitIsRejectedNamingTheConstraint) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  // One image's columns: 64*9 x 64*64 floats = 9 MiB; 64 images = 576 MiB, over the default 256 MiB limit of
  // an OpenCL device that is not a GPU.
  const ConvProblem pb = parse_problem("N=64,C=64,H=64,W=64,K=8,R=3,pad=1");
  ASSERT_GT(im2col_gemm::column_bytes(pb, 64), workspace_limit(device->info()));
  Config config = family().default_config(pb, device->info());
  EXPECT_EQ(config_problem(family(), config, pb, device->info()), "");
  EXPECT_LE(im2col_gemm::column_bytes(pb, config.at("BATCH_CHUNK")), workspace_limit(device->info()));
  config["BATCH_CHUNK"] = 64;
  try {
    Plan::create(*device, {pb, {}, "im2col_gemm", config});
    ADD_FAILURE() << "a 576 MiB column workspace was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find(im2col_gemm::kWorkspaceConstraint), std::string::npos) << error.what();
  }
  // When even one image's columns exceed the limit, the family declines the problem.
  const ConvProblem huge = parse_problem("N=1,C=512,H=128,W=128,K=8,R=3,pad=1");
  EXPECT_NE(family().unsupported_reason(huge, {}, device->info()).find("workspace limit"), std::string::npos);
  EXPECT_THROW(Plan::create(*device, {huge, {}, "im2col_gemm", std::nullopt}), Unsupported);
}

TEST(Im2colGemm, DefaultConfigurationIsValidOnSmallAndGpuDeviceLimits) {
  for (const DeviceInfo& device : device_limits()) {
    for (const auto& c : conformance::standard_cases()) {
      for (Direction direction : kDirections) {
        const ConvProblem pb = c.problem.with_direction(direction);
        const Config config = family().default_config(pb, device);
        EXPECT_EQ(config_problem(family(), config, pb, device), "") << device.id << " " << c.name;
      }
    }
  }
}

// Backward-data on a GPU takes 128-row tiles where they pad the C/groups*R*S rows at most 8% beyond 64-row tiles
// and still fill a wave (measured on the H200: docs/measurements/im2col_backward_data_sweep_h200.txt); other
// layers, directions and PoCL keep 64x64.
TEST(Im2colGemm, GpuBackwardDataDefaultTakesTallTilesWhereTheyPadLittle) {
  const DeviceInfo hopper = test::described_hopper();
  auto tile_m = [&](const char* text, Direction d, const DeviceInfo& device) {
    const ConvProblem pb = parse_problem(text).with_direction(d);
    const Config config = family().default_config(pb, device);
    EXPECT_EQ(config_problem(family(), config, pb, device), "") << text;
    return config.at("TILE_M");
  };
  const char* alex1 = "N=128,C=3,H=224,K=64,R=11,stride=4,pad=2";  // 363 rows: 384 either way
  const char* s2b = "N=32,C=256,H=28,K=512,R=3,stride=2,pad=1";   // 2304 rows
  const char* s2a = "N=32,C=64,H=56,K=128,R=3,stride=2,pad=1";    // 576 rows: 640 against 576
  const char* c3s2 = "N=32,C=3,H=224,K=64,R=7,stride=2,pad=3";    // 147 rows: 256 against 192
  EXPECT_EQ(tile_m(alex1, Direction::BackwardData, hopper), 128);
  EXPECT_EQ(tile_m(s2b, Direction::BackwardData, hopper), 128);
  EXPECT_EQ(tile_m(s2a, Direction::BackwardData, hopper), 64);
  EXPECT_EQ(tile_m(c3s2, Direction::BackwardData, hopper), 64);
  EXPECT_EQ(tile_m(alex1, Direction::Forward, hopper), 64);
  EXPECT_EQ(tile_m("N=2,C=3,H=24,K=8,R=11,stride=4,pad=2", Direction::BackwardData, hopper), 64);  // under a wave
  if (Device* pocl = opencl_device()) EXPECT_EQ(tile_m(alex1, Direction::BackwardData, pocl->info()), 64);
}

TEST(Im2colGemm, EpiloguesRunAsAPassAndOtherPrecisionsAreDeclined) {
  DeviceInfo device = device_limits().front();
  const ConvProblem pb = parse_problem("N=1,C=3,H=8,K=4,R=3");
  EXPECT_EQ(family().unsupported_reason(pb, {}, device), "");
  // Its kernels fuse no epilogue; the registered family runs one as a pass after them (fused_epilogue.h).
  EXPECT_NE(families::without_fused_epilogue(family()).unsupported_reason(pb, {.bias = true}, device), "");
  EXPECT_EQ(family().unsupported_reason(pb, {.bias = true}, device), "");
  ConvProblem half = pb;
  half.type = ElementType::F16;
  const std::string why = family().unsupported_reason(half, {}, device);
  EXPECT_NE(why.find("im2col_gemm computes fp32 tensors (in fp32 math), not fp16"), std::string::npos) << why;
}
