// Checked resources: requests beyond the available host memory are refused naming both figures, and the
// im2col_gemm and winograd families refuse batches that would need more launch steps than they declare.
#include <gtest/gtest.h>

#include <fstream>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/tensor.h"
#include "src/core/resources.h"
#include "tests/support/hopper_device.h"

using namespace convtune;

TEST(Resources, FormatBytes) {
  EXPECT_EQ(format_bytes(900), "900 bytes");
  EXPECT_EQ(format_bytes(4'700'000'000), "4.70 GB");
  EXPECT_EQ(format_bytes(512'000'000), "512 MB");
}

TEST(Resources, HostMemoryBeyondWhatIsAvailableIsRefusedNamingBoth) {
  const uint64_t available = available_host_memory();
  ASSERT_GT(available, 0u);
  try {
    require_host_memory(uint64_t{1} << 60, "a test buffer");
    FAIL() << "expected ResourceError";
  } catch (const ResourceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("a test buffer needs 1.15 EB of host memory; "), std::string::npos) << message;
    EXPECT_NE(message.find(" is available"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(require_host_memory(1 << 20, "a small buffer"));
}

// A tensor a validated layer may ask for (4 TB here) ends in a message, not std::bad_alloc or the OOM killer.
TEST(Resources, HugeHostTensorIsRefusedBeforeAllocating) {
  try {
    Tensor huge({1 << 20, 1 << 20});
    FAIL() << "expected ResourceError";
  } catch (const ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("a host tensor of 1048576x1048576 floats needs 4.40 TB"), std::string::npos)
        << e.what();
  }
}

// The reliability issue's im2col_gemm layers: two launch steps per chunk of at most 256 images made a recipe of
// millions of steps (OOM-killed at 6 GB for N = 420 million; a time-out for N = 293 million).
TEST(Resources, Im2colGemmRefusesBatchesBeyondItsLaunchStepBound) {
  const DeviceInfo gpu = test::described_hopper();
  const KernelFamily& im2col = kernel_family("im2col_gemm");
  for (const char* file : {"layer-im2col-recipe-oom.txt", "layer-im2col-recipe-timeout.txt"}) {
    std::ifstream in(std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/" + file);
    std::string text;
    std::getline(in, text);
    const ConvProblem problem = parse_problem(text);
    const std::string why = im2col.unsupported_reason(problem, {}, gpu);
    EXPECT_NE(why.find("needs more than 4096 chunks"), std::string::npos) << file << ": " << why;
  }
  // The largest batch it takes still plans a bounded recipe.
  const ConvProblem largest = parse_problem("N=1048576,C=1,H=2,K=1,R=1");
  ASSERT_EQ(im2col.unsupported_reason(largest, {}, gpu), "");
  const KernelRecipe recipe = im2col.recipe(largest, {}, im2col.default_config(largest, gpu), gpu);
  EXPECT_LE(recipe.steps.size(), 2u * 4096);
}

// winograd (from main, after the issue) builds three launch steps per chunk of the batch: the same bound holds.
TEST(Resources, WinogradRefusesBatchesBeyondItsLaunchStepBound) {
  const DeviceInfo gpu = test::described_hopper();
  const KernelFamily& winograd = kernel_family("winograd");
  const ConvProblem huge = parse_problem("N=200000000,C=1,H=3,K=1,R=3,pad=1");
  const std::string why = winograd.unsupported_reason(huge, {}, gpu);
  EXPECT_NE(why.find("needs more than 4096 chunks"), std::string::npos) << why;
  const ConvProblem largest = parse_problem("N=1048576,C=1,H=3,K=1,R=3,pad=1");
  ASSERT_EQ(winograd.unsupported_reason(largest, {}, gpu), "");
  const KernelRecipe recipe = winograd.recipe(largest, {}, winograd.default_config(largest, gpu), gpu);
  EXPECT_LE(recipe.steps.size(), 3u * 4096 + 2);
}
