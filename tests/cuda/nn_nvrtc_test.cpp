// The network layers' CUDA code compiles to sm_90 cubins through NVRTC (no GPU needed): nn/nn.cl, the dense
// layers' GEMMs as Runtime::gemm builds them, and the CNN's convolution plans (every direction, plus the fused
// inference epilogue) as the default configurations on an H100/H200.
#include <gtest/gtest.h>

#include "convtune/extension/kernel_family.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "tests/support/hopper_device.h"
#include "src/backend/kernel_sources.h"

using namespace convtune;

namespace {

DeviceInfo hopper() { return test::described_hopper(); }

void expect_compiles(const ProgramSource& source, const std::string& what) {
  const std::string text = load_kernel_source(source.file);
  const auto options = cuda::cuda_program_options("sm_90", source.defines, source.options);
  try {
    const auto cubin = cuda::compile_cuda_to_cubin(text, options, source.file);
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(static_cast<char>(cubin[1]), 'E') << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

}  // namespace

TEST(NnNvrtc, LayerKernelsGemmsAndCnnPlansCompileForSm90) {
  expect_compiles({"nn/nn.cl", {}, {}}, "nn/nn.cl");
  const DeviceInfo device = hopper();
  // The lenet dense layers at batch 64: forward (x W^T), dW (dy^T x), dx (dy W), as Runtime::gemm asks the gemm
  // family for them, with its defaults on a Hopper GPU (split-K included).
  const KernelFamily& gemm = kernel_family("gemm");
  for (const char* text : {"M=64,N=256,K=3136,trans_b=1", "M=256,N=3136,K=64,trans_a=1", "M=64,N=3136,K=256",
                           "M=64,N=10,K=256,trans_b=1"}) {
    const Problem g = parse_gemm(text);
    ASSERT_EQ(gemm.unsupported_reason(g, {}, device), "") << text;
    expect_compiles(gemm.recipe(g, {}, gemm.default_config(g, device), device).source, std::string("gemm ") + text);
  }
  const KernelFamily& implicit = kernel_family("implicit_gemm");
  const KernelFamily& direct = kernel_family("direct_tiled");
  for (const char* text : {"N=64,C=1,H=28,K=32,R=5,pad=2", "N=64,C=32,H=14,K=64,R=5,pad=2"}) {
    const ConvProblem base = parse_problem(text);
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = base.with_direction(d);
      const Epilogue epilogue{d == Direction::Forward, false, 1};
      ASSERT_EQ(implicit.unsupported_reason(pb, epilogue, device), "") << pb.to_string();
      expect_compiles(implicit.recipe(pb, epilogue, implicit.default_config(pb, device), device).source,
                      "implicit_gemm " + pb.to_string());
    }
    const Epilogue fused{true, true, 2};
    ASSERT_EQ(direct.unsupported_reason(base, fused, device), "") << base.to_string();
    expect_compiles(direct.recipe(base, fused, direct.default_config(base, device), device).source,
                    "direct_tiled fused " + base.to_string());
  }
}
