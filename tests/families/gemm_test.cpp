// The gemm family on every device that runs kernels (PoCL in CI; CUDA and NVIDIA OpenCL on the GPU machine): every
// transposition, padded leading dimensions, batches (shared
// and strided operands), accumulation and split-K, with sampled valid configurations plus the default, each checked
// in full against the float64 reference; and the constraints that keep split-K slices and vector loads valid.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "convtune/plan.h"
#include "src/tuner/search_space.h"
#include "tests/support/hopper_device.h"
#include "tests/support/plan_check.h"

using namespace convtune;

namespace {

std::vector<Device*> kernel_devices() {
  std::vector<Device*> out;
  for (Device* d : Registry::instance().all_devices())
    if (d->info().can_run_kernels) out.push_back(d);
  return out;
}

const KernelFamily& family() { return kernel_family("gemm"); }

// Odd sizes (edge tiles in every direction), the dense layers' shapes scaled down, and every layout feature.
const char* kCases[] = {
    "M=7,N=9,K=5",
    "M=33,N=17,K=65,trans_b=1",                   // a dense layer's forward: x W^T
    "M=40,N=24,K=9,trans_a=1",                    // its weight gradient: dy^T x
    "M=13,N=30,K=21,trans_a=1,trans_b=1",
    "M=12,N=20,K=300",                            // a long reduction: split-K's case
    "M=9,N=16,K=12,lda=15,ldb=20,ldc=18",         // padded rows
    "M=8,N=12,K=10,batch=3,trans_b=1",            // packed batch
    "M=6,N=8,K=20,batch=4,stride_a=0",            // one A shared by the batch
    "M=10,N=11,K=33,accumulate=1",                // C += A B
    "M=5,N=7,K=64,batch=2,accumulate=1,trans_a=1",
};

}  // namespace

TEST(Gemm, SampledConfigurationsMatchTheReference) {
  const auto devices = kernel_devices();
  if (devices.empty()) GTEST_SKIP() << "no device runs kernels here (PoCL missing)";
  for (Device* device : devices) {
    std::set<std::string> distinct;
    int checks = 0;
    uint64_t seed = 500;
    for (const char* text : kCases) {
      const Problem pb = parse_gemm(text);
      ASSERT_EQ(family().unsupported_reason(pb, {}, device->info()), "") << text;
      const SearchSpace space(family(), pb, device->info());
      ASSERT_GT(space.size(), 0u) << text;
      std::vector<Config> configs = space.sample(3, ++seed);
      configs.push_back(family().default_config(pb, device->info()));
      Config split = configs.back();
      split["SPLIT_K"] = 4;
      if (config_problem(family(), split, pb, device->info()).empty()) configs.push_back(split);
      for (const Config& c : configs) {
        const auto result = testing_support::check_plan(*device, pb, "gemm", c, seed);
        ++checks;
        distinct.insert(to_string(c));
        EXPECT_TRUE(result.passed) << text << " [" << to_string(c) << "]: " << result.message;
      }
    }
    std::cout << fmt::format("conformance: gemm on {}: {} checks, {} distinct configurations\n", device->info().id,
                             checks, distinct.size());
  }
}

TEST(Gemm, DefaultsSplitLongReductionsWithFewTiles) {
  // LeNet's fc1 at batch 100 on a Hopper GPU: 100 x 256 outputs are a handful of tiles, 3136 inputs a long
  // reduction: the default splits it so the work-groups fill the device.
  const DeviceInfo hopper = test::described_hopper();
  const Problem fc1 = parse_gemm("M=100,N=256,K=3136,trans_b=1");
  const Config c = family().default_config(fc1, hopper);
  EXPECT_EQ(config_problem(family(), c, fc1, hopper), "");
  EXPECT_GT(c.at("SPLIT_K"), 1) << to_string(c);
  const KernelRecipe recipe = family().recipe(fc1, {}, c, hopper);
  ASSERT_EQ(recipe.steps.size(), 2u);  // the GEMM and the reduction of its slices
  EXPECT_EQ(recipe.workspace_bytes, static_cast<size_t>(c.at("SPLIT_K") * 100 * 256) * sizeof(float));
  // A large square product needs no split.
  const Problem square = parse_gemm("M=4096,N=4096,K=4096");
  EXPECT_EQ(family().default_config(square, hopper).at("SPLIT_K"), 1);
}

TEST(Gemm, ConstraintsNameWhatDoesNotFit) {
  const DeviceInfo hopper = test::described_hopper();
  const Problem pb = parse_gemm("M=64,N=64,K=40");
  Config c = family().default_config(pb, hopper);
  c["SPLIT_K"] = 64;  // 64 slices of a 40-long reduction: most would be empty
  EXPECT_NE(config_problem(family(), c, pb, hopper).find("each split-K slice gets at least one reduction element"),
            std::string::npos);
  // An odd leading dimension allows no vector loads of A or B.
  const Problem odd = parse_gemm("M=8,N=9,K=7,lda=7,ldb=9");
  Config v = family().default_config(odd, hopper);
  EXPECT_EQ(v.at("VECTOR_WIDTH"), 1);
  v["VECTOR_WIDTH"] = 2;
  EXPECT_NE(config_problem(family(), v, odd, hopper).find("VECTOR_WIDTH above 1"), std::string::npos);
  // Convolutions are another family's.
  EXPECT_NE(family().unsupported_reason(parse_problem("N=1,C=2,H=4,K=2,R=3"), {}, hopper), "");
}
