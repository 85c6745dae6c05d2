// Conv2d with a 16-bit runtime (bf16, fp16): inputs converted from FP32, the 16-bit plans, outputs converted back,
// dy scaled per tensor for FP16. Runs on PoCL with the tensor cores emulated (CONVTUNE_EMULATE_TENSOR_CORES), against
// the same layer in FP32 on the same values; also the conversion kernels alone, and a short bf16 training run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "convtune/data/idx.h"
#include "convtune/error.h"
#include "convtune/nn/layers.h"
#include "convtune/nn/trainer.h"
#include "convtune/rounding.h"
#include "tests/nn/nn_test_support.h"

namespace convtune::nn {
namespace {

using testing::random_values;

Device* pocl() {
  for (Device* d : Registry::instance().all_devices())
    if (d->info().backend == BackendKind::OpenCL && d->info().can_run_kernels) return d;
  return nullptr;
}

// Sets CONVTUNE_EMULATE_TENSOR_CORES=1 for one test and restores what was there.
class EmulatedTensorCores {
 public:
  EmulatedTensorCores() {
    if (const char* old = std::getenv("CONVTUNE_EMULATE_TENSOR_CORES")) old_ = old;
    setenv("CONVTUNE_EMULATE_TENSOR_CORES", "1", 1);
  }
  ~EmulatedTensorCores() {
    if (old_.empty()) unsetenv("CONVTUNE_EMULATE_TENSOR_CORES");
    else setenv("CONVTUNE_EMULATE_TENSOR_CORES", old_.c_str(), 1);
  }

 private:
  std::string old_;
};

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d / std::max(n, 1e-300));
}

struct ConvResult {
  std::vector<float> y, dx, dw, db;
};

// One forward and backward of a 6->8 channel 3x3 layer on fixed inputs; dy = `dy_scale` * random.
ConvResult run_conv(Device& device, Precision precision, float dy_scale) {
  Runtime runtime(device, precision);
  Conv2d conv(runtime, "conv", 6, 8, 3, 1, precision.type == ElementType::F32 ? "implicit_gemm" : "implicit_gemm_tc");
  conv.initialize(5);
  runtime.upload(conv.parameters()[1]->value, random_values(8, 9, -0.5f, 0.5f));
  const std::vector<int64_t> shape = {3, 6, 10, 9};
  DeviceTensor x = runtime.allocate(shape), dx = runtime.allocate(shape);
  DeviceTensor y = runtime.allocate(conv.output_shape(shape)), dy = runtime.allocate(y.shape);
  runtime.upload(x, random_values(x.size(), 3));
  std::vector<float> dyv = random_values(dy.size(), 4);
  for (float& v : dyv) v *= dy_scale;
  runtime.upload(dy, dyv);
  conv.forward(x, y);
  conv.backward(x, y, dy, &dx);
  return {runtime.download(y), runtime.download(dx), runtime.download(conv.parameters()[0]->grad),
          runtime.download(conv.parameters()[1]->grad)};
}

TEST(SixteenBitConv, ConversionKernelsRoundToNearestEvenAndScaleByPowersOfTwo) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  Runtime runtime(*device);
  std::vector<float> values = random_values(1000, 21, -3.0f, 3.0f);
  values.insert(values.end(), {0.0f, -0.0f, 1e-6f, 6e-8f, 65504.0f, 70000.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048});
  const int64_t count = static_cast<int64_t>(values.size());
  const DeviceTensor x = runtime.allocate({count});
  DeviceTensor back = runtime.allocate({count});
  runtime.upload(x, values);
  const auto bits = runtime.allocate_bytes(static_cast<size_t>(count) * 2);
  const auto max_bits = runtime.allocate_bytes(4);
  for (ElementType type : {ElementType::BF16, ElementType::F16}) {
    runtime.to_16bit(*x.buffer, *bits, count, type);
    runtime.from_16bit(*bits, *back.buffer, count, type);
    const std::vector<float> got = runtime.download(back);
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(got[i], round_to_type(type, values[i])) << to_string(type) << " " << values[i];
  }
  // Scaled: the largest magnitude (70000) goes to [0.5, 1) and comes back exactly.
  runtime.abs_max_bits(*x.buffer, *max_bits, count);
  uint32_t max_value_bits = 0;
  runtime.queue().read(*max_bits, &max_value_bits, 4);
  float max_value = 0;
  std::memcpy(&max_value, &max_value_bits, 4);
  EXPECT_EQ(max_value, 70000.0f);
  runtime.to_16bit(*x.buffer, *bits, count, ElementType::F16, max_bits.get());
  std::vector<uint16_t> half(static_cast<size_t>(count));
  runtime.queue().read(*bits, half.data(), half.size() * 2);
  EXPECT_EQ(fp16_to_fp32(half[static_cast<size_t>(count) - 3]), round_to_type(ElementType::F16, 70000.0f / 131072.0f));
  runtime.from_16bit(*bits, *back.buffer, count, ElementType::F16, max_bits.get());
  const std::vector<float> got = runtime.download(back);
  for (size_t i = 0; i < values.size(); ++i) {
    const float want = round_to_type(ElementType::F16, values[i] / 131072.0f) * 131072.0f;
    EXPECT_EQ(got[i], want) << values[i];
  }
}

TEST(SixteenBitConv, LayerMatchesFp32InEveryDirectionAndFp16GradientsSurviveTinyValues) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const EmulatedTensorCores emulate;
  // dy of 1e-7: in FP16 unscaled that is subnormal or zero (FP16's smallest normal is 6.1e-5); scaled per tensor it
  // keeps FP16's full 11 bits.
  for (float dy_scale : {1.0f, 1e-7f}) {
    const ConvResult fp32 = run_conv(*device, {ElementType::F32, MathMode::FP32}, dy_scale);
    for (ElementType type : {ElementType::BF16, ElementType::F16}) {
      const ConvResult r = run_conv(*device, {type, MathMode::FP32}, dy_scale);
      // Inputs and weights rounded to the type (relative 2^-8 or 2^-11 each), sums over 54 (y, dx) and 270 (dw)
      // products in FP32, the result rounded once.
      const double bound = type == ElementType::BF16 ? 2e-2 : 3e-3;
      const std::string what = fmt::format("{} dy x{}", to_string(type), dy_scale);
      EXPECT_LT(relative_l2(r.y, fp32.y), bound) << what << " y";
      EXPECT_LT(relative_l2(r.dx, fp32.dx), bound) << what << " dx";
      EXPECT_LT(relative_l2(r.dw, fp32.dw), bound) << what << " dw";
      EXPECT_LT(relative_l2(r.db, fp32.db), 1e-6) << what << " db (FP32 in every precision)";
    }
  }
}

// lenet-small in bf16 for one epoch on 1000 images learns like the FP32 network does (the tensor cores emulated on
// PoCL: the 16-bit path end to end, through train_epoch and evaluate).
TEST(SixteenBitConv, Bf16LenetSmallLearns) {
  Device* device = pocl();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const std::string dir = data::default_data_dir();
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is missing (Debian package dataset-fashion-mnist)";
  const EmulatedTensorCores emulate;
  const data::DatasetFiles files = data::find_dataset_files(dir);
  const data::LabelledImages train = data::load_idx_pair(files.train_images, files.train_labels, 10, 1000);
  const data::LabelledImages test = data::load_idx_pair(files.test_images, files.test_labels, 10, 300);
  Runtime runtime(*device, Precision{ElementType::BF16, MathMode::FP32});
  auto net = make_network(runtime, "lenet-small");
  net->initialize(1);
  auto loss = make_softmax_cross_entropy();
  auto adam = make_adam(2e-3);
  std::mt19937_64 rng(1);
  const EpochResult epoch = train_epoch(*net, *loss, *adam, train, 50, rng);
  EXPECT_LT(epoch.loss, 2.1);  // chance is ln 10 = 2.30
  const EvalResult eval = evaluate(*net, test, 100, false);
  EXPECT_GE(eval.accuracy, 0.45) << "ten classes: chance is 0.1";
  // Each convolution on a family that computes 16-bit tensors: the tensor cores' (emulated), or an FP32 family on
  // FP32 copies (widened_*) where the untuned plan finds implicit_gemm_tc a poor fit (conv1's single channel).
  int tensor_core_layers = 0;
  for (const auto& layer : net->layers()) {
    const auto* conv = dynamic_cast<const Conv2d*>(layer.get());
    if (!conv) continue;
    const std::string algorithm = conv->algorithm();
    tensor_core_layers += algorithm.find("implicit_gemm_tc") != std::string::npos;
    EXPECT_TRUE(algorithm.find("implicit_gemm_tc") != std::string::npos || algorithm.rfind("widened_", 0) == 0)
        << algorithm;
  }
  EXPECT_GE(tensor_core_layers, 1);
}

TEST(SixteenBitConv, CpuBackendRefusesSixteenBitConvolutionsNamingTheType) {
  Runtime runtime(Registry::instance().find("cpu"), Precision{ElementType::BF16, MathMode::FP32});
  Conv2d conv(runtime, "conv", 2, 2, 3, 1);
  conv.initialize(1);
  DeviceTensor x = runtime.allocate({1, 2, 5, 5}), y = runtime.allocate({1, 2, 5, 5});
  try {
    conv.forward(x, y);
    ADD_FAILURE() << "the CPU backend ran a bf16 convolution";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 training on the CPU backend is not supported"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace convtune::nn
