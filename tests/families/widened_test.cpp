// The widened families (src/families/widened.h): bf16 and fp16 tensors through the FP32 families on every device here
// (PoCL and the CPU backend in CI), checked in full against the float64 reference: GEMMs with accumulation and padded
// rows, a forward convolution with a pooling epilogue, untuned plans, and the staging copies under the workspace limit.
// family_conformance_test checks every widened convolution family's default on the standard cases.
#include <gtest/gtest.h>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "convtune/rounding.h"
#include "src/families/widened.h"
#include "tests/support/epilogue_check.h"
#include "tests/support/hopper_device.h"
#include "tests/support/plan_check.h"

using namespace convtune;

namespace {

// (device, the widened family that runs GEMMs there)
std::vector<std::pair<Device*, std::string>> gemm_targets() {
  std::vector<std::pair<Device*, std::string>> out;
  for (Device* d : Registry::instance().all_devices()) {
    if (d->info().backend == BackendKind::Cpu) out.emplace_back(d, "widened_cpu_gemm");
    else if (d->info().can_run_kernels) out.emplace_back(d, "widened_gemm");
  }
  return out;
}

Device* first_kernel_device() {
  for (Device* d : Registry::instance().all_devices())
    if (d->info().can_run_kernels) return d;
  return nullptr;
}

ConvProblem small_conv(ElementType type) {
  ConvProblem pb = parse_problem("N=2,C=5,H=12,W=12,K=6,R=3,S=3,pad=1");
  pb.type = type;
  return pb;
}

}  // namespace

TEST(Widened, SixteenBitGemmsWithAccumulationAndPaddedRows) {
  const char* cases[] = {"M=7,N=9,K=5", "M=33,N=17,K=65,trans_b=1", "M=9,N=16,K=12,lda=15,ldb=20,ldc=18",
                         "M=10,N=11,K=33,accumulate=1", "M=5,N=7,K=64,batch=2,accumulate=1,trans_a=1"};
  int checks = 0;
  for (const auto& [device, family] : gemm_targets()) {
    for (ElementType type : {ElementType::BF16, ElementType::F16}) {
      uint64_t seed = 40;
      for (const char* text : cases) {
        GemmProblem g = parse_gemm(text);
        g.type = type;
        const Problem pb(g);
        ASSERT_EQ(kernel_family(family).unsupported_reason(pb, {}, device->info()), "") << text;
        const auto result = testing_support::check_plan(*device, pb, family, std::nullopt, ++seed);
        EXPECT_TRUE(result.passed) << device->info().id << " " << family << " " << to_string(type) << " " << text
                                   << ": " << result.message;
        ++checks;
      }
    }
  }
  EXPECT_GT(checks, 0);
}

TEST(Widened, ForwardWithBiasReluAndPoolingRoundsThePooledOutput) {
  Device* device = first_kernel_device();
  if (!device) GTEST_SKIP() << "no device runs kernels here (PoCL missing)";
  Epilogue epilogue;
  epilogue.bias = epilogue.relu = true;
  epilogue.pool = 2;
  for (ElementType type : {ElementType::BF16, ElementType::F16}) {
    const ConvProblem pb = small_conv(type);
    std::vector<float> x = testing_support::random_values(static_cast<size_t>(pb.x_elements()), 3);
    std::vector<float> w = testing_support::random_values(static_cast<size_t>(pb.w_elements()), 4);
    const std::vector<float> bias = testing_support::random_values(static_cast<size_t>(pb.k), 5);  // FP32 always
    round_to_type(type, x.data(), x.size());
    round_to_type(type, w.data(), w.size());
    const std::vector<float> want = testing_support::host_forward(pb, epilogue, x, w, bias);
    const Plan plan = Plan::create(*device, {pb, epilogue, "widened_direct_tiled", std::nullopt});
    ASSERT_EQ(plan.descriptor().operand_bytes(2), want.size() * 2);
    // 16-bit buffers, y followed by canaries the rounding of the pooled output must leave alone.
    const auto encoded = [&](const std::vector<float>& v, size_t extra) {
      std::vector<uint16_t> bits(v.size() + extra, 0x7BCD);
      encode_elements(type, v.data(), bits.data(), v.size());
      auto buffer = device->allocate(bits.size() * 2);
      device->queue().write(*buffer, bits.data(), bits.size() * 2);
      return buffer;
    };
    const auto xb = encoded(x, 0), wb = encoded(w, 0), yb = encoded(std::vector<float>(want.size(), NAN), 16);
    auto bb = device->allocate(bias.size() * sizeof(float));
    device->queue().write(*bb, bias.data(), bias.size() * sizeof(float));
    plan.run({xb.get(), wb.get(), yb.get(), bb.get()});
    std::vector<uint16_t> bits(want.size() + 16);
    device->queue().read(*yb, bits.data(), bits.size() * 2);
    for (size_t i = want.size(); i < bits.size(); ++i) EXPECT_EQ(bits[i], 0x7BCD) << "canary " << i - want.size();
    std::vector<float> got(want.size());
    decode_elements(type, bits.data(), got.data(), got.size());
    // One rounding of each output to the type (relative to the largest output: ReLU's zeros and pooled maxima).
    EXPECT_LE(testing_support::relative_max_error(got, want), unit_roundoff(type, MathMode::FP32) + 1e-5)
        << to_string(type);
  }
}

TEST(Widened, UntunedSixteenBitPlansRunOnDevicesWithoutTensorCores) {
  int plans = 0;
  for (Device* device : Registry::instance().all_devices()) {
    if (!device->info().can_run_kernels && device->info().backend != BackendKind::Cpu) continue;
    for (Direction direction : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      ConvProblem pb = small_conv(ElementType::BF16);
      pb.direction = direction;
      PlanRequest request;
      request.problem = pb;
      request.use_tuning = false;
      const PlanDescriptor plan = PlanDescriptor::create(device->info(), request);
      EXPECT_TRUE(families::is_widened(plan.family())) << device->info().id << ": " << plan.describe();
      // The FP32 copies of x, w and y are the plan's own buffers beside its workspace.
      // (each aligned to KernelRecipe::kStagingAlignment, as a caller's workspace holds them).
      const size_t copies = 4 * (2 * 5 * 12 * 12 + 6 * 5 * 9 + 2 * 6 * 12 * 12);
      EXPECT_GE(plan.memory_bytes(), plan.workspace_bytes() + copies);
      EXPECT_LT(plan.memory_bytes(), plan.workspace_bytes() + copies + 4 * KernelRecipe::kStagingAlignment);
      const auto result = testing_support::check_plan(*device, pb, plan.family().name(), plan.config(), 11);
      EXPECT_TRUE(result.passed) << device->info().id << " " << plan.describe() << ": " << result.message;
      ++plans;
    }
  }
  EXPECT_GT(plans, 0);
}

TEST(Widened, TheStagingCopiesCountAgainstTheWorkspaceLimit) {
  Device* device = first_kernel_device();
  if (!device) GTEST_SKIP() << "no device runs kernels here (PoCL missing)";
  const ConvProblem pb = small_conv(ElementType::F16);
  const KernelFamily& family = kernel_family("widened_implicit_gemm");
  // The copies take 13,752 bytes, 14,336 as a plan lays them out (each at a 256-byte boundary after the workspace).
  const DeviceInfo tight = with_workspace_limit(device->info(), 1000);
  const std::string why = family.unsupported_reason(pb, {}, tight);
  EXPECT_NE(why.find("FP32 copies of the operands (14336 bytes) are over the workspace limit (1000 bytes)"),
            std::string::npos)
      << why;
  PlanRequest request;
  request.problem = pb;
  request.family = family.name();
  request.workspace_limit = 1000;
  EXPECT_THROW(PlanDescriptor::create(device->info(), request), Unsupported);
}

TEST(Widened, FamiliesSayWhatTheyComputeAndDeclareTheirBound) {
  Device* device = first_kernel_device();
  if (!device) GTEST_SKIP() << "no device runs kernels here (PoCL missing)";
  const KernelFamily& family = kernel_family("widened_winograd");
  const ConvProblem fp32 = small_conv(ElementType::F32);
  EXPECT_NE(family.unsupported_reason(fp32, {}, device->info()).find("fp32 tensors go to winograd itself"),
            std::string::npos);
  // Products of 16-bit inputs are exact in the FP32 twin; Winograd's transforms round in FP32, far below what a
  // 16-bit result is held to: the bound stays the 16-bit direct sum's.
  for (ElementType type : {ElementType::BF16, ElementType::F16}) {
    const ConvProblem pb = small_conv(type);
    EXPECT_EQ(family.error_factor(pb, family.default_config(pb, device->info())), 1.0) << to_string(type);
  }
}

TEST(Widened, TensorCoreTwinsServeBf16NotFp16) {
  // The _tc families' twins multiply in TF32 (2^-11): bf16 results (2^-8) absorb their transforms' rounding, fp16's
  // (2^-11) do not (widened_winograd_tc's fp16 results measured 3x over fp16's tolerance on an H100).
  const DeviceInfo hopper = test::described_hopper();
  for (const char* name : {"widened_winograd_tc", "widened_fft_tc"}) {
    const KernelFamily& family = kernel_family(name);
    EXPECT_EQ(family.unsupported_reason(small_conv(ElementType::BF16), {}, hopper), "") << name;
    const std::string why = family.unsupported_reason(small_conv(ElementType::F16), {}, hopper);
    EXPECT_NE(why.find("multiplies in tf32 (unit roundoff 2^-11), too coarse for fp16 results"), std::string::npos)
        << name << ": " << why;
  }
}

TEST(Widened, StagingCopiesAreRangesOfTheCallersWorkspace) {
  // With external_workspace (the Python package's PyTorch path) a widened plan takes its FP32 copies from the
  // workspace each call passes, after the workspace proper: one plan may then run on several streams at once.
  Device& cpu = Registry::instance().find("cpu");
  const ConvProblem pb = small_conv(ElementType::BF16);
  PlanRequest request;
  request.problem = pb;
  request.use_tuning = false;
  const PlanDescriptor descriptor = PlanDescriptor::create(cpu.info(), request);
  ASSERT_TRUE(families::is_widened(descriptor.family())) << descriptor.describe();
  const KernelRecipe& recipe = descriptor.recipe();
  ASSERT_EQ(recipe.staging_bytes.size(), 3u);
  EXPECT_EQ(recipe.staging_offset(0) % KernelRecipe::kStagingAlignment, 0u);
  EXPECT_GE(recipe.staging_offset(0), recipe.workspace_bytes);
  EXPECT_EQ(descriptor.memory_bytes(), recipe.staging_offset(3));
  const Plan plan(cpu, descriptor, /*external_workspace=*/true);
  harness::Workload workload(cpu, pb, 21);
  const Operands operands = workload.operands();
  EXPECT_THROW(plan.run(operands, nullptr), InvalidArgument);
  const auto short_workspace = cpu.allocate(plan.memory_bytes() - 1);
  EXPECT_THROW(plan.run(operands, short_workspace.get()), InvalidArgument);
  const auto workspace = cpu.allocate(plan.memory_bytes());
  workload.poison();
  plan.run(operands, workspace.get());
  const harness::Check check = workload.verify_full();
  EXPECT_TRUE(check.passed) << check.message;
  // Devices without buffer views (OpenCL) make widened plans with their own staging only.
  if (Device* opencl = first_kernel_device(); opencl && opencl->info().backend == BackendKind::OpenCL) {
    const PlanDescriptor on_opencl = PlanDescriptor::create(opencl->info(), request);
    ASSERT_TRUE(families::is_widened(on_opencl.family()));
    EXPECT_THROW(Plan(*opencl, on_opencl, true), Unsupported);
  }
}
