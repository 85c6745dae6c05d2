// direct_tiled beyond the shared conformance test: the fused bias/ReLU/2x2 max-pool epilogue against the host
// (reference convolution, then the epilogue on the host) for sampled configurations, seed 000's layer geometry,
// rejection of epilogues on the backward directions, and defaults valid on a GPU-like device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "src/backend/cpu/reference.h"
#include "src/conformance/conformance.h"
#include "src/tuner/search_space.h"
#include "tests/support/epilogue_check.h"
#include "tests/support/opencl_device.h"

using namespace convtune;
using namespace convtune::testing_support;

namespace {

using test::opencl_device;

// An NVIDIA-like device as the constraints see it: 1024 threads and 48 KiB of shared memory per block.
DeviceInfo gpu_like_device() {
  DeviceInfo info;
  info.backend = BackendKind::Cuda;
  info.is_gpu = true;
  info.compute_units = 132;
  info.max_work_group_size = 1024;
  info.local_memory_bytes = 48 * 1024;
  info.global_memory_bytes = uint64_t{80} << 30;
  info.can_run_kernels = true;
  return info;
}

struct EpilogueCase {
  std::string name;
  std::string problem;
};

}  // namespace

TEST(DirectTiled, FusedEpilogueMatchesHostForSampledConfigurations) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const KernelFamily& family = kernel_family("direct_tiled");
  const std::vector<EpilogueCase> cases = {
      {"seed000-mini", "N=1,C=8,H=20,W=20,K=16,R=5"},                  // 16x16 -> pooled 8x8
      {"odd-P-and-Q", "N=2,C=3,H=9,W=11,K=5,R=3,pad=1"},               // 9x11 -> pooled 4x5 (floor)
      {"stride2-groups2-odd-Q", "N=1,C=4,H=13,W=11,K=6,R=3,stride=2,groups=2"},  // 6x5 -> 3x2
      {"depthwise-dilation2", "N=2,C=4,H=12,W=12,K=4,R=3,pad=2,dilation=2,groups=4"},
  };
  const std::vector<Epilogue> epilogues = {{true, true, 2}, {false, true, 2}, {true, false, 1}, {false, false, 2}};
  uint64_t seed = 7;
  int checks = 0;
  for (const EpilogueCase& c : cases) {
    const ConvProblem pb = parse_problem(c.problem);
    const SearchSpace space(family, pb, device->info());
    std::vector<Config> configs = space.sample(3, ++seed);
    configs.push_back(family.default_config(pb, device->info()));
    const auto x = random_values(static_cast<size_t>(pb.x_elements()), seed * 3);
    const auto w = random_values(static_cast<size_t>(pb.w_elements()), seed * 3 + 1);
    const auto bias = random_values(static_cast<size_t>(pb.k), seed * 3 + 2);
    for (size_t i = 0; i < configs.size(); ++i) {
      const Epilogue e = epilogues[(i + seed) % epilogues.size()];
      SCOPED_TRACE(fmt::format("{} {} [{}]", c.name, to_string(e), to_string(configs[i])));
      const auto want = host_forward(pb, e, x, w, bias);
      const auto got =
          device_forward(*device, "direct_tiled", pb, e, configs[i], x, w, bias, static_cast<int64_t>(want.size()));
      const double error = relative_max_error(got, want);
      EXPECT_LE(error, 1e-5) << "largest error " << error << " (relative) of " << want.size() << " outputs";
      ++checks;
    }
  }
  EXPECT_EQ(checks, 16);
}

TEST(DirectTiled, SeedLayerPoolsTo112WithTheSeedsWorkGroupCount) {
  // Seed 000: 256 -> 256 channels, 5x5, 228x228 in, 224x224 conv out, pooled to 112x112; its best NVIDIA
  // configuration (1 x 2 x 8 pooled outputs per work-item, 16 x 2 x 2 work-items) launched 3136 work-groups.
  const ConvProblem pb = parse_problem("N=1,C=256,H=228,W=228,K=256,R=5");
  const KernelFamily& family = kernel_family("direct_tiled");
  const DeviceInfo gpu = gpu_like_device();
  const Epilogue e{true, true, 2};
  EXPECT_EQ(family.unsupported_reason(pb, e, gpu), "");
  const Config config = family.default_config(pb, gpu);
  EXPECT_EQ(config_problem(family, config, pb, gpu), "");
  for (const auto& [name, value] : Config{{"TILE_K", 1}, {"TILE_P", 2}, {"TILE_Q", 8}, {"THREADS_K", 16},
                                          {"THREADS_P", 2}, {"THREADS_Q", 2}, {"USE_LOCAL", 1}}) {
    EXPECT_EQ(config.at(name), value) << name;
  }
  const KernelRecipe recipe = family.recipe(pb, e, config, gpu);
  ASSERT_EQ(recipe.steps.size(), 1u);
  const LaunchGeometry& g = recipe.steps[0].geometry;
  size_t groups = 1;
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(g.global[d] % g.local[d], 0u);
    groups *= g.global[d] / g.local[d];
  }
  EXPECT_EQ(groups, 3136u);
  std::vector<int> operands;
  for (const ArgSource& arg : recipe.steps[0].args) {
    ASSERT_EQ(arg.kind, ArgSource::Kind::Operand);
    operands.push_back(arg.operand);
  }
  EXPECT_EQ(operands, (std::vector<int>{0, 1, 2, kBiasOperand}));  // x, w, y, bias
  EXPECT_EQ(recipe.source.defines.at("POOL"), "2");
  // The pre-pool tile 8 x 32 plus the 5x5 halo: seed 000's 12 x 36 local array per input channel.
  EXPECT_EQ(config_problem(family, config, pb, gpu_like_device()), "");  // its local-memory constraint included
}

TEST(DirectTiled, RejectsEpiloguesOnBackwardDirectionsWithAClearMessage) {
  const KernelFamily& family = kernel_family("direct_tiled");
  const ConvProblem pb = parse_problem("N=1,C=8,H=20,W=20,K=16,R=5");
  const DeviceInfo gpu = gpu_like_device();
  for (Direction d : {Direction::BackwardData, Direction::BackwardFilter}) {
    const std::string why = family.unsupported_reason(pb.with_direction(d), {true, true, 2}, gpu);
    EXPECT_NE(why.find("forward only"), std::string::npos) << why;
    EXPECT_EQ(family.unsupported_reason(pb.with_direction(d), {}, gpu), "");
  }
  EXPECT_NE(family.unsupported_reason(parse_problem("N=1,C=2,H=5,W=9,K=3,R=5"), {false, false, 2}, gpu).find("2x2"),
            std::string::npos);

  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  try {
    Plan::create(*device, {pb.with_direction(Direction::BackwardData), {false, true, 1}, "direct_tiled", {}});
    ADD_FAILURE() << "an epilogue on backward-data was accepted";
  } catch (const Unsupported& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("direct_tiled does not compute"), std::string::npos) << message;
    EXPECT_NE(message.find("relu"), std::string::npos) << message;
    EXPECT_NE(message.find("forward only"), std::string::npos) << message;
  }
}

TEST(DirectTiled, DefaultsAreValidOnEveryCaseForAGpuAndThisMachine) {
  const KernelFamily& family = kernel_family("direct_tiled");
  std::vector<DeviceInfo> devices = {gpu_like_device()};
  if (Device* d = opencl_device()) devices.push_back(d->info());
  std::vector<ConvProblem> problems;
  for (const auto& c : conformance::standard_cases()) problems.push_back(c.problem);
  problems.push_back(parse_problem("N=1,C=256,H=228,W=228,K=256,R=5"));
  problems.push_back(parse_problem("N=128,C=3,H=227,W=227,K=96,R=11,stride=4"));
  problems.push_back(parse_problem("N=1,C=4,H=64,W=64,K=4,R=31,dilation=2,pad=30"));  // no staged tile fits 48 KiB
  problems.push_back(parse_problem("N=1,C=32,H=3,W=1000,K=32,R=3,groups=32"));  // depthwise, one wide row
  for (const DeviceInfo& device : devices) {
    for (const ConvProblem& base : problems) {
      for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
        const ConvProblem pb = base.with_direction(d);
        if (!family.unsupported_reason(pb, {}, device).empty()) continue;
        const Config config = family.default_config(pb, device);
        EXPECT_EQ(config_problem(family, config, pb, device), "") << pb.to_string();
      }
    }
  }
}
