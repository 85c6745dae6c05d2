// Every kernel family's CUDA variant compiles to an sm_90 cubin through NVRTC (no GPU needed): each direction,
// on several problems, with the default and sampled configurations, as CudaDevice::build would compile them.
#include <gtest/gtest.h>

#include "convtune/kernel_family.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "tests/support/hopper_device.h"
#include "src/backend/kernel_sources.h"
#include "src/tuner/search_space.h"

using namespace convtune;

namespace {

DeviceInfo hopper() { return test::described_hopper(); }

void expect_compiles(const KernelFamily& family, const ConvProblem& pb, const Epilogue& epilogue, const Config& config,
                     const DeviceInfo& device) {
  const KernelRecipe recipe = family.recipe(pb, epilogue, config, device);
  const std::string text = load_kernel_source(recipe.source.file);
  const auto options = cuda::cuda_program_options(device.architecture, recipe.source.defines, recipe.source.options);
  try {
    const auto cubin = cuda::compile_cuda_to_cubin(text, options, recipe.source.file);
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(static_cast<char>(cubin[1]), 'E');  // ELF magic: a cubin, not PTX
  } catch (const std::exception& e) {
    ADD_FAILURE() << family.name() << " " << to_string(pb.direction) << " " << pb.to_string() << " ["
                  << to_string(config) << "]: " << e.what();
  }
}

}  // namespace

TEST(FamilyNvrtc, EveryFamilyDirectionAndSampledConfigCompilesForSm90) {
  const DeviceInfo device = hopper();
  const std::vector<ConvProblem> problems = {parse_problem("N=128,C=64,H=27,K=192,R=5,pad=2"),
                                             parse_problem("N=2,C=3,H=17,W=15,K=4,R=7,stride=2,pad=2"),
                                             parse_problem("N=2,C=8,H=9,K=8,R=3,pad=1,groups=8")};
  int compiled = 0;
  for (const auto& family : kernel_families()) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      for (const ConvProblem& base : problems) {
        const ConvProblem pb = base.with_direction(d);
        if (!family->unsupported_reason(pb, {}, device).empty()) continue;
        std::vector<Config> configs = SearchSpace(*family, pb, device).sample(2, 99);
        configs.push_back(family->default_config(pb, device));
        for (const Config& c : configs) {
          expect_compiles(*family, pb, {}, c, device);
          ++compiled;
        }
      }
    }
    // Forward with the full epilogue, where the family fuses one.
    const ConvProblem seed000 = parse_problem("N=1,C=16,H=20,K=16,R=5");
    const Epilogue fused{true, true, 2};
    if (family->unsupported_reason(seed000, fused, device).empty()) {
      expect_compiles(*family, seed000, fused, family->default_config(seed000, device), device);
      ++compiled;
    }
  }
  std::cout << "nvrtc: compiled " << compiled << " family programs for sm_90\n";
  EXPECT_GT(compiled, 0);
}
