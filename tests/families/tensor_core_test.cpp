// The tensor-core families without a GPU. (1) Their kernels, built with TC_EMULATE=1 (mma.sync, cp.async and the
// TF32 rounding in plain OpenCL C, tc_common.h), run on PoCL with the recipe made for a described Hopper GPU and
// are checked in full against the float64 reference in tf32 and 3xtf32: this tests the indexing, shared-memory
// layouts, pipeline stages, edges, split-K and epilogue, and our reading of the PTX fragment layouts, but not the
// PTX itself (tensor_core_nvrtc_test compiles that; scripts/gpu/check_and_bench.sh runs it on a GPU). (2) The
// families' support rules, defaults and the plan's choice by math mode, on described devices.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <set>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "src/backend/kernel_sources.h"
#include "src/conformance/conformance.h"
#include "src/families/widened.h"
#include "src/harness/implementation.h"
#include "src/tuner/search_space.h"
#include "tests/support/hopper_device.h"
#include "tests/support/plan_check.h"

using namespace convtune;

namespace {

Device* pocl() {
  for (Device* d : Registry::instance().all_devices())
    if (d->info().backend == BackendKind::OpenCL && d->info().can_run_kernels) return d;
  return nullptr;
}

// Odd sizes (scalar copies, edge tiles), multiples of 4 (16-byte copies), every transposition, padded rows,
// batches (shared and strided), accumulation, long reductions (split-K).
const char* const kGemmCases[] = {"M=7,N=9,K=5", "M=64,N=64,K=64", "M=33,N=17,K=65,trans_b=1", "M=40,N=24,K=12,trans_a=1",
                                  "M=13,N=30,K=21,trans_a=1,trans_b=1", "M=12,N=20,K=300",
                                  "M=9,N=16,K=12,lda=15,ldb=20,ldc=18", "M=8,N=12,K=16,batch=3,trans_b=1",
                                  "M=6,N=8,K=20,batch=4,stride_a=0", "M=10,N=11,K=33,accumulate=1",
                                  "M=36,N=40,K=64,batch=2,accumulate=1,trans_a=1", "M=100,N=96,K=256,trans_b=1"};

// A family's recipe for a described Hopper, built with the emulation and launched step by step on another device.
class EmulatedTensorCores final : public harness::Implementation {
 public:
  EmulatedTensorCores(const KernelFamily& family, Config config, Epilogue epilogue = {})
      : family_(family), config_(std::move(config)), epilogue_(epilogue) {}
  std::string name() const override { return "emulated " + family_.name(); }
  std::string unsupported_reason(const Problem&, const DeviceInfo&) const override { return {}; }
  void prepare(harness::Workload& workload) override {
    workload_ = &workload;
    recipe_ = family_.recipe(workload.problem(), epilogue_, config_, test::described_hopper());
    recipe_.source.defines["TC_EMULATE"] = "1";
    // The recipe's own program and any others its steps launch (a channels-last problem's transposes), with the
    // staging buffers of those steps.
    programs_ = {workload.device().build(recipe_.source)};
    for (const ProgramSource& extra : recipe_.extra_sources) programs_.push_back(workload.device().build(extra));
    if (recipe_.workspace_bytes > 0) workspace_ = workload.device().allocate(recipe_.workspace_bytes);
    staging_.clear();
    for (size_t bytes : recipe_.staging_bytes) staging_.push_back(workload.device().allocate(std::max<size_t>(bytes, 1)));
    kernels_.clear();
    for (const LaunchStep& step : recipe_.steps)
      kernels_.push_back(programs_.at(static_cast<size_t>(step.program))->kernel(step.kernel));
  }
  void run() override { run_with({}); }
  void run_with(const Buffer* bias) {
    const Operands operands = workload_->operands();
    for (size_t i = 0; i < recipe_.steps.size(); ++i) {
      const LaunchStep& step = recipe_.steps[i];
      for (size_t a = 0; a < step.args.size(); ++a) {
        const ArgSource& arg = step.args[a];
        const int index = static_cast<int>(a);
        if (arg.kind == ArgSource::Kind::Workspace) kernels_[i]->set_arg(index, workspace_.get());
        else if (arg.kind == ArgSource::Kind::Staging) kernels_[i]->set_arg(index, staging_.at(static_cast<size_t>(arg.operand)).get());
        else if (arg.kind == ArgSource::Kind::Value) kernels_[i]->set_arg(index, arg.value);
        else kernels_[i]->set_arg(index, arg.operand == kBiasOperand ? bias : operands[static_cast<size_t>(arg.operand)]);
      }
      workload_->queue().launch(*kernels_[i], step.geometry);
    }
  }
  std::string algorithm() const override { return fmt::format("{}[{}] emulated", family_.name(), to_string(config_)); }

 private:
  const KernelFamily& family_;
  Config config_;
  Epilogue epilogue_;
  harness::Workload* workload_ = nullptr;
  KernelRecipe recipe_;
  std::vector<std::shared_ptr<Program>> programs_;
  std::unique_ptr<Buffer> workspace_;
  std::vector<std::unique_ptr<Buffer>> staging_;
  std::vector<std::shared_ptr<Kernel>> kernels_;
};

// A sampled configuration small enough for PoCL to run quickly (tiles up to 64, at most 4 warps), else the default.
Config small_sample(const KernelFamily& family, const Problem& pb, const DeviceInfo& device, uint64_t seed) {
  for (const Config& c : SearchSpace(family, pb, device).sample(64, seed)) {
    if (c.at("TILE_M") <= 64 && c.at("TILE_N") <= 64 && c.at("WARPS_M") * c.at("WARPS_N") <= 4) return c;
  }
  return family.default_config(pb, device);
}

int check_emulated(Device& device, const KernelFamily& family, const Problem& pb, const Config& config, uint64_t seed) {
  harness::Workload workload(device, pb, seed);
  EmulatedTensorCores impl(family, config);
  harness::Check check;
  try {
    impl.prepare(workload);
    check = harness::check_once(impl, workload, 0);
  } catch (const std::exception& e) {
    check.message = std::string("threw: ") + e.what();
  }
  EXPECT_TRUE(check.passed) << impl.algorithm() << " on " << pb.to_string() << ": " << check.message;
  return 1;
}

}  // namespace

TEST(TensorCoreEmulated, ImplicitGemmTcMatchesTheReferenceInEveryDirectionAndMode) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("implicit_gemm_tc");
  const DeviceInfo hopper = test::described_hopper();
  int checks = 0;
  uint64_t seed = 40;
  // The cases that exercise the gathers' every path (PoCL takes seconds a check; the GPU run takes them all).
  const std::set<std::string> picked = {"1x1-stride2", "3x3-stride2-pad1-odd", "3x3-stride4", "5x5-C1-fmnist-mini",
                                        "11x11-stride4-pad2-alex1-mini", "3x5-nonsquare-dilation2x1",
                                        "3x3-stride2x1-pad0x1", "5x5-depthwise-x2-stride2"};
  for (const auto& c : conformance::standard_cases()) {
    if (!picked.count(c.name)) continue;
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      ++seed;
      // Modes alternate over the cases (both are checked in every direction), which halves PoCL's compiles.
      const MathMode math = seed % 2 ? MathMode::TF32 : MathMode::TF32x3;
      const Problem pb = Problem(c.problem.with_direction(d)).with_math(math);
      ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << c.name;
      checks += check_emulated(*device, family, pb, small_sample(family, pb, hopper, seed), seed);
    }
  }
  // The defaults a Hopper gets (128x128 tiles where the GEMM fills them, split-K for backward-filter) on layers
  // large enough to take them.
  for (const char* text : {"N=2,C=32,H=12,K=128,R=3,pad=1"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const Problem pb = Problem(parse_problem(text).with_direction(d)).with_math(++seed % 2 ? MathMode::TF32 : MathMode::TF32x3);
      checks += check_emulated(*device, family, pb, family.default_config(pb, hopper), seed);
    }
  }
  std::cout << fmt::format("emulated implicit_gemm_tc on {}: {} checks\n", device->info().id, checks);
}

TEST(TensorCoreEmulated, ForwardEpilogueInTheKernelAndInTheSplitKReduction) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("implicit_gemm_tc");
  const Epilogue fused{true, true, 1};
  // The TF32 kernel in 3xtf32 and the 16-bit kernel (FP32 bias, the sum rounded to bf16 once, after ReLU).
  for (Precision precision : {Precision{ElementType::F32, MathMode::TF32x3}, Precision{ElementType::BF16, MathMode::FP32}})
  for (int64_t split : {1, 2}) {
    const Problem pb = Problem(parse_problem("N=2,C=6,H=9,K=10,R=3,pad=1")).with_precision(precision);
    Config config = small_sample(family, pb, test::described_hopper(), 3);
    config["SPLIT_K"] = split;
    harness::Workload workload(*device, pb, 9);
    const std::vector<float> bias = harness::random_values(10, 77);
    std::unique_ptr<Buffer> bias_buffer = device->allocate(bias.size() * sizeof(float));
    device->queue().write(*bias_buffer, bias.data(), bias.size() * sizeof(float));
    EmulatedTensorCores impl(family, config, fused);
    impl.prepare(workload);
    workload.poison();
    impl.run_with(bias_buffer.get());
    device->queue().finish();
    const std::vector<float> out = workload.output();
    // The expected output, in float64: the convolution, then bias and ReLU per channel.
    const std::vector<float>& x = workload.initial(0);
    const std::vector<float>& w = workload.initial(1);
    const ConvProblem& c = pb.conv();
    double err2 = 0, ref2 = 0;
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t k = 0; k < c.k; ++k)
        for (int64_t p = 0; p < c.p(); ++p)
          for (int64_t q = 0; q < c.q(); ++q) {
            double sum = bias[static_cast<size_t>(k)];
            for (int64_t ch = 0; ch < c.c; ++ch)
              for (int64_t r = 0; r < c.r; ++r)
                for (int64_t s = 0; s < c.s; ++s) {
                  const int64_t h = p - c.pad.h + r, ww = q - c.pad.w + s;
                  if (h < 0 || h >= c.h || ww < 0 || ww >= c.w) continue;
                  sum += static_cast<double>(x[static_cast<size_t>(((n * c.c + ch) * c.h + h) * c.w + ww)]) *
                         w[static_cast<size_t>(((k * c.c + ch) * c.r + r) * c.s + s)];
                }
            const double want = sum > 0 ? sum : 0;
            const double got = out[static_cast<size_t>(((n * c.k + k) * c.p() + p) * c.q() + q)];
            err2 += (got - want) * (got - want), ref2 += want * want;
          }
    EXPECT_LT(std::sqrt(err2 / ref2), harness::tolerance(pb)) << to_string(precision) << " SPLIT_K=" << split;
  }
}

TEST(TensorCoreEmulated, GemmTcMatchesTheReferenceForEveryLayout) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("gemm_tc");
  const DeviceInfo hopper = test::described_hopper();
  int checks = 0;
  uint64_t seed = 700;
  for (const char* text : kGemmCases) {
    // Both modes and both kinds of configuration over the cases, alternating (PoCL compiles each in seconds).
    const Problem pb = Problem(parse_gemm(text)).with_math(++seed % 2 ? MathMode::TF32 : MathMode::TF32x3);
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << text;
    const Config config =
        (seed / 2) % 2 ? family.default_config(pb, hopper) : small_sample(family, pb, hopper, seed);
    checks += check_emulated(*device, family, pb, config, seed);
  }
  std::cout << fmt::format("emulated gemm_tc on {}: {} checks\n", device->info().id, checks);
}

// The 16-bit kernels (gemm_tc16.cl, implicit_gemm_tc16.cl: m16n8k16 fragments, register-staged copies, 4- and
// 16-byte cp.async, rounding of the stores) emulated on PoCL: every GEMM layout case and the implicit GEMM's gather
// cases in every direction, bf16 and fp16 alternating, sampled configurations and defaults; then split-K and the
// forward epilogue. Held to the 16-bit tolerance (harness::tolerance), whose output-rounding term is far below an
// indexing mistake's error.
TEST(TensorCoreEmulated, SixteenBitGemmTcMatchesTheReferenceForEveryLayout) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("gemm_tc");
  const DeviceInfo hopper = test::described_hopper();
  int checks = 0;
  uint64_t seed = 1700;
  // Beside the FP32 cases (odd sizes: element-wise copies), multiples of 2 (4-byte copies) and of 8 (16-byte).
  std::vector<std::string> cases(std::begin(kGemmCases), std::end(kGemmCases));
  cases.insert(cases.end(), {"M=18,N=22,K=30", "M=48,N=40,K=72,trans_a=1", "M=64,N=72,K=24,batch=2,trans_b=1,accumulate=1"});
  for (const std::string& text : cases) {
    ++seed;
    const ElementType type = seed % 2 ? ElementType::BF16 : ElementType::F16;
    const Problem pb = Problem(parse_gemm(text)).with_precision({type, MathMode::FP32});
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << text;
    Config config = (seed / 2) % 2 ? family.default_config(pb, hopper) : small_sample(family, pb, hopper, seed);
    checks += check_emulated(*device, family, pb, config, seed);
  }
  // Split-K: FP32 partials summed and rounded by tc_splitk_reduce (accumulating into C too).
  for (const char* text : {"M=20,N=24,K=96", "M=16,N=16,K=128,accumulate=1,trans_a=1"}) {
    const Problem pb = Problem(parse_gemm(text)).with_precision({++seed % 2 ? ElementType::BF16 : ElementType::F16, MathMode::FP32});
    Config config = small_sample(family, pb, hopper, seed);
    config["SPLIT_K"] = 2;
    ASSERT_EQ(config_problem(family, config, pb, hopper), "") << text;
    checks += check_emulated(*device, family, pb, config, seed);
  }
  std::cout << fmt::format("emulated 16-bit gemm_tc on {}: {} checks\n", device->info().id, checks);
}

TEST(TensorCoreEmulated, SixteenBitImplicitGemmTcMatchesTheReferenceInEveryDirection) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("implicit_gemm_tc");
  const DeviceInfo hopper = test::described_hopper();
  int checks = 0;
  uint64_t seed = 1900;
  const std::set<std::string> picked = {"1x1-stride2", "3x3-stride2-pad1-odd", "5x5-C1-fmnist-mini",
                                        "3x5-nonsquare-dilation2x1", "3x3-stride2x1-pad0x1", "5x5-depthwise-x2-stride2"};
  for (const auto& c : conformance::standard_cases()) {
    if (!picked.count(c.name)) continue;
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      ++seed;
      const Problem pb = Problem(c.problem.with_direction(d)).with_precision({seed % 2 ? ElementType::BF16 : ElementType::F16, MathMode::FP32});
      ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << c.name;
      checks += check_emulated(*device, family, pb, small_sample(family, pb, hopper, seed), seed);
    }
  }
  // Defaults on a layer that takes the large tiles (forward's 16-byte filter copies: C*R*S a multiple of 8) and
  // split-K for backward-filter.
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const Problem pb = Problem(parse_problem("N=2,C=32,H=12,K=128,R=3,pad=1").with_direction(d))
                           .with_precision({++seed % 2 ? ElementType::BF16 : ElementType::F16, MathMode::FP32});
    checks += check_emulated(*device, family, pb, family.default_config(pb, hopper), seed);
  }
  std::cout << fmt::format("emulated 16-bit implicit_gemm_tc on {}: {} checks\n", device->info().id, checks);
}

// winograd_tc: winograd.cl's transforms around the emulated tensor-core GEMM, on every stride-1 3x3 and 5x5
// conformance case (odd sizes, padding 0 to 2, groups, N=1) in every direction; modes alternate, and the tile side
// (F(2x2), F(4x4), and F(6x6,3x3) in tf32) follows the seed. Then chunks of the batch (backward-filter: M summed
// over them) and slices, which the small cases' defaults do not take.
TEST(TensorCoreEmulated, WinogradTcMatchesTheReferenceInEveryDirectionAndMode) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("winograd_tc");
  const DeviceInfo hopper = test::described_hopper();
  int checks = 0;
  uint64_t seed = 300;
  for (const auto& c : conformance::standard_cases()) {
    const ConvProblem& base = c.problem;
    if (base.stride.h != 1 || base.stride.w != 1 || base.dilation.h != 1 || base.dilation.w != 1 || base.r != base.s ||
        (base.r != 3 && base.r != 5) || base.groups == base.c)  // depthwise: winograd's poor fit, one case suffices
      continue;
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      ++seed;
      const MathMode math = seed % 2 ? MathMode::TF32 : MathMode::TF32x3;
      const Problem pb = Problem(base.with_direction(d)).with_math(math);
      ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << c.name;
      Config config = small_sample(family, pb, hopper, seed);
      const std::vector<int64_t> sides = math == MathMode::TF32 && base.r == 3 ? std::vector<int64_t>{2, 4, 6}
                                                                               : std::vector<int64_t>{2, 4};
      Config sided = config;
      sided["M_TILE"] = sides[seed % sides.size()];
      if (config_problem(family, sided, pb, hopper).empty()) config = sided;
      checks += check_emulated(*device, family, pb, config, seed);
    }
  }
  // Several chunks (BATCH_CHUNK 1 of N=3), slices of the tiles (backward-filter), 16-byte copies (channels and
  // tiles multiples of 4), an odd filter count, and the default of a layer with K and C above one MMA tile.
  for (const char* text : {"N=3,C=8,H=7,W=6,K=12,R=3,pad=1", "N=2,C=16,H=8,K=16,R=3,pad=1", "N=2,C=9,H=9,K=5,R=5,pad=2"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const Problem pb = Problem(parse_problem(text).with_direction(d)).with_math(++seed % 2 ? MathMode::TF32 : MathMode::TF32x3);
      Config config = small_sample(family, pb, hopper, seed);
      config["BATCH_CHUNK"] = 1;
      if (d == Direction::BackwardFilter) config["SPLIT"] = 2;
      ASSERT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
      checks += check_emulated(*device, family, pb, config, seed);
    }
  }
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const Problem pb = Problem(parse_problem("N=2,C=32,H=12,K=64,R=3,pad=1").with_direction(d)).with_math(++seed % 2 ? MathMode::TF32 : MathMode::TF32x3);
    checks += check_emulated(*device, family, pb, family.default_config(pb, hopper), seed);
    // 7x7 (F(2x2,7x7), alpha 8): tf32 only.
    const Problem seven = Problem(parse_problem("N=2,C=6,H=9,W=8,K=5,R=7,pad=3").with_direction(d)).with_math(MathMode::TF32);
    checks += check_emulated(*device, family, seven, small_sample(family, seven, hopper, seed), seed);
  }
  std::cout << fmt::format("emulated winograd_tc on {}: {} checks\n", device->info().id, checks);
}

// fft_tc: fft.cl's transforms around the emulated tensor-core GEMM, on every stride-1 conformance case (odd sizes,
// 1x1 to 5x5 filters, padding 0 to 2, groups, depthwise, N=1), the direction rotating from case to case (each
// check compiles a program, and PoCL takes seconds for the emulated MMAs: this test is kept near a minute); modes
// alternate, and Gauss's planes follow the seed. Then chunks of the batch (backward-filter: M summed over them),
// slices, 16-byte copies and a non-square filter in every direction, and a larger layer's defaults. The family's
// conformance on the GPU runs every case in every direction (family_conformance_test).
TEST(TensorCoreEmulated, FftTcMatchesTheReferenceInEveryDirectionAndMode) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing): the emulation cannot run";
  const KernelFamily& family = kernel_family("fft_tc");
  const DeviceInfo hopper = test::described_hopper();
  int checks = 0;
  uint64_t seed = 500;
  const Direction kDirections[] = {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};
  for (const auto& c : conformance::standard_cases()) {
    const ConvProblem& base = c.problem;
    if (base.stride.h != 1 || base.stride.w != 1 || base.dilation.h != 1 || base.dilation.w != 1) continue;
    ++seed;
    const Direction d = kDirections[seed % 3];
    const MathMode math = seed % 2 ? MathMode::TF32 : MathMode::TF32x3;
    const Problem pb = Problem(base.with_direction(d)).with_math(math);
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << c.name;
    Config config = small_sample(family, pb, hopper, seed);
    Config varied = config;
    varied["GAUSS"] = static_cast<int64_t>(seed / 2 % 2);
    if (config_problem(family, varied, pb, hopper).empty()) config = varied;
    checks += check_emulated(*device, family, pb, config, seed);
  }
  // Several chunks (BATCH_CHUNK 1 of N=3), slices of the tiles (backward-filter), either product form, 16-byte copies
  // (channels and tiles multiples of 4), a non-square filter, and the default of a layer with K and C above one MMA
  // tile.
  for (const char* text : {"N=3,C=8,H=7,W=6,K=12,R=3,pad=1", "N=4,C=16,H=8,K=16,R=5,pad=2", "N=2,C=9,H=9,K=5,R=5,S=3,pad=1"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      {
        const int64_t gauss = static_cast<int64_t>(++seed / 2 % 2);
        const Problem pb = Problem(parse_problem(text).with_direction(d)).with_math(++seed % 2 ? MathMode::TF32 : MathMode::TF32x3);
        const int64_t split = d == Direction::BackwardFilter ? 2 : 1;
        Config config;
        for (const Config& c : SearchSpace(family, pb, hopper).sample(4096, seed)) {
          if (c.at("BATCH_CHUNK") == 1 && c.at("GAUSS") == gauss && c.at("SPLIT") == split && c.at("TILE_M") <= 64 &&
              c.at("TILE_N") <= 64 && c.at("WARPS_M") * c.at("WARPS_N") <= 4) {
            config = c;
            break;
          }
        }
        ASSERT_FALSE(config.empty()) << pb.to_string() << ": no sampled configuration has BATCH_CHUNK=1, GAUSS=" << gauss
                                     << ", SPLIT=" << split;
        checks += check_emulated(*device, family, pb, config, seed);
      }
    }
  }
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
    const Problem pb = Problem(parse_problem("N=2,C=32,H=12,K=64,R=5,pad=2").with_direction(d)).with_math(++seed % 2 ? MathMode::TF32 : MathMode::TF32x3);
    checks += check_emulated(*device, family, pb, family.default_config(pb, hopper), seed);
  }
  std::cout << fmt::format("emulated fft_tc on {}: {} checks\n", device->info().id, checks);
}

// Support follows the math mode and the device, and the refusal names the mode, the family and the device.
TEST(TensorCoreFamilies, SupportNamesTheModeTheFamilyAndTheDevice) {
  const DeviceInfo hopper = test::described_hopper();
  DeviceInfo turing = hopper;
  turing.architecture = "sm_75", turing.id = "cuda:1", turing.name = "Tesla T4";
  DeviceInfo cpu_opencl;
  cpu_opencl.backend = BackendKind::OpenCL, cpu_opencl.id = "opencl:0", cpu_opencl.name = "cpu-haswell";
  cpu_opencl.vendor = "AuthenticAMD", cpu_opencl.architecture = "x86_64", cpu_opencl.can_run_kernels = true;
  DeviceInfo nvidia_opencl = hopper;
  nvidia_opencl.backend = BackendKind::OpenCL, nvidia_opencl.vendor = "NVIDIA Corporation";
  const ConvProblem fp32 = parse_problem("N=1,C=4,H=8,K=4,R=3");
  for (const char* name : {"implicit_gemm_tc", "gemm_tc", "winograd_tc", "fft_tc"}) {
    const KernelFamily& family = kernel_family(name);
    const bool conv = family.problem_kind() == Problem::Kind::Convolution;
    const Problem plain = conv ? Problem(fp32) : Problem(parse_gemm("M=8,N=8,K=8"));
    const std::string fp32_why = family.unsupported_reason(plain, {}, hopper);
    EXPECT_NE(fp32_why.find("not fp32"), std::string::npos) << fp32_why;
    EXPECT_NE(fp32_why.find(name), std::string::npos) << fp32_why;
    for (MathMode math : {MathMode::TF32, MathMode::TF32x3}) {
      const Problem pb = plain.with_math(math);
      EXPECT_EQ(family.unsupported_reason(pb, {}, hopper), "");
      EXPECT_EQ(family.unsupported_reason(pb, {}, nvidia_opencl), "");
      for (const DeviceInfo& other : {turing, cpu_opencl}) {
        const std::string why = family.unsupported_reason(pb, {}, other);
        EXPECT_NE(why.find(std::string(to_string(math))), std::string::npos) << why;
        EXPECT_NE(why.find(other.id), std::string::npos) << why;
        EXPECT_NE(why.find(name), std::string::npos) << why;
      }
    }
    // 16-bit tensors: implicit_gemm_tc and gemm_tc compute them (fp32 math) on sm_80+, named in every refusal;
    // winograd_tc and fft_tc refuse them by name.
    const bool sixteen_bit = std::string(name) != "winograd_tc" && std::string(name) != "fft_tc";
    for (ElementType type : {ElementType::BF16, ElementType::F16}) {
      const Problem narrow = plain.with_precision({type, MathMode::FP32});
      const std::string why = family.unsupported_reason(narrow, {}, hopper);
      EXPECT_EQ(why.empty(), sixteen_bit) << name << ": " << why;
      if (!sixteen_bit) EXPECT_NE(why.find(std::string(to_string(type))), std::string::npos) << why;
      if (!sixteen_bit) continue;
      EXPECT_EQ(family.unsupported_reason(narrow, {}, nvidia_opencl), "");
      for (const DeviceInfo& other : {turing, cpu_opencl}) {
        const std::string refusal = family.unsupported_reason(narrow, {}, other);
        EXPECT_NE(refusal.find(std::string(to_string(type))), std::string::npos) << refusal;
        EXPECT_NE(refusal.find(other.id), std::string::npos) << refusal;
        EXPECT_NE(refusal.find(name), std::string::npos) << refusal;
      }
    }
  }
}

// The FP32 families refuse 16-bit tensors by name, and a 16-bit problem cannot carry another math mode.
TEST(TensorCoreFamilies, SixteenBitTensorsTakeFp32MathAndOnlyTheTensorCoreFamilies) {
  const ConvProblem fp32 = parse_problem("N=1,C=4,H=8,K=4,R=3");
  for (const char* name : {"implicit_gemm", "direct_tiled", "im2col_gemm", "winograd", "fft", "depthwise"}) {
    const std::string why = kernel_family(name).unsupported_reason(Problem(fp32).with_precision({ElementType::BF16, MathMode::FP32}), {},
                                                                   test::described_hopper());
    EXPECT_NE(why.find("bf16"), std::string::npos) << name << ": " << why;
  }
  ConvProblem bad = fp32;
  bad.type = ElementType::F16, bad.math = MathMode::TF32;
  try {
    bad.validate();
    ADD_FAILURE() << "fp16 tensors in tf32 math were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("type=fp16 takes math=fp32"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_precision("bf16").type, ElementType::BF16);
  EXPECT_EQ(parse_precision("fp16").math, MathMode::FP32);
  EXPECT_EQ(parse_precision("3xtf32").math, MathMode::TF32x3);
  EXPECT_THROW(parse_precision("int8"), InvalidArgument);
  EXPECT_EQ(to_string(parse_precision("bf16")), "bf16");
  EXPECT_EQ(to_string(parse_precision("tf32")), "tf32");
}

// A 16-bit plan's operands hold 2-byte elements, its bias K floats (the kernels read it as FP32): a bias buffer of K
// 16-bit elements would be read past its end, so Plan::run's size check must ask for 4 bytes each.
TEST(TensorCoreFamilies, SixteenBitOperandsAreTwoBytesAndTheBiasFloats) {
  PlanRequest request;
  request.problem = Problem(parse_problem("N=2,C=8,H=6,K=16,R=3")).with_precision(parse_precision("bf16"));
  request.epilogue.bias = true;
  request.family = "implicit_gemm_tc";
  request.use_tuning = false;
  const PlanDescriptor d = PlanDescriptor::create(test::described_hopper(), request);
  EXPECT_EQ(d.operand_bytes(0), size_t{2 * 8 * 6 * 6} * 2);
  EXPECT_EQ(d.operand_bytes(2), size_t{2 * 16 * 4 * 4} * 2);
  EXPECT_EQ(d.operand_bytes(kBiasOperand), size_t{16} * sizeof(float));
}

// Untuned plans on a Hopper take the tensor-core families exactly when the math mode asks for them; the defaults
// are valid for every AlexNet layer and direction, and the GEMMs of the dense layers.
TEST(TensorCoreFamilies, PlansChooseTensorCoresByMathModeWithValidDefaults) {
  const DeviceInfo hopper = test::described_hopper();
  std::vector<Problem> problems;
  for (const char* text : {"N=128,C=3,H=227,K=64,R=11,stride=4,pad=2", "N=128,C=64,H=27,K=192,R=5,pad=2",
                           "N=128,C=192,H=13,K=384,R=3,pad=1", "N=128,C=384,H=13,K=256,R=3,pad=1",
                           "N=128,C=256,H=13,K=256,R=3,pad=1", "N=100,C=1,H=28,K=32,R=5,pad=2"})
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      problems.push_back(parse_problem(text).with_direction(d));
  for (const char* text : {"M=4096,N=4096,K=4096", "M=100,N=256,K=3136,trans_b=1", "M=256,N=3136,K=100,trans_a=1",
                           "M=100,N=10,K=256,trans_b=1"})
    problems.push_back(parse_gemm(text));
  int thin_problems = 0;
  for (const Problem& base : problems) {
    // A GEMM thinner than one MMA tile (C=1 or 3 in backward-data) goes to the FP32 families, which compute the
    // tensor-core modes too, unless col2im_wgmma (strided backward-data) takes it.
    const KernelFamily& tc_family = kernel_family(base.is_conv() ? "implicit_gemm_tc" : "gemm_tc");
    const bool thin = !tc_family.untuned_poor_fit(base, hopper).empty();
    thin_problems += thin;
    for (MathMode math : {MathMode::FP32, MathMode::TF32, MathMode::TF32x3}) {
      PlanRequest request;
      request.problem = base.with_math(math);
      request.use_tuning = false;
      const PlanDescriptor d = PlanDescriptor::create(hopper, request);
      const std::string& family = d.family().name();
      const bool tc = family.find("_tc") != std::string::npos || family.find("_wgmma") != std::string::npos;
      // col2im_wgmma's GEMM has C/groups*R*S columns: it takes alex1's strided thin backward-data in tf32.
      const KernelFamily& col2im = kernel_family("col2im_wgmma");
      const bool col2im_takes = col2im.unsupported_reason(request.problem, {}, hopper).empty() &&
                                col2im.untuned_poor_fit(request.problem, hopper).empty();
      EXPECT_EQ(tc, math != MathMode::FP32 && (!thin || col2im_takes))
          << request.problem.to_string() << " -> " << d.describe();
      if (tc) EXPECT_LE(d.recipe().steps.front().geometry.dynamic_local_bytes, hopper.local_memory_optin_bytes);
    }
  }
  EXPECT_EQ(thin_problems, 2);  // the C=3 and C=1 layers' backward-data
}

// The wgmma families: CUDA on compute capability 9.0 only (refusals name the family, the device and the type or
// mode), bf16/fp16 and tf32 but not fp32 (3xtf32: implicit_gemm_wgmma only, whose kernel splits); valid defaults on every AlexNet layer and direction; untuned
// 16-bit plans on a Hopper take implicit_gemm_wgmma (an Ampere falls back to implicit_gemm_tc); strided backward-data
// runs by phases (one GEMM per phase on grid axis 2) and backward-filter copies dy transposed where it fits.
TEST(TensorCoreFamilies, WgmmaFamiliesSupportDefaultsAndPlans) {
  const DeviceInfo hopper = test::described_hopper();
  DeviceInfo ampere = hopper;
  ampere.architecture = "sm_80", ampere.id = "cuda:1", ampere.name = "NVIDIA A100 (described)";
  DeviceInfo nvidia_opencl = hopper;
  nvidia_opencl.backend = BackendKind::OpenCL, nvidia_opencl.vendor = "NVIDIA Corporation", nvidia_opencl.id = "opencl:1";
  const ConvProblem conv = parse_problem("N=2,C=16,H=10,K=32,R=3,pad=1");
  for (const char* name : {"implicit_gemm_wgmma", "im2col_wgmma"}) {
    const KernelFamily& family = kernel_family(name);
    EXPECT_NE(family.unsupported_reason(Problem(conv), {}, hopper).find("not fp32 math"), std::string::npos);
    const bool splits = std::string(name) == "implicit_gemm_wgmma";
    const std::string split_why = family.unsupported_reason(Problem(conv).with_math(MathMode::TF32x3), {}, hopper);
    if (splits) {
      EXPECT_EQ(split_why, "");
    } else {
      EXPECT_NE(split_why.find("3xtf32"), std::string::npos) << split_why;
    }
    std::vector<Precision> precisions = {Precision{ElementType::BF16, MathMode::FP32},
                                         Precision{ElementType::F16, MathMode::FP32},
                                         Precision{ElementType::F32, MathMode::TF32}};
    if (splits) precisions.push_back(Precision{ElementType::F32, MathMode::TF32x3});
    for (Precision precision : precisions) {
      const Problem pb = Problem(conv).with_precision(precision);
      EXPECT_EQ(family.unsupported_reason(pb, {}, hopper), "") << name;
      for (const DeviceInfo& other : {ampere, nvidia_opencl}) {
        const std::string why = family.unsupported_reason(pb, {}, other);
        EXPECT_NE(why.find(name), std::string::npos) << why;
        EXPECT_NE(why.find(other.id), std::string::npos) << why;
        EXPECT_NE(why.find(std::string(to_string(precision))), std::string::npos)
            << why;
      }
    }
  }
  for (const char* text : {"N=128,C=3,H=227,K=64,R=11,stride=4,pad=2", "N=128,C=64,H=27,K=192,R=5,pad=2",
                           "N=128,C=192,H=13,K=384,R=3,pad=1", "N=10000,C=1,H=28,K=32,R=5,pad=2"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      for (Precision precision : {Precision{ElementType::BF16, MathMode::FP32}, Precision{ElementType::F32, MathMode::TF32}}) {
        const Problem pb = Problem(parse_problem(text).with_direction(d)).with_precision(precision);
        for (const char* name : {"implicit_gemm_wgmma", "im2col_wgmma"}) {
          const KernelFamily& family = kernel_family(name);
          ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << name << " " << pb.to_string();
          const Config config = family.default_config(pb, hopper);
          EXPECT_EQ(config_problem(family, config, pb, hopper), "") << name << " " << pb.to_string();
          const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
          EXPECT_LE(recipe.workspace_bytes, workspace_limit(hopper)) << name << " " << pb.to_string();
          for (const LaunchStep& step : recipe.steps)
            EXPECT_LE(step.geometry.dynamic_local_bytes, hopper.local_memory_optin_bytes) << name;
        }
      }
      PlanRequest request;
      request.problem = Problem(parse_problem(text).with_direction(d)).with_precision({ElementType::BF16, MathMode::FP32});
      request.use_tuning = false;
      // The tensor-core family, unless it declares the layer a poor fit untuned (thin GEMMs: alex1's C=3 at stride 4,
      // Fashion-MNIST's C=1, backward-data): an FP32 family on FP32 copies (widened_*) takes it then.
      // On the Hopper implicit_gemm_nhwc_wgmma (forward, stride-1 backward-data), col2im_wgmma (strided
      // backward-data) or implicit_gemm_shifted_wgmma (backward-filter) comes first where it computes the layer and
      // fits it.
      const char* hopper_native = "implicit_gemm_wgmma";
      for (const char* first : {"implicit_gemm_nhwc_wgmma", "col2im_wgmma", "implicit_gemm_shifted_wgmma"}) {
        const KernelFamily& f = kernel_family(first);
        if (f.unsupported_reason(request.problem, {}, hopper).empty() && f.untuned_poor_fit(request.problem, hopper).empty())
          hopper_native = first;
      }
      for (const auto& [device, native] : {std::pair<const DeviceInfo*, const char*>{&hopper, hopper_native},
                                           {&ampere, "implicit_gemm_tc"}}) {
        const std::string chosen = PlanDescriptor::create(*device, request).family().name();
        if (kernel_family(native).untuned_poor_fit(request.problem, *device).empty()) {
          EXPECT_EQ(chosen, native) << text << " " << to_string(d);
        } else {
          EXPECT_TRUE(families::is_widened(kernel_family(chosen))) << chosen << " " << text << " " << to_string(d);
        }
      }
    }
  }
  // alex1's backward-data (stride 4): 16 phases on grid axis 2; backward-filter's dy transposed (a step before).
  const KernelFamily& implicit = kernel_family("implicit_gemm_wgmma");
  const Problem strided = Problem(parse_problem("N=128,C=3,H=227,K=64,R=11,stride=4,pad=2").with_direction(Direction::BackwardData))
                              .with_precision({ElementType::BF16, MathMode::FP32});
  const KernelRecipe phased = implicit.recipe(strided, {}, implicit.default_config(strided, hopper), hopper);
  EXPECT_EQ(phased.source.defines.at("PHASED"), "1");
  EXPECT_EQ(phased.steps.back().geometry.global[2], 16u);
  const Problem filter = Problem(parse_problem("N=128,C=192,H=13,K=384,R=3,pad=1").with_direction(Direction::BackwardFilter))
                             .with_precision({ElementType::BF16, MathMode::FP32});
  const KernelRecipe dyt = implicit.recipe(filter, {}, implicit.default_config(filter, hopper), hopper);
  EXPECT_EQ(dyt.source.defines.at("DY_T"), "1");
  EXPECT_EQ(dyt.steps.front().kernel, "wg_dy_transpose");
}

// implicit_gemm_nhwc_wgmma: CUDA on compute capability 9.0, bf16/fp16/tf32 (not fp32 or 3xtf32), forward and
// stride-1 backward-data (backward-filter and strided backward-data refused by name, implicit_gemm_wgmma's); its
// recipe copies the gathered tensor channels-last (channels per group padded to a 16-byte chunk), reorders the
// filters and runs the main kernel; first layers of few channels are a poor fit untuned.
TEST(TensorCoreFamilies, NhwcWgmmaSupportRecipeAndPoorFit) {
  const DeviceInfo hopper = test::described_hopper();
  DeviceInfo ampere = hopper;
  ampere.architecture = "sm_80", ampere.id = "cuda:1", ampere.name = "NVIDIA A100 (described)";
  const KernelFamily& family = kernel_family("implicit_gemm_nhwc_wgmma");
  const Precision bf16{ElementType::BF16, MathMode::FP32};
  const auto problem = [](const char* text, Direction d, Precision precision) {
    return Problem(parse_problem(text).with_direction(d)).with_precision(precision);
  };
  const char* layer = "N=4,C=12,H=10,K=20,R=3,pad=1,groups=2";
  for (Precision precision : {bf16, Precision{ElementType::F16, MathMode::FP32}, Precision{ElementType::F32, MathMode::TF32}}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData}) {
      const Problem pb = problem(layer, d, precision);
      ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
      const std::string why = family.unsupported_reason(pb, {}, ampere);
      EXPECT_NE(why.find("implicit_gemm_nhwc_wgmma"), std::string::npos) << why;
      EXPECT_NE(why.find("cuda:1"), std::string::npos) << why;
      const Config config = family.default_config(pb, hopper);
      EXPECT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
      const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
      ASSERT_EQ(recipe.steps.size(), 3u);
      EXPECT_EQ(recipe.steps[0].kernel, "wgn_to_channels_last");
      EXPECT_EQ(recipe.steps[1].kernel, "wgn_weights");
      EXPECT_EQ(recipe.steps[2].kernel, "implicit_gemm_nhwc_wgmma");
      // 6 (or 10) channels per group padded to a whole 16-byte chunk: 8 16-bit or 8 FP32 elements (two chunks).
      const int64_t chunk = precision.type == ElementType::F32 ? 4 : 8;
      const int64_t gathered = d == Direction::Forward ? 6 : 10;
      const int64_t cp = (gathered + chunk - 1) / chunk * chunk;
      EXPECT_EQ(recipe.source.defines.at("CP"), std::to_string(cp)) << pb.to_string();
      const int64_t bytes = precision.type == ElementType::F32 ? 4 : 2;
      const int64_t pixels = 100;  // 10 x 10 in and out (pad 1)
      EXPECT_GE(recipe.workspace_bytes, static_cast<uint64_t>(4 * pixels * 2 * cp * bytes)) << pb.to_string();
      EXPECT_EQ(recipe.steps[2].geometry.global[2], 2u);  // one layer of the grid per group
    }
  }
  EXPECT_NE(family.unsupported_reason(problem(layer, Direction::Forward, {ElementType::F32, MathMode::FP32}), {}, hopper)
                .find("not fp32 math"),
            std::string::npos);
  EXPECT_NE(family.unsupported_reason(problem(layer, Direction::Forward, {ElementType::F32, MathMode::TF32x3}), {}, hopper),
            "");
  EXPECT_NE(family.unsupported_reason(problem(layer, Direction::BackwardFilter, bf16), {}, hopper).find("implicit_gemm_wgmma"),
            std::string::npos);
  const std::string strided =
      family.unsupported_reason(problem("N=2,C=16,H=9,K=16,R=3,stride=2,pad=1", Direction::BackwardData, bf16), {}, hopper);
  EXPECT_NE(strided.find("stride 2x2"), std::string::npos) << strided;
  EXPECT_EQ(family.unsupported_reason(problem("N=2,C=16,H=9,K=16,R=3,stride=2,pad=1", Direction::Forward, bf16), {}, hopper), "");
  // alex1's 3 channels padded to 8 forward: a poor fit untuned; 5 of 8 is not.
  EXPECT_NE(family.untuned_poor_fit(problem("N=8,C=3,H=32,K=64,R=3,pad=1", Direction::Forward, bf16), hopper), "");
  EXPECT_EQ(family.untuned_poor_fit(problem("N=8,C=5,H=32,K=64,R=3,pad=1", Direction::Forward, bf16), hopper), "");
}

// implicit_gemm_shifted_wgmma: CUDA on compute capability 9.0, bf16/fp16/tf32, backward-filter only (the other
// directions refused by name); its recipe shifts x (one copy per filter column), lays dy's rows out padded, runs the
// main kernel and, split, sums the slices; output rows padded to more than twice their length are a poor fit untuned.
TEST(TensorCoreFamilies, ShiftedWgmmaSupportRecipeAndPoorFit) {
  const DeviceInfo hopper = test::described_hopper();
  DeviceInfo ampere = hopper;
  ampere.architecture = "sm_80", ampere.id = "cuda:1", ampere.name = "NVIDIA A100 (described)";
  const KernelFamily& family = kernel_family("implicit_gemm_shifted_wgmma");
  const Precision bf16{ElementType::BF16, MathMode::FP32};
  const auto problem = [](const char* text, Direction d, Precision precision) {
    return Problem(parse_problem(text).with_direction(d)).with_precision(precision);
  };
  const char* layer = "N=4,C=12,H=13,K=20,R=3,S=5,pad=1x2,groups=2";  // Q = 13
  for (Precision precision : {bf16, Precision{ElementType::F16, MathMode::FP32}, Precision{ElementType::F32, MathMode::TF32}}) {
    const Problem pb = problem(layer, Direction::BackwardFilter, precision);
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
    const std::string why = family.unsupported_reason(pb, {}, ampere);
    EXPECT_NE(why.find("implicit_gemm_shifted_wgmma"), std::string::npos) << why;
    EXPECT_NE(why.find("cuda:1"), std::string::npos) << why;
    for (int64_t split : {1, 2}) {
      Config config = family.default_config(pb, hopper);
      config["SPLIT_K"] = split;
      ASSERT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
      const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
      ASSERT_EQ(recipe.steps.size(), split == 1 ? 3u : 4u);
      EXPECT_EQ(recipe.steps[0].kernel, "wgs_shift_x");
      EXPECT_EQ(recipe.steps[1].kernel, "wgs_dy_rows");
      EXPECT_EQ(recipe.steps[2].kernel, "implicit_gemm_shifted_wgmma");
      if (split > 1) EXPECT_EQ(recipe.steps[3].kernel, "wgs_filter_reduce");
      // Q = 13 padded to a whole 16-byte chunk: 16 16-bit or FP32 elements.
      EXPECT_EQ(recipe.source.defines.at("QP"), "16") << pb.to_string();
      const int64_t bytes = precision.type == ElementType::F32 ? 4 : 2;
      const uint64_t shifted = 5 * 4 * 12 * 13 * 16 * bytes, dy_rows = 20 * 4 * 13 * 16 * bytes;
      const uint64_t partials = split > 1 ? 2 * 20 * 6 * 15 * 4 : 0;  // FP32, K x C/groups*R*S a slice
      EXPECT_GE(recipe.workspace_bytes, shifted + dy_rows + partials) << pb.to_string();
      EXPECT_LE(recipe.workspace_bytes, shifted + dy_rows + partials + 3 * 256) << pb.to_string();
      EXPECT_EQ(recipe.steps[2].geometry.global[2], static_cast<size_t>(2 * split));  // groups x slices
    }
  }
  for (Direction d : {Direction::Forward, Direction::BackwardData}) {
    const std::string why = family.unsupported_reason(problem(layer, d, bf16), {}, hopper);
    EXPECT_NE(why.find("computes backward-filter"), std::string::npos) << why;
  }
  EXPECT_NE(family.unsupported_reason(problem(layer, Direction::BackwardFilter, {ElementType::F32, MathMode::FP32}), {},
                                      hopper)
                .find("not fp32 math"),
            std::string::npos);
  // Q = 3 padded to 8: a poor fit untuned; Q = 4 and 13 (alex3-5) are not, nor Fashion-MNIST's C=1 (25 filter rows).
  EXPECT_NE(family.untuned_poor_fit(problem("N=8,C=64,H=3,K=64,R=3,pad=1", Direction::BackwardFilter, bf16), hopper), "");
  EXPECT_EQ(family.untuned_poor_fit(problem("N=8,C=64,H=4,K=64,R=3,pad=1", Direction::BackwardFilter, bf16), hopper), "");
  EXPECT_EQ(family.untuned_poor_fit(problem("N=8,C=64,H=13,K=64,R=3,pad=1", Direction::BackwardFilter, bf16), hopper), "");
  EXPECT_EQ(family.untuned_poor_fit(problem("N=100,C=1,H=28,K=32,R=5,pad=2", Direction::BackwardFilter, bf16), hopper), "");
}

// wgrad_nhwc_wgmma: channels-last 16-bit backward-filter only, whole 16-byte chunks of channels per group; one main
// kernel reading x and dy in place (no copies), a second that sums split-K slices; it claims the layers it computes
// ahead of implicit_gemm_shifted_wgmma untuned, which keeps NCHW, tf32 and odd channel counts.
TEST(TensorCoreFamilies, WgradNhwcWgmmaReadsChannelsLastInPlace) {
  const DeviceInfo hopper = test::described_hopper();
  const KernelFamily& family = kernel_family("wgrad_nhwc_wgmma");
  const Precision bf16{ElementType::BF16, MathMode::FP32}, fp16{ElementType::F16, MathMode::FP32};
  const auto problem = [](const char* text, Direction d, Precision precision) {
    return Problem(parse_problem(text).with_direction(d)).with_precision(precision);
  };
  const char* layer = "N=4,C=32,H=13,K=48,R=3,S=5,pad=1x2,groups=2,layout=nhwc";
  for (Precision precision : {bf16, fp16}) {
    const Problem pb = problem(layer, Direction::BackwardFilter, precision);
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
    EXPECT_NE(family.untuned_claim(pb, hopper), "");
    for (int64_t split : {1, 4}) {
      Config config = family.default_config(pb, hopper);
      config["SPLIT_K"] = split;
      ASSERT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
      const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
      ASSERT_EQ(recipe.steps.size(), split == 1 ? 1u : 2u);
      EXPECT_EQ(recipe.steps[0].kernel, "wgrad_nhwc_wgmma");
      EXPECT_EQ(recipe.steps[0].geometry.global[2], static_cast<size_t>(2 * split));  // groups x slices
      // Split: FP32 partials of dw (K x R*S*C/groups a slice), nothing else.
      EXPECT_EQ(recipe.workspace_bytes, split == 1 ? 0u : (4u * 48 * 15 * 16 * 4 + 255) / 256 * 256);
      if (split > 1) EXPECT_EQ(recipe.steps[1].kernel, "wgr_reduce");
    }
    PlanRequest request;
    request.problem = pb;
    request.use_tuning = false;
    EXPECT_EQ(PlanDescriptor::create(hopper, request).family().name(), "wgrad_nhwc_wgmma");
  }
  const auto refused = [&](const char* text, Direction d, Precision precision, const char* why) {
    const std::string reason = family.unsupported_reason(problem(text, d, precision), {}, hopper);
    EXPECT_NE(reason.find(why), std::string::npos) << text << ": " << reason;
    EXPECT_EQ(family.untuned_claim(problem(text, d, precision), hopper), "") << text;
  };
  refused(layer, Direction::Forward, bf16, "computes backward-filter");
  refused("N=4,C=32,H=13,K=48,R=3", Direction::BackwardFilter, bf16, "NCHW backward-filter");
  refused(layer, Direction::BackwardFilter, {ElementType::F32, MathMode::TF32}, "16-bit types only");
  refused("N=4,C=12,H=13,K=48,R=3,layout=nhwc", Direction::BackwardFilter, bf16, "multiples of 8");
  refused("N=4,C=32,H=13,K=20,R=3,layout=nhwc", Direction::BackwardFilter, bf16, "multiples of 8");
  // What it refuses goes to implicit_gemm_shifted_wgmma untuned, as before.
  PlanRequest request;
  request.problem = problem("N=4,C=12,H=13,K=48,R=3,layout=nhwc", Direction::BackwardFilter, bf16);
  request.use_tuning = false;
  EXPECT_EQ(PlanDescriptor::create(hopper, request).family().name(), "implicit_gemm_shifted_wgmma");
}

// implicit_gemm_nhwc_wgmma runs channels-last strided backward-data by phases (one block layer per phase of the
// stride, rows a phase's pixels) and claims it untuned; NCHW strided backward-data stays refused.
TEST(TensorCoreFamilies, NhwcWgmmaRunsStridedBackwardDataByPhases) {
  const DeviceInfo hopper = test::described_hopper();
  const KernelFamily& family = kernel_family("implicit_gemm_nhwc_wgmma");
  const Precision bf16{ElementType::BF16, MathMode::FP32};
  const Problem pb = Problem(parse_problem("N=4,C=64,H=15,W=14,K=128,R=3,stride=2x3,pad=1,groups=2,dir=bwd-data,layout=nhwc"))
                         .with_precision(bf16);
  ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "");
  EXPECT_NE(family.untuned_claim(pb, hopper), "");
  const Config config = family.default_config(pb, hopper);
  const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
  EXPECT_EQ(recipe.source.defines.at("PHASED"), "1");
  EXPECT_EQ(recipe.steps.back().geometry.global[2], 2u * 6u);  // groups x 2*3 phases
  // Rows: a phase's pixels, ceil(15/2) x ceil(14/3) an image.
  const int64_t rows = 4 * 8 * 5;
  EXPECT_EQ(recipe.steps.back().geometry.global[1], static_cast<size_t>((rows + 64 * config.at("WG_M") - 1) /
                                                                        (64 * config.at("WG_M"))));
  const Problem stride1 = Problem(parse_problem("N=4,C=64,H=15,K=128,R=3,pad=1,dir=bwd-data,layout=nhwc")).with_precision(bf16);
  EXPECT_EQ(family.recipe(stride1, {}, family.default_config(stride1, hopper), hopper).source.defines.count("PHASED"), 0u);
  EXPECT_EQ(family.untuned_claim(stride1, hopper), "");
  const Problem nchw = Problem(pb.conv().with_layout(Layout::NCHW));
  EXPECT_NE(family.unsupported_reason(nchw, {}, hopper).find("NCHW strided backward-data"), std::string::npos);
  PlanRequest request;
  request.problem = pb;
  request.use_tuning = false;
  EXPECT_EQ(PlanDescriptor::create(hopper, request).family().name(), "implicit_gemm_nhwc_wgmma");
}

// A new batch size compiles nothing new where the tiles stay: the channels-last wgmma kernels take the batch as an
// argument, so the recipes of batch 64 and 48 (the last batch of an epoch) differ in their launches only.
TEST(TensorCoreFamilies, ChannelsLastWgmmaProgramsServeEveryBatchSize) {
  const DeviceInfo hopper = test::described_hopper();
  const Precision bf16{ElementType::BF16, MathMode::FP32};
  for (const char* text : {"C=256,H=56,K=64,R=1,dir=fwd", "C=64,H=56,K=64,R=3,pad=1,dir=bwd-data",
                           "C=128,H=56,K=128,R=3,stride=2,pad=1,dir=bwd-data", "C=256,H=14,K=256,R=3,pad=1,dir=bwd-filter"}) {
    const auto recipe_at = [&](int64_t n) {
      const Problem pb = Problem(parse_problem(fmt::format("N={},{},layout=nhwc", n, text))).with_precision(bf16);
      const char* name = pb.conv().direction == Direction::BackwardFilter ? "wgrad_nhwc_wgmma" : "implicit_gemm_nhwc_wgmma";
      const KernelFamily& family = kernel_family(name);
      Config config = family.default_config(pb, hopper);
      if (pb.conv().direction == Direction::BackwardFilter) config["SPLIT_K"] = 4;  // the same split at both sizes
      EXPECT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
      return family.recipe(pb, {}, config, hopper);
    };
    const KernelRecipe a = recipe_at(64), b = recipe_at(48);
    EXPECT_EQ(a.source.defines, b.source.defines) << text;
    EXPECT_EQ(a.source.file, b.source.file) << text;
  }
}

// The Hopper families added for issue 14 on shapes outside the suites (N=1, large N, groups, dilation, odd sizes,
// asymmetric filters and strides): wherever a family computes the problem, its default configuration satisfies every
// one of its constraints and its recipe's workspace stays within the limit; in every mode it computes.
TEST(TensorCoreFamilies, NewWgmmaFamiliesHaveValidDefaultsOutsideTheSuites) {
  const DeviceInfo hopper = test::described_hopper();
  int checked = 0;
  for (const char* text : {"N=1,C=3,H=224,K=64,R=7,stride=2,pad=3", "N=20000,C=3,H=64,K=32,R=5,stride=2,pad=2",
                           "N=4096,C=16,H=9,W=13,K=24,R=3,S=5,stride=1x2,pad=1x2", "N=2,C=32,H=17,K=48,R=3,dilation=2,pad=2,groups=4",
                           "N=8,C=64,H=33,K=64,R=3,stride=3,dilation=2,pad=1,groups=2", "N=1,C=2048,H=7,K=512,R=1",
                           "N=64,C=96,H=5,K=80,R=5,pad=2", "N=300,C=12,H=28,K=18,R=3,stride=2,pad=1,groups=3",
                           "N=20000,C=32,H=32,K=8,R=7,stride=2,pad=3"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      for (Precision precision : {Precision{ElementType::BF16, MathMode::FP32}, Precision{ElementType::F16, MathMode::FP32},
                                  Precision{ElementType::F32, MathMode::TF32}, Precision{ElementType::F32, MathMode::TF32x3}}) {
        for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
          const Problem pb = Problem(parse_problem(text).with_direction(d).with_layout(layout)).with_precision(precision);
          for (const char* name : {"implicit_gemm_nhwc_wgmma", "implicit_gemm_shifted_wgmma", "col2im_wgmma",
                                   "wgrad_nhwc_wgmma"}) {
            const KernelFamily& family = kernel_family(name);
            if (!family.unsupported_reason(pb, {}, hopper).empty()) continue;
            const Config config = family.default_config(pb, hopper);
            ASSERT_EQ(config_problem(family, config, pb, hopper), "") << name << " " << pb.to_string();
            EXPECT_LE(family.recipe(pb, {}, config, hopper).workspace_bytes, workspace_limit(hopper))
                << name << " " << pb.to_string();
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 140);
}

// Untuned tf32 backward-filter of fewer than 128 filter rows goes to implicit_gemm_tc, which claims it (its smaller
// tiles fill the GPU there); wider layers and bf16 stay with implicit_gemm_shifted_wgmma.
TEST(TensorCoreFamilies, FewFilterRowsInTf32GoToImplicitGemmTc) {
  const DeviceInfo hopper = test::described_hopper();
  const auto chosen = [&](const char* text, Precision precision) {
    PlanRequest request;
    request.problem = Problem(parse_problem(text).with_direction(Direction::BackwardFilter)).with_precision(precision);
    request.use_tuning = false;
    return PlanDescriptor::create(hopper, request).family().name();
  };
  const Precision tf32{ElementType::F32, MathMode::TF32}, bf16{ElementType::BF16, MathMode::FP32};
  EXPECT_EQ(chosen("N=32,C=64,H=56,K=256,R=1", tf32), "implicit_gemm_tc");  // ResNet-50's 1x1 expansion: 64 rows
  EXPECT_EQ(chosen("N=64,C=24,H=56,K=144,R=1", tf32), "implicit_gemm_tc");  // MobileNetV2's: 24 rows
  EXPECT_EQ(chosen("N=32,C=64,H=56,K=256,R=1", bf16), "implicit_gemm_shifted_wgmma");
  EXPECT_EQ(chosen("N=32,C=1024,H=14,K=256,R=1", tf32), "implicit_gemm_shifted_wgmma");
  EXPECT_EQ(chosen("N=32,C=128,H=28,K=128,R=1", tf32), "implicit_gemm_shifted_wgmma");  // 128 rows
}

// fp16 has no tuned entries of its own: its untuned plans take the bf16 cost model's choice (the rank order alone took
// col2im_wgmma for strided backward-data of 32-128 channels, 1.7x cuDNN's time on the H100).
TEST(TensorCoreFamilies, Fp16UntunedPlansFollowBf16s) {
  const DeviceInfo hopper = test::described_hopper();
  const auto chosen = [&](const char* text, Direction d, ElementType type) {
    PlanRequest request;
    request.problem = Problem(parse_problem(text).with_direction(d)).with_precision({type, MathMode::FP32});
    return PlanDescriptor::create(hopper, request).family().name();
  };
  for (const char* text : {"N=32,C=128,H=56,K=128,R=3,stride=2,pad=1", "N=16,C=32,H=208,K=64,R=3,stride=2,pad=1",
                           "N=16,C=32,H=50,K=48,R=5,stride=3,pad=1", "N=32,C=256,H=13,K=384,R=3,pad=1"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      EXPECT_EQ(chosen(text, d, ElementType::F16), chosen(text, d, ElementType::BF16)) << text << " " << to_string(d);
    }
  }
  EXPECT_NE(chosen("N=32,C=128,H=56,K=128,R=3,stride=2,pad=1", Direction::BackwardData, ElementType::F16),
            "col2im_wgmma");
}

// col2im_wgmma: CUDA on compute capability 9.0, bf16/fp16/tf32, backward-data only; its recipe copies dy
// channels-last, reorders the filters, then a GEMM and a gather per chunk of IMAGES images (the last chunk shorter);
// unit-stride layers are a poor fit untuned (implicit_gemm_nhwc_wgmma's), alex1's 3 input channels are not.
TEST(TensorCoreFamilies, Col2imWgmmaSupportRecipeAndPoorFit) {
  const DeviceInfo hopper = test::described_hopper();
  DeviceInfo ampere = hopper;
  ampere.architecture = "sm_80", ampere.id = "cuda:1", ampere.name = "NVIDIA A100 (described)";
  const KernelFamily& family = kernel_family("col2im_wgmma");
  const Precision bf16{ElementType::BF16, MathMode::FP32};
  const auto problem = [](const char* text, Direction d, Precision precision) {
    return Problem(parse_problem(text).with_direction(d)).with_precision(precision);
  };
  const char* layer = "N=5,C=12,H=15,K=20,R=5,stride=2,pad=2,groups=2";  // P = Q = 8, 10 channels of dy a group
  for (Precision precision : {bf16, Precision{ElementType::F16, MathMode::FP32}, Precision{ElementType::F32, MathMode::TF32}}) {
    const Problem pb = problem(layer, Direction::BackwardData, precision);
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
    EXPECT_EQ(family.untuned_poor_fit(pb, hopper), "");
    const std::string why = family.unsupported_reason(pb, {}, ampere);
    EXPECT_NE(why.find("col2im_wgmma"), std::string::npos) << why;
    EXPECT_NE(why.find("cuda:1"), std::string::npos) << why;
    Config config = family.default_config(pb, hopper);
    config["IMAGES"] = 2;
    ASSERT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
    const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
    ASSERT_EQ(recipe.steps.size(), 2u + 2 * 3);  // chunks of 2, 2 and 1 images
    EXPECT_EQ(recipe.steps[0].kernel, "col2im_wgmma_dy");
    EXPECT_EQ(recipe.steps[1].kernel, "col2im_wgmma_weights");
    EXPECT_EQ(recipe.steps[2].kernel, "col2im_wgmma_gemm");
    EXPECT_EQ(recipe.steps[3].kernel, "col2im_wgmma_gather");
    EXPECT_EQ(recipe.steps[7].kernel, "col2im_wgmma_gather");
    EXPECT_EQ(recipe.steps[2].geometry.global[2], 2u);  // one layer of the grid per group
    // 10 channels a group padded to a 16-byte chunk: 16 16-bit or 12 FP32 elements; the columns are FP32.
    const int64_t kp = precision.type == ElementType::F32 ? 12 : 16;
    EXPECT_EQ(recipe.source.defines.at("KP"), std::to_string(kp));
    EXPECT_EQ(recipe.source.defines.at("CHUNK_ROWS"), "128");  // 2 images x 8 x 8
    const int64_t bytes = precision.type == ElementType::F32 ? 4 : 2;
    const uint64_t dyt = 5 * 64 * 2 * kp * bytes, wt = 2 * 150 * kp * bytes, col = 2 * 150 * 128 * 4;
    EXPECT_GE(recipe.workspace_bytes, dyt + wt + col);
    EXPECT_LE(recipe.workspace_bytes, dyt + wt + col + 3 * 256);
  }
  // 3xtf32: the residuals' copies of dy and the filters follow the big parts' (WS_LO_SHIFT FP32 elements later),
  // BLOCK_N at most 128, and each stage's shared memory doubled in the GEMM's launch.
  {
    const Problem pb = problem(layer, Direction::BackwardData, Precision{ElementType::F32, MathMode::TF32x3});
    ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
    Config config = family.default_config(pb, hopper);
    EXPECT_LE(config.at("BLOCK_N"), 128);
    config["IMAGES"] = 2;
    ASSERT_EQ(config_problem(family, config, pb, hopper), "");
    const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
    EXPECT_EQ(recipe.source.defines.at("SPLIT3"), "1");
    const uint64_t dyt = 5 * 64 * 2 * 12 * 4, wt = 2 * 150 * 12 * 4, col = 2 * 150 * 128 * 4;
    const uint64_t lo = std::stoull(recipe.source.defines.at("WS_LO_SHIFT")) * 4;
    EXPECT_GE(lo, dyt + wt);
    EXPECT_LE(lo, dyt + wt + 2 * 256);
    EXPECT_EQ(recipe.source.defines.at("WS_COL"), std::to_string(2 * lo));
    EXPECT_GE(recipe.workspace_bytes, 2 * (dyt + wt) + col);
    EXPECT_LE(recipe.workspace_bytes, 2 * lo + col + 256);
    const KernelRecipe tf32 = family.recipe(
        problem(layer, Direction::BackwardData, Precision{ElementType::F32, MathMode::TF32}), {}, config, hopper);
    EXPECT_EQ(recipe.steps[2].geometry.dynamic_local_bytes, 2 * tf32.steps[2].geometry.dynamic_local_bytes - 1024);
    config["BLOCK_N"] = 256;
    EXPECT_NE(config_problem(family, config, pb, hopper).find("BLOCK_N at most 128"), std::string::npos);
    const std::string fp32 =
        family.unsupported_reason(problem(layer, Direction::BackwardData, Precision{ElementType::F32, MathMode::FP32}),
                                  {}, hopper);
    EXPECT_NE(fp32.find("tf32 or 3xtf32"), std::string::npos) << fp32;
  }
  for (Direction d : {Direction::Forward, Direction::BackwardFilter}) {
    const std::string why = family.unsupported_reason(problem(layer, d, bf16), {}, hopper);
    EXPECT_NE(why.find("computes backward-data"), std::string::npos) << why;
  }
  EXPECT_NE(family.untuned_poor_fit(problem("N=8,C=64,H=13,K=64,R=3,pad=1", Direction::BackwardData, bf16), hopper)
                .find("implicit_gemm_nhwc_wgmma"),
            std::string::npos);
  EXPECT_EQ(family.untuned_poor_fit(problem("N=128,C=3,H=224,K=64,R=11,stride=4,pad=2", Direction::BackwardData, bf16),
                                    hopper),
            "");
  // It claims strided layers of few input channels (ahead of a cost model that cannot predict it), not wider ones.
  EXPECT_NE(family.untuned_claim(problem("N=128,C=3,H=224,K=64,R=11,stride=4,pad=2", Direction::BackwardData, bf16),
                                 hopper),
            "");
  EXPECT_EQ(family.untuned_claim(problem("N=32,C=128,H=56,K=128,R=3,stride=2,pad=1", Direction::BackwardData, bf16),
                                 hopper),
            "");
  EXPECT_EQ(family.untuned_claim(problem("N=8,C=3,H=32,K=64,R=3,pad=1", Direction::BackwardData, bf16), hopper), "");
}

// fft_tc on a Hopper: valid defaults in both modes and every direction, fft's workspace for the same tiles, fp32
// refused by name, and its claim: 5x5 layers of at least 32 channels whose batch fits one chunk within the 80 GB
// GPU's 1 GiB (alex2 and u8 at N=128), not where the workspace limit cuts the batch (u8's 96 -> 256 channels at
// N=512; Fashion-MNIST's conv2 at N=10000) nor on 3x3 layers (fewer than 25 taps: winograd's ground). Untuned plans
// take it there in tf32; in 3xtf32 fft_wgmma's claim of the same layers goes first.
TEST(TensorCoreFamilies, FftTcDefaultsClaimAndWorkspace) {
  const DeviceInfo hopper = test::described_hopper();
  const KernelFamily& family = kernel_family("fft_tc");
  const KernelFamily& fft = kernel_family("fft");
  struct Layer {
    const char* text;
    const char* untuned;  // the untuned plan's family in tf32 and 3xtf32
  };
  for (const Layer& layer : {Layer{"N=128,C=64,H=27,K=192,R=5,pad=2", "fft_tc"},
                             Layer{"N=128,C=96,H=27,K=256,R=5,pad=2", "fft_tc"},
                             Layer{"N=512,C=96,H=27,K=256,R=5,pad=2", "winograd_tc"},
                             Layer{"N=128,C=192,H=13,K=384,R=3,pad=1", "winograd_tc"}}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem base = parse_problem(layer.text).with_direction(d);
      EXPECT_NE(family.unsupported_reason(base, {}, hopper).find("not fp32"), std::string::npos);
      for (MathMode math : {MathMode::TF32, MathMode::TF32x3}) {
        const Problem pb = Problem(base).with_math(math);
        ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
        const Config config = family.default_config(pb, hopper);
        EXPECT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
        Config same = fft.default_config(Problem(base), hopper);
        for (const char* name : {"FFT_SIZE", "GAUSS", "BATCH_CHUNK", "SPLIT"}) same[name] = config.at(name);
        const size_t bytes = family.recipe(pb, {}, config, hopper).workspace_bytes;
        EXPECT_EQ(bytes, fft.recipe(Problem(base), {}, same, hopper).workspace_bytes) << pb.to_string();
        EXPECT_LE(bytes, workspace_limit(hopper));
        EXPECT_EQ(family.untuned_claim(pb, hopper).empty(), std::string(layer.untuned) != "fft_tc") << pb.to_string();
        PlanRequest request;
        request.problem = pb;
        request.use_tuning = false;
        // In 3xtf32 fft_wgmma claims fft_tc's layers first (FftWgmmaSupportDefaultsAndClaim).
        const std::string untuned =
            math == MathMode::TF32x3 && std::string(layer.untuned) == "fft_tc" ? "fft_wgmma" : layer.untuned;
        EXPECT_EQ(PlanDescriptor::create(hopper, request).family().name(), untuned) << pb.to_string();
      }
    }
  }
  const Problem fmnist2 = Problem(parse_problem("N=10000,C=32,H=14,K=64,R=5,pad=2")).with_math(MathMode::TF32);
  EXPECT_EQ(family.untuned_claim(fmnist2, hopper), "");
}

// fft_wgmma: fp32 tensors in tf32 and 3xtf32 on compute capability 9.0 only (an A100 and bf16 refused by name);
// valid defaults in every direction and both modes, on AlexNet's 5x5 layer and a small grouped layer with odd sizes
// (single-float loads); fft's workspace for the same tiles; the 3xtf32 defaults keep BLOCK_N within 128 (a tile's
// partial sums beside the accumulators); its untuned claim: fft_tc's layers (5x5, at least 32 channels, the batch in
// one chunk) in 3xtf32 only, where untuned plans take it; in tf32 they stay fft_tc's.
TEST(TensorCoreFamilies, FftWgmmaSupportDefaultsAndClaim) {
  const DeviceInfo hopper = test::described_hopper();
  DeviceInfo ampere = hopper;
  ampere.architecture = "sm_80", ampere.id = "cuda:1", ampere.name = "NVIDIA A100 (described)";
  const KernelFamily& family = kernel_family("fft_wgmma");
  const KernelFamily& fft = kernel_family("fft");
  for (const char* text : {"N=128,C=64,H=27,K=192,R=5,pad=2", "N=3,C=18,H=11,W=9,K=22,R=5,S=3,pad=2x1,groups=2"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem base = parse_problem(text).with_direction(d);
      EXPECT_NE(family.unsupported_reason(base, {}, hopper).find("not fp32 math"), std::string::npos);
      const std::string sixteen =
          family.unsupported_reason(Problem(base).with_precision({ElementType::BF16, MathMode::FP32}), {}, hopper);
      EXPECT_NE(sixteen.find("not bf16 tensors"), std::string::npos) << sixteen;
      for (MathMode math : {MathMode::TF32, MathMode::TF32x3}) {
        const Problem pb = Problem(base).with_math(math);
        ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
        const std::string why = family.unsupported_reason(pb, {}, ampere);
        EXPECT_NE(why.find("fft_wgmma"), std::string::npos) << why;
        EXPECT_NE(why.find("cuda:1"), std::string::npos) << why;
        const Config config = family.default_config(pb, hopper);
        EXPECT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
        if (math == MathMode::TF32x3) EXPECT_LE(config.at("BLOCK_N"), 128) << pb.to_string();
        Config same = fft.default_config(Problem(base), hopper);
        for (const char* name : {"FFT_SIZE", "GAUSS", "BATCH_CHUNK", "SPLIT"}) same[name] = config.at(name);
        const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
        EXPECT_EQ(recipe.workspace_bytes, fft.recipe(Problem(base), {}, same, hopper).workspace_bytes) << pb.to_string();
        EXPECT_EQ(recipe.source.defines.at("MATH_SPLIT"), math == MathMode::TF32x3 ? "1" : "0");
      }
    }
  }
  for (const char* text : {"N=128,C=64,H=27,K=192,R=5,pad=2", "N=512,C=96,H=27,K=256,R=5,pad=2",
                           "N=128,C=192,H=13,K=384,R=3,pad=1"}) {
    for (MathMode math : {MathMode::TF32, MathMode::TF32x3}) {
      const Problem pb = Problem(parse_problem(text)).with_math(math);
      // Only alex2 in 3xtf32: u8 at N=512 needs chunks, alex3 is 3x3 (winograd_tc's claim), tf32 is fft_tc's.
      const bool claims = math == MathMode::TF32x3 && std::string(text).find("N=128,C=64") == 0;
      EXPECT_EQ(family.untuned_claim(pb, hopper).empty(), !claims) << pb.to_string();
      PlanRequest request;
      request.problem = pb;
      request.use_tuning = false;
      EXPECT_EQ(PlanDescriptor::create(hopper, request).family().name() == "fft_wgmma", claims) << pb.to_string();
    }
  }
}

// winograd_tc on a Hopper: valid defaults on AlexNet's stride-1 layers in both modes and every direction (F(4x4,3x3)
// and F(2x2,5x5)), alpha-8 tiles only where the mode admits them (tf32, not 3xtf32), fp32 refused by name, and
// untuned plans that take it on these wide layers (its claim in tf32 and 3xtf32) but for the 5x5 one, which fft_tc
// (tf32) and fft_wgmma (3xtf32) claim first.
TEST(TensorCoreFamilies, WinogradTcDefaultsModesAndUntunedPlans) {
  const DeviceInfo hopper = test::described_hopper();
  const KernelFamily& family = kernel_family("winograd_tc");
  const KernelFamily& winograd = kernel_family("winograd");
  for (const char* text : {"N=128,C=64,H=27,K=192,R=5,pad=2", "N=128,C=192,H=13,K=384,R=3,pad=1",
                           "N=128,C=384,H=13,K=256,R=3,pad=1", "N=128,C=256,H=13,K=256,R=3,pad=1"}) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem base = parse_problem(text).with_direction(d);
      EXPECT_NE(family.unsupported_reason(base, {}, hopper).find("not fp32"), std::string::npos);
      for (MathMode math : {MathMode::TF32, MathMode::TF32x3}) {
        const Problem pb = Problem(base).with_math(math);
        ASSERT_EQ(family.unsupported_reason(pb, {}, hopper), "") << pb.to_string();
        const Config config = family.default_config(pb, hopper);
        EXPECT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
        EXPECT_EQ(config.at("M_TILE"), base.r == 3 ? 4 : 2) << pb.to_string();
        Config alpha8 = config;
        alpha8["M_TILE"] = base.r == 3 ? 6 : 4;
        EXPECT_EQ(config_problem(family, alpha8, pb, hopper).empty(), math == MathMode::TF32) << pb.to_string();
        // winograd's workspace for the same tile, chunk and slices.
        Config same = winograd.default_config(pb, hopper);
        for (const char* name : {"M_TILE", "BATCH_CHUNK", "SPLIT"}) same[name] = config.at(name);
        const size_t bytes = family.recipe(pb, {}, config, hopper).workspace_bytes;
        EXPECT_EQ(bytes, winograd.recipe(pb, {}, same, hopper).workspace_bytes);
        EXPECT_LE(bytes, workspace_limit(hopper));
        PlanRequest request;
        request.problem = pb;
        request.use_tuning = false;
        // AlexNet's stride-1 layers are wide (winograd::wide_layer_claim): untuned plans take winograd_tc on the 3x3
        // ones; on the 5x5 one fft_tc's claim goes first in tf32 and fft_wgmma's in 3xtf32 (the batch fits one chunk).
        const char* five = math == MathMode::TF32x3 ? "fft_wgmma" : "fft_tc";
        EXPECT_EQ(PlanDescriptor::create(hopper, request).family().name(), base.r == 3 ? "winograd_tc" : five)
            << pb.to_string();
      }
    }
  }
  // 7x7: alpha 8 at the smallest tile, which tf32 admits and 3xtf32 does not.
  const ConvProblem seven = parse_problem("N=2,C=16,H=15,K=16,R=7,pad=3");
  EXPECT_EQ(family.unsupported_reason(Problem(seven).with_math(MathMode::TF32), {}, hopper), "");
  EXPECT_NE(family.unsupported_reason(Problem(seven).with_math(MathMode::TF32x3), {}, hopper).find("alpha 8"),
            std::string::npos);
}

// winograd_tc.cl takes winograd.cl's transforms without its FP32 GEMM (gemm.cl, named first inside #if 0 so that
// winograd.cl's own include of it expands to nothing), and winograd.cl still has it.
TEST(TensorCoreFamilies, WinogradTcSourceHasTheTransformsAndNotTheFp32Gemm) {
  const std::string tc = load_kernel_source("winograd/winograd_tc.cl");
  const std::string simt = load_kernel_source("winograd/winograd.cl");
  for (const char* kernel : {"void winograd_input_transform(", "void winograd_filter_output_transform(",
                             "void winograd_gemm_tc("}) {
    EXPECT_NE(tc.find(kernel), std::string::npos) << kernel;
  }
  // gemm.cl's text stands once, between "#if 0" and "#endif", without compat.h (expanded above it).
  std::string gemm = load_kernel_source("gemm/gemm.cl");
  const std::string compat = load_kernel_source("common/compat.h");
  ASSERT_NE(gemm.find(compat), std::string::npos);
  gemm.erase(gemm.find(compat), compat.size());
  EXPECT_NE(tc.find("#if 0\n" + gemm + "#endif\n"), std::string::npos);
  const std::string kernel = "GEMM_GROUP_SHAPE gemm(";
  EXPECT_EQ(tc.find(kernel), tc.rfind(kernel));
  EXPECT_NE(simt.find(kernel), std::string::npos);
  EXPECT_EQ(simt.find("winograd_gemm_tc"), std::string::npos);
}

// 3xTF32 is held to the FP32 tolerance, TF32 to its own unit roundoff (2^-11): harness::tolerance by mode. 16-bit
// tensors: twice the type's unit roundoff (the output's rounding) plus the FP32 sum's error, linear in the length.
TEST(TensorCoreFamilies, ToleranceFollowsTheMathMode) {
  const ConvProblem base = parse_problem("N=2,C=64,H=8,K=8,R=3,pad=1");
  const double fp32 = harness::tolerance(Problem(base).with_math(MathMode::FP32));
  EXPECT_DOUBLE_EQ(harness::tolerance(Problem(base).with_math(MathMode::TF32x3)), fp32);
  EXPECT_DOUBLE_EQ(harness::tolerance(Problem(base).with_math(MathMode::TF32)), fp32 * 8192);  // 2^-11 / 2^-24
  const double length = 64 * 9;
  const double sum = 8 * std::ldexp(1.0, -24) * std::sqrt(length) + std::ldexp(1.0, -24) * length;
  EXPECT_DOUBLE_EQ(harness::tolerance(Problem(base).with_precision({ElementType::BF16, MathMode::FP32})),
                   2 * std::ldexp(1.0, -8) + sum);
  EXPECT_DOUBLE_EQ(harness::tolerance(Problem(base).with_precision({ElementType::F16, MathMode::FP32})),
                   2 * std::ldexp(1.0, -11) + sum);
}

// `family` for real on every device that runs it (CUDA and NVIDIA's OpenCL on sm_80+; CONVTUNE_CONFORMANCE_DEVICES
// limits them as for family_conformance_test): each problem in tf32 and 3xtf32, with the configurations `configs`
// gives for it (seeded from `seed`, one step a problem and mode), each checked in full against the reference.
// Skipped, saying why, where no device runs it (CI's PoCL).
namespace {

using ConfigsFor = std::function<std::vector<Config>(const Problem&, const DeviceInfo&, uint64_t seed)>;
void check_on_devices(const KernelFamily& family, const std::vector<Problem>& problems, uint64_t seed0,
                      const ConfigsFor& configs,
                      const std::vector<Precision>& precisions = {{ElementType::F32, MathMode::TF32},
                                                                  {ElementType::F32, MathMode::TF32x3}}) {
  const char* only = std::getenv("CONVTUNE_CONFORMANCE_DEVICES");
  int checks = 0;
  std::string why_none;
  for (Device* device : Registry::instance().all_devices()) {
    if (only && *only && ("," + std::string(only) + ",").find("," + device->info().id + ",") == std::string::npos) continue;
    uint64_t seed = seed0;
    for (const Problem& base : problems) {
      for (Precision precision : precisions) {
        const Problem pb = base.with_precision(precision);
        if (const std::string why = family.unsupported_reason(pb, {}, device->info()); !why.empty()) {
          if (why_none.find(device->info().id + ":") == std::string::npos) why_none += "; " + device->info().id + ": " + why;
          continue;
        }
        for (const Config& config : configs(pb, device->info(), ++seed)) {
          const harness::Check r = testing_support::check_plan(*device, pb, family.name(), config, seed);
          ++checks;
          EXPECT_TRUE(r.passed) << device->info().id << " " << family.name() << " " << pb.to_string() << " ["
                                << to_string(config) << "]: " << r.message;
        }
      }
    }
    std::cout << fmt::format("conformance: {} on {}: {} checks so far\n", family.name(), device->info().id, checks);
  }
  if (checks == 0) GTEST_SKIP() << "no device here runs " << family.name() << why_none;
}

}  // namespace

// gemm_tc: the cases above, sampled configurations plus the default and a split-K.
TEST(TensorCoreOnDevice, GemmTcMatchesTheReference) {
  const KernelFamily& family = kernel_family("gemm_tc");
  std::vector<Problem> problems;
  for (const char* text : kGemmCases) problems.push_back(parse_gemm(text));
  check_on_devices(family, problems, 900, [&](const Problem& pb, const DeviceInfo& device, uint64_t seed) {
    std::vector<Config> configs = SearchSpace(family, pb, device).sample(2, seed);
    configs.push_back(family.default_config(pb, device));
    Config split = configs.back();
    split["SPLIT_K"] = 4;
    if (config_problem(family, split, pb, device).empty()) configs.push_back(split);
    return configs;
  });
}

// gemm_tc's 16-bit kernel: the same cases plus multiples of 2 and 8 (4- and 16-byte copies), bf16 and fp16,
// sampled configurations plus the default and a split-K.
TEST(TensorCoreOnDevice, SixteenBitGemmTcMatchesTheReference) {
  const KernelFamily& family = kernel_family("gemm_tc");
  std::vector<Problem> problems;
  for (const char* text : kGemmCases) problems.push_back(parse_gemm(text));
  for (const char* text : {"M=18,N=22,K=30", "M=48,N=40,K=72,trans_a=1", "M=64,N=72,K=24,batch=2,trans_b=1,accumulate=1",
                           "M=256,N=512,K=1024", "M=100,N=256,K=3136,trans_b=1"})
    problems.push_back(parse_gemm(text));
  check_on_devices(
      family, problems, 1500,
      [&](const Problem& pb, const DeviceInfo& device, uint64_t seed) {
        std::vector<Config> configs = SearchSpace(family, pb, device).sample(2, seed);
        configs.push_back(family.default_config(pb, device));
        Config split = configs.back();
        split["SPLIT_K"] = 4;
        if (config_problem(family, split, pb, device).empty()) configs.push_back(split);
        return configs;
      },
      {{ElementType::BF16, MathMode::FP32}, {ElementType::F16, MathMode::FP32}});
}

// gemm_wgmma (A and B K-contiguous): edges in M and N, K a multiple of 16 bytes but not of a stage, batches with
// shared and strided operands, accumulation, long reductions split; bf16, fp16 and tf32, sampled configurations plus
// the default and a split-K.
TEST(TensorCoreOnDevice, GemmWgmmaMatchesTheReference) {
  const KernelFamily& family = kernel_family("gemm_wgmma");
  std::vector<Problem> problems;
  for (const char* text : {"M=7,N=9,K=8,trans_b=1", "M=64,N=64,K=64,trans_b=1", "M=130,N=72,K=200,trans_b=1",
                           "M=33,N=260,K=40,trans_b=1,batch=3", "M=40,N=24,K=16,trans_b=1,batch=4,stride_a=0",
                           "M=96,N=80,K=96,trans_b=1,accumulate=1", "M=256,N=512,K=1024,trans_b=1",
                           "M=100,N=256,K=3136,trans_b=1", "M=18,N=20,K=48,lda=56,ldb=64,ldc=30,trans_b=1"})
    problems.push_back(parse_gemm(text));
  check_on_devices(
      family, problems, 1600,
      [&](const Problem& pb, const DeviceInfo& device, uint64_t seed) {
        std::vector<Config> configs = SearchSpace(family, pb, device).sample(2, seed);
        configs.push_back(family.default_config(pb, device));
        Config split = configs.back();
        split["SPLIT_K"] = 4;
        if (config_problem(family, split, pb, device).empty()) configs.push_back(split);
        return configs;
      },
      {{ElementType::BF16, MathMode::FP32}, {ElementType::F16, MathMode::FP32}, {ElementType::F32, MathMode::TF32}});
}

// winograd_tc beyond the conformance cases (family_conformance_test covers the stride-1 3x3 and 5x5 ones): GEMMs
// larger than one block tile with 16-byte and single-float copies, several chunks of the batch (backward-filter
// adding into M across them), slices, every direction; sampled configurations plus the default and a chunked (and
// sliced) variant of it.
TEST(TensorCoreOnDevice, WinogradTcMatchesTheReference) {
  const KernelFamily& family = kernel_family("winograd_tc");
  std::vector<Problem> problems;
  for (const char* text : {"N=3,C=40,H=13,W=11,K=36,R=3,pad=1", "N=2,C=32,H=12,K=64,R=5,pad=2",
                           "N=5,C=20,H=9,K=24,R=3,pad=0,groups=2", "N=1,C=64,H=10,W=14,K=48,R=5,pad=1"})
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      problems.push_back(parse_problem(text).with_direction(d));
  check_on_devices(family, problems, 1300, [&](const Problem& pb, const DeviceInfo& device, uint64_t seed) {
    std::vector<Config> configs = SearchSpace(family, pb, device).sample(2, seed);
    configs.push_back(family.default_config(pb, device));
    Config chunked = configs.back();
    chunked["BATCH_CHUNK"] = 1;
    if (pb.conv().direction == Direction::BackwardFilter) chunked["SPLIT"] = 4;
    if (config_problem(family, chunked, pb, device).empty()) configs.push_back(chunked);
    return configs;
  });
}
