// A short CNN training run on a Fashion-MNIST subset learns (CPU backend, about two seconds on two cores).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "convtune/data/idx.h"
#include "convtune/nn/trainer.h"

namespace convtune::nn {
namespace {

TEST(CnnTraining, OneEpochOn2000ImagesBeatsChanceClearly) {
  const std::string dir = data::default_data_dir();
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is missing (Debian package dataset-fashion-mnist)";
  const data::DatasetFiles files = data::find_dataset_files(dir);
  const data::LabelledImages train = data::load_idx_pair(files.train_images, files.train_labels, 10, 2000);
  const data::LabelledImages test = data::load_idx_pair(files.test_images, files.test_labels, 10, 500);
  Runtime runtime(Registry::instance().find("cpu"));
  auto net = make_network(runtime, "lenet-small");
  net->initialize(1);
  auto loss = make_softmax_cross_entropy();
  auto adam = make_adam(1e-3);
  std::mt19937_64 rng(1);
  const EpochResult epoch = train_epoch(*net, *loss, *adam, train, 64, rng);
  EXPECT_LT(epoch.loss, 2.0);  // chance is ln 10 = 2.30
  const EvalResult eval = evaluate(*net, test, 100, true);
  EXPECT_GE(eval.accuracy, 0.5) << "ten classes: chance is 0.1";
  ASSERT_EQ(eval.steps.size(), eval.step_ms.size());
  // Fused inference must give the same predictions as the unfused network.
  net->fuse_for_inference("direct_tiled");
  EXPECT_EQ(net->steps().front(), "conv1+relu1+pool1");
  EXPECT_DOUBLE_EQ(evaluate(*net, test, 100, false).accuracy, eval.accuracy);
}

}  // namespace
}  // namespace convtune::nn

namespace convtune::nn {
namespace {

// On a kernel device (PoCL on CI) the fused conv+bias+ReLU+pool forward of direct_tiled gives the same logits as
// the unfused implicit_gemm + ReLU + pool steps.
TEST(CnnInference, FusedEpilogueMatchesTheUnfusedNetworkOnOpenCL) {
  Device* device = nullptr;
  for (Device* d : Registry::instance().all_devices()) {
    if (d->info().backend == BackendKind::OpenCL && d->info().can_run_kernels) device = d;
  }
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  Runtime runtime(*device);
  auto net = make_network(runtime, "lenet-small");
  net->initialize(3);
  std::vector<float> pixels(4 * 28 * 28);
  std::mt19937_64 rng(5);
  for (float& p : pixels) p = static_cast<float>(rng() % 256) / 255.0f;
  runtime.upload(net->input(4), pixels);
  const std::vector<float> unfused = runtime.download(net->forward(4));
  const auto report = net->fuse_for_inference("direct_tiled");
  ASSERT_EQ(net->steps().front(), "conv1+relu1+pool1") << (report.empty() ? "" : report.front());
  runtime.upload(net->input(4), pixels);
  const std::vector<float> fused = runtime.download(net->forward(4));
  ASSERT_EQ(fused.size(), unfused.size());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_NEAR(fused[i], unfused[i], 1e-4f * (1 + std::fabs(unfused[i]))) << i;
}

}  // namespace
}  // namespace convtune::nn
