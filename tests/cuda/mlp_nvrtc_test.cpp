// The MLP kernels (src/kernels/mlp/mlp.cl) compile to sm_90 cubins through NVRTC without a GPU, in the shapes the
// trainer picks on an H100/H200 (75 groups of 2 hidden neurons), with a single group, and at other sizes.
#include <gtest/gtest.h>

#include "src/backend/cuda/nvrtc_compiler.h"
#include "tests/support/hopper_device.h"
#include "src/backend/kernel_sources.h"
#include "src/mlp/mlp_kernels.h"

using namespace convtune;

namespace {

DeviceInfo hopper() { return test::described_hopper(); }

void expect_compiles(const mlp::MlpKernelShape& shape) {
  const std::string text = load_kernel_source(shape.source.file);
  const auto options = cuda::cuda_program_options("sm_90", shape.source.defines, shape.source.options);
  const auto cubin = cuda::compile_cuda_to_cubin(text, options, shape.source.file);
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(static_cast<char>(cubin[1]), 'E');  // ELF: a cubin
}

}  // namespace

TEST(MlpNvrtc, KernelsCompileForSm90) {
  const auto automatic = mlp::mlp_kernel_shape(hopper(), 784, 150, 10, 0);
  EXPECT_EQ(automatic.groups, 75);
  EXPECT_EQ(automatic.hidden_per_group, 2);
  EXPECT_TRUE(automatic.w1_local);
  expect_compiles(automatic);
  expect_compiles(mlp::mlp_kernel_shape(hopper(), 784, 150, 10, 1));
  expect_compiles(mlp::mlp_kernel_shape(hopper(), 100, 37, 3, 0));
  // The rounding math modes (MLP_MATH 1-3: tf32, bf16, fp16).
  for (const char* mode : {"tf32", "bf16", "fp16"})
    expect_compiles(mlp::mlp_kernel_shape(hopper(), 784, 150, 10, 0, parse_precision(mode)));
}
