// The tensor-core families (gemm_tc, implicit_gemm_tc, winograd_tc, fft_tc, fft_wgmma) compile to cubins through NVRTC for sm_80 and sm_90 without
// a GPU, in tf32 and 3xtf32 math (and bf16/fp16 tensors where the family has 16-bit kernels), every direction, default and sampled configurations, with ptxas's resource
// report: every configuration must fit its register cap without spilling (the families' register constraint is an
// estimate; this is where it is held to the compiler's count). Prints one line per compiled program.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <iostream>
#include <regex>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "src/backend/kernel_sources.h"
#include "src/tuner/search_space.h"
#include "tests/support/hopper_device.h"

using namespace convtune;

namespace {

DeviceInfo ampere() {
  DeviceInfo d = test::described_hopper();
  d.name = "NVIDIA A100 (described)";
  d.architecture = "sm_80";
  d.compute_units = 108;
  d.local_memory_optin_bytes = 163 << 10;
  return d;
}

// ptxas -v lines, one set per kernel: "Used 168 registers, used 1 barriers, 2048 bytes smem, ..." and "N bytes
// stack frame, N bytes spill stores, M bytes spill loads". The most registers of any kernel, all spilled bytes.
struct Usage {
  int registers = 0;
  int spill_bytes = 0;
};
Usage parse_usage(const std::string& log) {
  Usage u;
  static const std::regex used(R"(Used (\d+) registers)"), spill(R"((\d+) bytes spill (stores|loads))");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), used); it != std::sregex_iterator(); ++it)
    u.registers = std::max(u.registers, std::stoi((*it)[1]));
  for (auto it = std::sregex_iterator(log.begin(), log.end(), spill); it != std::sregex_iterator(); ++it)
    u.spill_bytes += std::stoi((*it)[1]);
  return u;
}

int compiled = 0;

void expect_compiles(const KernelFamily& family, const Problem& pb, const Epilogue& epilogue, const Config& config,
                     const DeviceInfo& device) {
  const KernelRecipe recipe = family.recipe(pb, epilogue, config, device);
  const std::string text = load_kernel_source(recipe.source.file);
  std::vector<std::string> extra = recipe.source.options;
  extra.push_back("--ptxas-options=-v");
  const auto options = cuda::cuda_program_options(device.architecture, recipe.source.defines, extra);
  const std::string what = fmt::format("{} {} {} [{}]", family.name(), device.architecture, pb.to_string(), to_string(config));
  try {
    std::string log;
    const auto cubin = cuda::compile_cuda_to_cubin(text, options, recipe.source.file, &log);
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(static_cast<char>(cubin[1]), 'E');  // ELF magic: a cubin, not PTX
    const Usage u = parse_usage(log);
    const int registers = u.registers, spills = u.spill_bytes;
    ++compiled;
    size_t shared = 0;  // the tensor-core step's (winograd_tc's transform steps take none)
    for (const LaunchStep& step : recipe.steps) shared = std::max(shared, step.geometry.dynamic_local_bytes);
    std::cout << fmt::format("nvrtc {}: {} registers, {} spill bytes, {} B shared\n", what, registers, spills, shared);
    EXPECT_GT(registers, 0) << what << ": no resource report in the log:\n" << log;
    EXPECT_EQ(spills, 0) << what << " spills registers:\n" << log;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

const std::vector<Precision> kTf32Modes = {{ElementType::F32, MathMode::TF32}, {ElementType::F32, MathMode::TF32x3}};
const std::vector<Precision> kSixteenBit = {{ElementType::BF16, MathMode::FP32}, {ElementType::F16, MathMode::FP32}};

void compile_family(const std::string& name, const std::vector<Problem>& problems, const DeviceInfo& device,
                    size_t samples, const std::vector<Precision>& precisions = kTf32Modes) {
  const KernelFamily& family = kernel_family(name);
  for (Precision precision : precisions) {
    for (const Problem& base : problems) {
      const Problem pb = base.with_precision(precision);
      const std::string why = family.unsupported_reason(pb, {}, device);
      ASSERT_TRUE(why.empty()) << name << " " << pb.to_string() << ": " << why;
      std::vector<Config> configs = SearchSpace(family, pb, device).sample(samples, 7);
      configs.push_back(family.default_config(pb, device));
      for (const Config& c : configs) expect_compiles(family, pb, {}, c, device);
    }
  }
}

std::vector<Problem> conv_problems() {
  std::vector<Problem> out;
  for (const char* text : {"N=128,C=64,H=27,K=192,R=5,pad=2", "N=2,C=3,H=17,W=15,K=4,R=7,stride=2,pad=2",
                           "N=2,C=8,H=9,K=8,R=3,pad=1,groups=8"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      out.push_back(parse_problem(text).with_direction(d));
  }
  return out;
}

// winograd_tc: AlexNet's 3x3 (F(4x4,3x3) by default) and 5x5 (F(2x2,5x5)) layers, and a small grouped 3x3 layer
// with odd sizes (scalar copies) taking F(2x2,3x3) by default.
std::vector<Problem> winograd_problems() {
  std::vector<Problem> out;
  for (const char* text : {"N=128,C=192,H=13,K=384,R=3,pad=1", "N=128,C=64,H=27,K=192,R=5,pad=2",
                           "N=3,C=18,H=5,W=7,K=22,R=3,pad=1,groups=2"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      out.push_back(parse_problem(text).with_direction(d));
  }
  return out;
}

// fft_tc: AlexNet's 5x5 layer (T = 32: one tile an image) and a small grouped layer with a non-square filter and odd
// sizes (scalar copies).
std::vector<Problem> fft_problems() {
  std::vector<Problem> out;
  for (const char* text : {"N=128,C=64,H=27,K=192,R=5,pad=2", "N=3,C=18,H=11,W=9,K=22,R=5,S=3,pad=2x1,groups=2"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      out.push_back(parse_problem(text).with_direction(d));
  }
  return out;
}

std::vector<Problem> gemm_problems() {
  std::vector<Problem> out;
  for (const char* text : {"M=1024,N=1024,K=1024", "M=100,N=256,K=3136,trans_b=1", "M=256,N=3136,K=64,trans_a=1",
                           "M=10,N=255,K=63,trans_a=1,trans_b=1,batch=3,accumulate=1"})
    out.push_back(parse_gemm(text));
  return out;
}

}  // namespace

// The defaults of every problem, direction and mode, and one sampled configuration each in 3xtf32, whose split
// operands take the most registers for a given tile, so a register estimate that lets a tile spill shows there
// first. Not checked here: tiles only tf32's space admits (larger than 3xtf32's register cap allows) beyond the
// defaults. CI's time: NVRTC took about 0.75-1.5 s a program on the 2-core development host, and these tests
// together were the main suite's largest share; the GPU runs compile every configuration they tune.
TEST(TensorCoreNvrtc, SampledConfigurationsCompileForSm90WithoutSpills) {
  compiled = 0;
  const std::vector<Precision> tf32 = {{ElementType::F32, MathMode::TF32}}, split = {{ElementType::F32, MathMode::TF32x3}};
  for (const auto& [family, problems] : std::vector<std::pair<const char*, std::vector<Problem>>>{
           {"implicit_gemm_tc", conv_problems()}, {"gemm_tc", gemm_problems()}, {"winograd_tc", winograd_problems()},
           {"fft_tc", fft_problems()}}) {
    compile_family(family, problems, test::described_hopper(), 0, tf32);
    compile_family(family, problems, test::described_hopper(), 1, split);
  }
  std::cout << "nvrtc: compiled " << compiled << " tensor-core programs for sm_90\n";
  EXPECT_GT(compiled, 0);
}

// fft_wgmma (sm_90a only): the defaults and a sampled configuration of each problem, direction and mode.
TEST(TensorCoreNvrtc, FftWgmmaCompilesForSm90aWithoutSpills) {
  compiled = 0;
  compile_family("fft_wgmma", fft_problems(), test::described_hopper(), 1);
  std::cout << "nvrtc: compiled " << compiled << " fft_wgmma programs for sm_90a\n";
  EXPECT_GT(compiled, 0);
}

// sm_80's defaults in tf32 (3xtf32 issues the same mma.sync instructions on sm_80 as on sm_90, where the test above
// compiles it). Not checked here: sm_80's 3xtf32 defaults, which can differ from sm_90's (less shared memory).
TEST(TensorCoreNvrtc, DefaultsCompileForSm80WithoutSpills) {
  compiled = 0;
  const std::vector<Precision> tf32 = {{ElementType::F32, MathMode::TF32}};
  compile_family("implicit_gemm_tc", conv_problems(), ampere(), 0, tf32);
  compile_family("gemm_tc", gemm_problems(), ampere(), 0, tf32);
  compile_family("winograd_tc", winograd_problems(), ampere(), 0, tf32);
  compile_family("fft_tc", fft_problems(), ampere(), 0, tf32);
  std::cout << "nvrtc: compiled " << compiled << " tensor-core programs for sm_80\n";
  EXPECT_GT(compiled, 0);
}

TEST(TensorCoreNvrtc, ForwardWithBiasAndReluCompiles) {
  compiled = 0;
  const KernelFamily& family = kernel_family("implicit_gemm_tc");
  ConvProblem pb = parse_problem("N=1,C=16,H=20,K=16,R=5");
  pb.math = MathMode::TF32;
  const Epilogue fused{true, true, 1};
  const DeviceInfo device = test::described_hopper();
  Config config = family.default_config(pb, device);
  expect_compiles(family, pb, fused, config, device);
  config["SPLIT_K"] = config["SPLIT_K"] == 1 ? 2 : 1;  // the epilogue in the kernel and in the reduction
  expect_compiles(family, pb, fused, config, device);
  EXPECT_EQ(compiled, 2);
}

// The 16-bit kernels (gemm_tc16.cl, implicit_gemm_tc16.cl: m16n8k16, ldmatrix and ldmatrix.trans, register-staged
// copies) in bf16 and fp16: sampled configurations and defaults for sm_90, defaults for sm_80, and the forward
// epilogue in the kernel and in the split-K reduction.
TEST(TensorCoreNvrtc, SixteenBitKernelsCompileForSm90AndSm80WithoutSpills) {
  compiled = 0;
  // sm_80's defaults in bf16 only: fp16's kernels are bf16's with the other type (its sm_90 defaults compile above).
  const std::vector<Precision> bf16 = {{ElementType::BF16, MathMode::FP32}};
  compile_family("implicit_gemm_tc", conv_problems(), test::described_hopper(), 1, kSixteenBit);
  compile_family("gemm_tc", gemm_problems(), test::described_hopper(), 1, kSixteenBit);
  compile_family("implicit_gemm_tc", conv_problems(), ampere(), 0, bf16);
  compile_family("gemm_tc", gemm_problems(), ampere(), 0, bf16);
  const KernelFamily& family = kernel_family("implicit_gemm_tc");
  const Problem pb = Problem(parse_problem("N=1,C=16,H=20,K=16,R=5")).with_precision({ElementType::BF16, MathMode::FP32});
  Config config = family.default_config(pb, test::described_hopper());
  for (int64_t split : {1, 2}) {
    config["SPLIT_K"] = split;
    expect_compiles(family, pb, {true, true, 1}, config, test::described_hopper());
  }
  std::cout << "nvrtc: compiled " << compiled << " 16-bit tensor-core programs\n";
  EXPECT_GT(compiled, 0);
}

// The wgmma families (sm_90a: gemm_wgmma on the TN GEMMs, im2col_wgmma and implicit_gemm_wgmma in every direction,
// implicit_gemm_nhwc_wgmma forward and backward-data, implicit_gemm_shifted_wgmma backward-filter, col2im_wgmma
// backward-data)
// in bf16, fp16 and tf32 (implicit_gemm_wgmma and col2im_wgmma in 3xtf32 too): defaults and (but im2col_wgmma and
// fp16) a sampled configuration each, no spills.
TEST(TensorCoreNvrtc, WgmmaFamiliesCompileForSm90aWithoutSpills) {
  compiled = 0;
  // bf16 and tf32 with a sample beside each default, fp16 its defaults alone (its kernels are bf16's with the other
  // 16-bit type: the same tiles, registers and shared memory). CI's time; the GPU runs compile every configuration
  // they tune.
  const std::vector<Precision> modes = {{ElementType::BF16, MathMode::FP32}, {ElementType::F32, MathMode::TF32}};
  const std::vector<Precision> fp16 = {{ElementType::F16, MathMode::FP32}};
  compile_family("im2col_wgmma", conv_problems(), test::described_hopper(), 0, modes);
  compile_family("im2col_wgmma", conv_problems(), test::described_hopper(), 0, fp16);
  compile_family("implicit_gemm_wgmma", conv_problems(), test::described_hopper(), 1, modes);
  compile_family("implicit_gemm_wgmma", conv_problems(), test::described_hopper(), 0, fp16);
  // 3xTF32 (implicit_gemm_wgmma only): split operands in two halves of each stage, a tile's partial sums beside the
  // accumulators.
  compile_family("implicit_gemm_wgmma", conv_problems(), test::described_hopper(), 1,
                 {{ElementType::F32, MathMode::TF32x3}});
  // implicit_gemm_nhwc_wgmma: forward (with the problems' stride, groups and odd channel counts) and stride-1
  // backward-data (strided backward-data and backward-filter are implicit_gemm_wgmma's).
  std::vector<Problem> not_filter;
  for (const Problem& pb : conv_problems()) {
    const ConvProblem& c = pb.conv();
    if (c.direction == Direction::Forward || (c.direction == Direction::BackwardData && c.stride.h == 1 && c.stride.w == 1))
      not_filter.push_back(pb);
  }
  compile_family("implicit_gemm_nhwc_wgmma", not_filter, test::described_hopper(), 1, modes);
  compile_family("implicit_gemm_nhwc_wgmma", not_filter, test::described_hopper(), 0, fp16);
  // implicit_gemm_shifted_wgmma: backward-filter only (stride, dilation, groups, odd Q), split-K and not.
  std::vector<Problem> filter;
  for (const Problem& pb : conv_problems())
    if (pb.conv().direction == Direction::BackwardFilter) filter.push_back(pb);
  compile_family("implicit_gemm_shifted_wgmma", filter, test::described_hopper(), 1, modes);
  compile_family("implicit_gemm_shifted_wgmma", filter, test::described_hopper(), 0, fp16);
  // col2im_wgmma: backward-data only (stride, groups, odd channel counts).
  std::vector<Problem> data;
  for (const Problem& pb : conv_problems())
    if (pb.conv().direction == Direction::BackwardData) data.push_back(pb);
  compile_family("col2im_wgmma", data, test::described_hopper(), 1, modes);
  compile_family("col2im_wgmma", data, test::described_hopper(), 0, fp16);
  compile_family("col2im_wgmma", data, test::described_hopper(), 1, {{ElementType::F32, MathMode::TF32x3}});
  std::vector<Problem> gemms;
  for (const char* text : {"M=1024,N=1024,K=1024,trans_b=1", "M=100,N=256,K=3136,trans_b=1",
                           "M=10,N=256,K=64,trans_b=1,batch=3,accumulate=1"})
    gemms.push_back(parse_gemm(text));
  compile_family("gemm_wgmma", gemms, test::described_hopper(), 1, modes);
  compile_family("gemm_wgmma", gemms, test::described_hopper(), 0, fp16);
  const KernelFamily& family = kernel_family("im2col_wgmma");
  const Problem pb = Problem(parse_problem("N=2,C=16,H=20,K=32,R=5")).with_precision({ElementType::BF16, MathMode::FP32});
  expect_compiles(family, pb, {true, true, 1}, family.default_config(pb, test::described_hopper()), test::described_hopper());
  const KernelFamily& nhwc = kernel_family("implicit_gemm_nhwc_wgmma");  // its bias and ReLU
  expect_compiles(nhwc, pb, {true, true, 1}, nhwc.default_config(pb, test::described_hopper()), test::described_hopper());
  std::cout << "nvrtc: compiled " << compiled << " wgmma programs for sm_90a\n";
  EXPECT_GT(compiled, 0);
}

// The wgmma families that read channels-last tensors themselves, in bf16 and tf32: channels in whole 16-byte chunks
// (implicit_gemm_nhwc_wgmma reads x or dy and the forward filters in place), odd channel counts and groups (copies
// from channels-last), the bias, residual, ReLU and ReLU6 epilogues; defaults and a sampled configuration each, no
// spills.
TEST(TensorCoreNvrtc, ChannelsLastWgmmaKernelsCompileForSm90aWithoutSpills) {
  compiled = 0;
  const std::vector<Precision> modes = {{ElementType::BF16, MathMode::FP32}, {ElementType::F32, MathMode::TF32}};
  const DeviceInfo device = test::described_hopper();
  std::vector<Problem> forward, data, strided_data, filter;
  for (const char* text : {"N=8,C=64,H=14,K=64,R=3,pad=1,layout=nhwc", "N=4,C=256,H=7,K=512,R=1,layout=nhwc",
                           "N=2,C=3,H=17,W=15,K=64,R=7,stride=2,pad=3,layout=nhwc",
                           "N=2,C=24,H=9,K=48,R=3,pad=1,groups=2,layout=nhwc"}) {
    const ConvProblem c = parse_problem(text);
    forward.push_back(c.with_direction(Direction::Forward));
    filter.push_back(c.with_direction(Direction::BackwardFilter));
    (c.stride.h == 1 ? data : strided_data).push_back(c.with_direction(Direction::BackwardData));
  }
  strided_data.push_back(parse_problem("N=4,C=64,H=14,K=128,R=1,stride=2,dir=bwd-data,layout=nhwc"));
  compile_family("implicit_gemm_nhwc_wgmma", forward, device, 1, modes);
  compile_family("implicit_gemm_nhwc_wgmma", data, device, 1, modes);
  compile_family("implicit_gemm_shifted_wgmma", filter, device, 1, modes);
  // wgrad_nhwc_wgmma: MN-major tiles of x and dy read in place (16-bit only; the odd-channel and tf32 problems are
  // refused), split-K and not, every tile shape.
  std::vector<Problem> whole_chunks;
  for (const Problem& pb : filter)
    if (pb.conv().c_per_group() % 8 == 0 && pb.conv().k_per_group() % 8 == 0) whole_chunks.push_back(pb);
  whole_chunks.push_back(parse_problem("N=2,C=32,H=17,K=48,R=3,stride=2,dilation=2,pad=2,groups=2,dir=bwd-filter,layout=nhwc"));
  compile_family("wgrad_nhwc_wgmma", whole_chunks, device, 1, {{ElementType::BF16, MathMode::FP32}});
  compile_family("wgrad_nhwc_wgmma", whole_chunks, device, 0, {{ElementType::F16, MathMode::FP32}});
  {
    const KernelFamily& wgrad = kernel_family("wgrad_nhwc_wgmma");
    const Problem pb = whole_chunks.front().with_precision({ElementType::BF16, MathMode::FP32});
    for (int64_t wg_m : {1, 2})
      for (int64_t block_n : {64, 128, 256})
        for (int64_t split : {1, 4}) {
          Config config = wgrad.default_config(pb, device);
          config["WG_M"] = wg_m, config["BLOCK_N"] = block_n, config["SPLIT_K"] = split, config["STAGES"] = 3;
          if (config_problem(wgrad, config, pb, device).empty()) expect_compiles(wgrad, pb, {}, config, device);
        }
  }
  compile_family("col2im_wgmma", strided_data, device, 1, modes);
  // implicit_gemm_nhwc_wgmma's channels-last strided backward-data, by phases.
  compile_family("implicit_gemm_nhwc_wgmma", strided_data, device, 1, modes);
  const KernelFamily& nhwc = kernel_family("implicit_gemm_nhwc_wgmma");
  for (const Precision& precision : modes) {
    const Problem pb = forward.front().with_precision(precision);
    expect_compiles(nhwc, pb, {true, true, 1}, nhwc.default_config(pb, device), device);
    // A ResNet block's last convolution (bias, the shortcut, ReLU) and a MobileNet one's (bias, ReLU6); both layouts.
    for (const char* epilogue : {"bias+residual+relu", "residual+relu6"}) {
      expect_compiles(nhwc, pb, parse_epilogue(epilogue), nhwc.default_config(pb, device), device);
      const Problem nchw = Problem(pb.conv().with_layout(Layout::NCHW));
      expect_compiles(nhwc, nchw, parse_epilogue(epilogue), nhwc.default_config(nchw, device), device);
    }
  }
  std::cout << "nvrtc: compiled " << compiled << " channels-last wgmma programs for sm_90a\n";
  EXPECT_GT(compiled, 0);
}

// winograd_tc's every tile side on a 3x3 layer in every direction: F(2x2,3x3) and F(4x4,3x3) in both modes,
// F(6x6,3x3) (alpha 8) in tf32, the only mode that admits it; with the forward epilogue where it applies; and a 7x7
// layer in tf32.
TEST(TensorCoreNvrtc, WinogradTcTileSidesCompile) {
  compiled = 0;
  const KernelFamily& family = kernel_family("winograd_tc");
  const DeviceInfo device = test::described_hopper();
  int expected = 0;
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    for (MathMode math : {MathMode::TF32, MathMode::TF32x3}) {
      const Problem pb = Problem(parse_problem("N=8,C=64,H=14,K=96,R=3,pad=1").with_direction(d)).with_math(math);
      for (int64_t side : {2, 4, 6}) {
        Config config = family.default_config(pb, device);
        config["M_TILE"] = side;
        const std::string why = config_problem(family, config, pb, device);
        EXPECT_EQ(why.empty(), side < 6 || math == MathMode::TF32) << side << " " << to_string(math) << ": " << why;
        if (!why.empty()) continue;
        const Epilogue epilogue = d == Direction::Forward ? Epilogue{true, true, 1} : Epilogue{};
        expect_compiles(family, pb, epilogue, config, device);
        ++expected;
      }
    }
  }
  // 7x7: F(2x2,7x7), alpha 8 at the smallest tile, in tf32 only.
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const Problem pb = Problem(parse_problem("N=4,C=32,H=15,K=48,R=7,pad=3").with_direction(d)).with_math(MathMode::TF32);
    expect_compiles(family, pb, {}, family.default_config(pb, device), device);
    ++expected;
  }
  EXPECT_EQ(compiled, expected);
  EXPECT_EQ(expected, 18);
}
