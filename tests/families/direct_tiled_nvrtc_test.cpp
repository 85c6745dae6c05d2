// direct_tiled's kernels compile for CUDA (sm_90 cubins through NVRTC, no GPU needed): every direction, the forward
// epilogues, defaults and sampled configurations, with the options CudaDevice::build passes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "convtune/kernel_family.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "src/backend/kernel_sources.h"
#include "src/tuner/search_space.h"

using namespace convtune;

namespace {

DeviceInfo sm90() {
  DeviceInfo d;
  d.backend = BackendKind::Cuda;
  d.id = "cuda:0";
  d.architecture = "sm_90";
  d.is_gpu = true;
  d.compute_units = 132;
  d.global_memory_bytes = 80ull << 30;
  d.local_memory_bytes = 48 << 10;
  d.max_work_group_size = 1024;
  d.can_run_kernels = true;
  return d;
}

void expect_cubin(const ConvProblem& pb, const Epilogue& epilogue, const Config& config) {
  const KernelFamily& family = kernel_family("direct_tiled");
  const DeviceInfo device = sm90();
  const KernelRecipe recipe = family.recipe(pb, epilogue, config, device);
  const auto options = cuda::cuda_program_options(device.architecture, recipe.source.defines, recipe.source.options);
  try {
    const auto cubin = cuda::compile_cuda_to_cubin(load_kernel_source(recipe.source.file), options, recipe.source.file);
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(static_cast<char>(cubin[1]), 'E') << "not an ELF cubin";
  } catch (const std::exception& e) {
    ADD_FAILURE() << to_string(pb.direction) << " " << pb.to_string() << " " << to_string(epilogue) << " ["
                  << to_string(config) << "]: " << e.what();
  }
}

}  // namespace

TEST(DirectTiledNvrtc, EveryDirectionCompilesForSm90WithDefaultAndSampledConfigurations) {
  const KernelFamily& family = kernel_family("direct_tiled");
  const DeviceInfo device = sm90();
  const std::vector<ConvProblem> problems = {parse_problem("N=1,C=64,H=30,K=64,R=5"),
                                             parse_problem("N=2,C=3,H=17,W=15,K=4,R=7,stride=2,pad=2,dilation=1x2"),
                                             parse_problem("N=2,C=8,H=9,K=8,R=3,pad=1,groups=8")};
  int compiled = 0;
  uint64_t seed = 11;
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    for (const ConvProblem& base : problems) {
      const ConvProblem pb = base.with_direction(d);
      ASSERT_EQ(family.unsupported_reason(pb, {}, device), "") << pb.to_string();
      std::vector<Config> configs = SearchSpace(family, pb, device).sample(3, ++seed);
      configs.push_back(family.default_config(pb, device));
      for (const Config& config : configs) {
        expect_cubin(pb, {}, config);
        ++compiled;
      }
    }
  }
  EXPECT_EQ(compiled, 36);
}

TEST(DirectTiledNvrtc, ForwardWithTheFusedEpilogueCompilesForSm90) {
  const KernelFamily& family = kernel_family("direct_tiled");
  const DeviceInfo device = sm90();
  const ConvProblem seed000 = parse_problem("N=1,C=256,H=228,W=228,K=256,R=5");
  const ConvProblem odd = parse_problem("N=2,C=3,H=9,W=11,K=5,R=3,pad=1");
  expect_cubin(seed000, {true, true, 2}, family.default_config(seed000, device));
  uint64_t seed = 5;
  for (const Epilogue& e : {Epilogue{true, true, 2}, Epilogue{false, true, 2}, Epilogue{true, false, 1}}) {
    for (const Config& config : SearchSpace(family, odd, device).sample(2, ++seed)) expect_cubin(odd, e, config);
  }
}
