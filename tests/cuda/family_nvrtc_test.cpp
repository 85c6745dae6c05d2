// Every kernel family's CUDA variant compiles to an sm_90 cubin through NVRTC (no GPU needed): each direction,
// on several problems, with the default and a sampled configuration, as CudaDevice::build would compile them; the
// depthwise family also for sm_80, on the layers its GPU check times, its defaults without register spills.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>

#include "convtune/extension/kernel_family.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "tests/support/hopper_device.h"
#include "src/backend/kernel_sources.h"
#include "src/tuner/search_space.h"

using namespace convtune;

namespace {

DeviceInfo hopper() { return test::described_hopper(); }

// Compiles one recipe; returns the bytes ptxas reports spilled (with `report_spills`, else 0), -1 on failure.
int expect_compiles(const KernelFamily& family, const ConvProblem& pb, const Epilogue& epilogue, const Config& config,
                    const DeviceInfo& device, bool report_spills = false) {
  const KernelRecipe recipe = family.recipe(pb, epilogue, config, device);
  const std::string text = load_kernel_source(recipe.source.file);
  std::vector<std::string> extra = recipe.source.options;
  if (report_spills) extra.push_back("--ptxas-options=-v");
  const auto options = cuda::cuda_program_options(device.architecture, recipe.source.defines, extra);
  try {
    std::string log;
    const auto cubin = cuda::compile_cuda_to_cubin(text, options, recipe.source.file, &log);
    EXPECT_GE(cubin.size(), 4u);
    if (cubin.size() >= 4) EXPECT_EQ(static_cast<char>(cubin[1]), 'E');  // ELF magic: a cubin, not PTX
    if (report_spills) EXPECT_NE(log.find("registers"), std::string::npos) << "no ptxas resource report:\n" << log;
    int spilled = 0;
    static const std::regex spill(R"((\d+) bytes spill (stores|loads))");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), spill); it != std::sregex_iterator(); ++it)
      spilled += std::stoi((*it)[1]);
    return spilled;
  } catch (const std::exception& e) {
    ADD_FAILURE() << family.name() << " " << to_string(pb.direction) << " " << pb.to_string() << " ["
                  << to_string(config) << "]: " << e.what();
    return -1;
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
        std::vector<Config> configs = SearchSpace(*family, pb, device).sample(1, 99);  // CI's time: one beside the default
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

// depthwise for Ampere and Hopper on MobileNet-style layers (3x3 stride 1 and 2,
// a 5x5, a multiplier of 2, a dilated one): every direction, the default (without spills, with the fused bias and
// ReLU forward) and sampled configurations.
TEST(FamilyNvrtc, DepthwiseCompilesForSm80AndSm90) {
  DeviceInfo ampere = hopper();
  ampere.name = "NVIDIA A100 (described)";
  ampere.architecture = "sm_80";
  ampere.compute_units = 108;
  const KernelFamily& family = kernel_family("depthwise");
  const std::vector<ConvProblem> problems = {parse_problem("N=32,C=32,H=112,K=32,R=3,pad=1,groups=32"),
                                             parse_problem("N=32,C=512,H=14,K=512,R=3,stride=2,pad=1,groups=512"),
                                             parse_problem("N=32,C=240,H=14,K=240,R=5,pad=2,groups=240"),
                                             parse_problem("N=8,C=64,H=30,K=128,R=3,pad=2,dilation=2,groups=64")};
  for (const DeviceInfo& device : {hopper(), ampere}) {
    int compiled = 0;
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      for (const ConvProblem& base : problems) {
        const ConvProblem pb = base.with_direction(d);
        ASSERT_EQ(family.unsupported_reason(pb, {}, device), "");
        const Epilogue epilogue = d == Direction::Forward ? Epilogue{true, true, 1} : Epilogue{};
        const Config config = family.default_config(pb, device);
        EXPECT_EQ(expect_compiles(family, pb, epilogue, config, device, true), 0)
            << device.architecture << " " << pb.to_string() << " [" << to_string(config) << "] spills registers";
        for (const Config& sampled : SearchSpace(family, pb, device).sample(1, 7)) {
          expect_compiles(family, pb, {}, sampled, device);
          ++compiled;
        }
        ++compiled;
      }
    }
    std::cout << fmt::format("nvrtc: compiled {} depthwise programs for {}\n", compiled, device.architecture);
  }
}

// depthwise_nhwc on Hopper, channels-last MobileNet-style layers in bf16, fp16 and fp32 (16-byte channel vectors, and
// a channel count that takes VEC 1): every direction, the default without spills and a sampled configuration.
TEST(FamilyNvrtc, DepthwiseNhwcCompilesForSm90WithoutSpills) {
  const KernelFamily& family = kernel_family("depthwise_nhwc");
  const DeviceInfo device = hopper();
  int compiled = 0;
  for (const char* text : {"N=64,C=96,H=112,K=96,R=3,pad=1,groups=96,layout=nhwc",
                           "N=64,C=144,H=56,K=144,R=3,stride=2,pad=1,groups=144,layout=nhwc",
                           "N=32,C=240,H=14,K=240,R=5,pad=2,groups=240,layout=nhwc",
                           "N=4,C=7,H=9,K=7,R=7,pad=3,groups=7,layout=nhwc"}) {
    for (ElementType type : {ElementType::BF16, ElementType::F16, ElementType::F32}) {
      for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
        ConvProblem pb = parse_problem(text).with_direction(d);
        pb.type = type;
        ASSERT_EQ(family.unsupported_reason(pb, {}, device), "") << pb.to_string();
        EXPECT_EQ(expect_compiles(family, pb, {}, family.default_config(pb, device), device, true), 0)
            << pb.to_string() << " spills registers";
        for (const Config& sampled : SearchSpace(family, pb, device).sample(1, 11)) expect_compiles(family, pb, {}, sampled, device);
        compiled += 2;
      }
    }
  }
  std::cout << fmt::format("nvrtc: compiled {} depthwise_nhwc programs for sm_90\n", compiled);
}

TEST(FamilyNvrtc, BatchNormKernelsCompileForSm90) {
  const DeviceInfo device = hopper();
  const std::string text = load_kernel_source("common/batch_norm.cl");
  for (const char* elem : {"0", "1", "2"}) {
    for (const char* nhwc : {"0", "1"}) {
      for (const auto& [residual, relu, relu_max] : {std::tuple{"0", "0", "0"}, {"1", "1", "0"}, {"0", "1", "1"}}) {
        const bool wide = std::string(residual) == "1";  // one block with 16-byte vectors, the others with 1
        const std::map<std::string, std::string> defines{
            {"ELEM", elem},          {"LAYOUT_NHWC", nhwc},      {"HAS_RESIDUAL", residual},
            {"HAS_RELU", relu},      {"HAS_RELU_MAX", relu_max}, {"RELU_MAX", "6.00000000f"},
            {"VEC", wide ? (std::string(elem) == "0" ? "4" : "8") : "1"}, {"BN_CT", wide ? "16" : "64"}};
        const auto options = cuda::cuda_program_options(device.architecture, defines, {});
        std::string log;
        EXPECT_NO_THROW(cuda::compile_cuda_to_cubin(text, options, "common/batch_norm.cl", &log))
            << "ELEM=" << elem << " LAYOUT_NHWC=" << nhwc << " HAS_RESIDUAL=" << residual << "\n" << log;
      }
    }
  }
}
