// Example 3: a small CNN built from convtune's layers, trained for a few steps on one fixed random batch through
// the public nn API (forward, loss, backward, optimiser step); the loss must fall.
#include <convtune/convtune.h>
#include <convtune/nn/layers.h>
#include <convtune/nn/loss.h>
#include <convtune/nn/network.h>
#include <convtune/nn/optimizer.h>

#include <cstdio>
#include <random>
#include <vector>

int main() try {
  convtune::Device& device = convtune::device("best");
  convtune::nn::Runtime runtime(device);
  // 1x12x12 images: conv 3x3 (1 -> 4 channels), ReLU, 2x2 max-pool, flatten, dense 144 -> 3 classes.
  convtune::nn::Network net(runtime, "example", {1, 12, 12});
  net.add(std::make_unique<convtune::nn::Conv2d>(runtime, "conv1", 1, 4, 3, 1, ""));
  net.add(std::make_unique<convtune::nn::Activation>(runtime, "relu1", convtune::nn::ActivationKind::Relu));
  net.add(std::make_unique<convtune::nn::Pool>(runtime, "pool1", convtune::nn::PoolKind::Max, 2));
  net.add(std::make_unique<convtune::nn::Flatten>("flatten"));
  net.add(std::make_unique<convtune::nn::Dense>(runtime, "fc1", 4 * 6 * 6, 3));
  net.initialize(7);

  const int64_t batch = 8;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> images(static_cast<size_t>(batch * 144));
  for (float& v : images) v = uniform(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 3);
  auto label_buffer = runtime.allocate_bytes(labels.size() * sizeof(int32_t));
  runtime.queue().write(*label_buffer, labels.data(), labels.size() * sizeof(int32_t));

  auto loss = convtune::nn::make_softmax_cross_entropy();
  auto optimizer = convtune::nn::make_adam(0.01);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    runtime.upload(net.input(batch), images);
    const convtune::nn::DeviceTensor& out = net.forward(batch);
    last = loss->forward_backward(runtime, out, *label_buffer, net.output_grad(batch));
    if (step == 0) first = last;
    net.backward(batch);
    optimizer->step(runtime, net.parameters());
  }
  std::printf("on %s: loss %.4f after one step, %.4f after 20 (conv plan %s)\n", device.info().id.c_str(), first,
              last, static_cast<convtune::nn::Conv2d&>(*net.layers()[0]).algorithm().c_str());
  return last < first ? 0 : 1;
} catch (const convtune::Error& e) {
  std::fprintf(stderr, "train_step: %s\n", e.what());
  return 2;
}
