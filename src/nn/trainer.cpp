// Training and evaluation loops: host-side batching and shuffling, device-side everything else.
#include "convtune/nn/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "convtune/error.h"

namespace convtune::nn {

namespace {

int64_t image_size(const data::LabelledImages& d) { return static_cast<int64_t>(d.rows) * d.cols; }

// Copies the chosen examples into the network's input and the label buffer.
void upload_batch(Network& network, const data::LabelledImages& d, const int64_t* indices, int64_t batch,
                  const Buffer& labels, std::vector<float>& pixels, std::vector<int32_t>& classes) {
  const int64_t size = image_size(d);
  pixels.resize(static_cast<size_t>(batch * size));
  classes.resize(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) {
    std::copy_n(d.pixels.begin() + indices[i] * size, size, pixels.begin() + i * size);
    classes[i] = d.labels[indices[i]];
  }
  network.runtime().upload(network.input(batch), pixels.data());
  network.runtime().queue().write(const_cast<Buffer&>(labels), classes.data(), classes.size() * sizeof(int32_t));
}

int64_t count_correct(const std::vector<float>& logits, const std::vector<int32_t>& classes) {
  const int64_t n = static_cast<int64_t>(classes.size()), width = static_cast<int64_t>(logits.size()) / n;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto row = logits.begin() + i * width;
    correct += std::max_element(row, row + width) - row == classes[i];
  }
  return correct;
}

void check_shape(const Network& network, const data::LabelledImages& d) {
  const auto& in = network.input_shape();
  if (in.size() != 3 || in[0] != 1 || in[1] != d.rows || in[2] != d.cols) {
    throw InvalidArgument(fmt::format("network {} takes {} inputs, the data has {}x{} images", network.architecture(),
                                      shape_string(in), d.rows, d.cols));
  }
}

}  // namespace

EpochResult train_epoch(Network& network, Loss& loss, Optimizer& optimizer, const data::LabelledImages& data,
                        int64_t batch, std::mt19937_64& rng, const std::function<void(int64_t, double)>& progress) {
  check_shape(network, data);
  if (batch < 1) throw InvalidArgument(fmt::format("batch size {} must be at least 1", batch));
  batch = std::min(batch, data.count);
  const int64_t steps = data.count / batch;
  std::vector<int64_t> order(static_cast<size_t>(data.count));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Runtime& runtime = network.runtime();
  const auto labels = runtime.allocate_bytes(static_cast<size_t>(batch) * sizeof(int32_t));
  const std::vector<Parameter*> parameters = network.parameters();
  std::vector<float> pixels;
  std::vector<int32_t> classes;
  EpochResult result;
  int64_t correct = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    upload_batch(network, data, order.data() + s * batch, batch, *labels, pixels, classes);
    const DeviceTensor& out = network.forward(batch);
    result.loss += loss.forward_backward(runtime, out, *labels, network.output_grad(batch));
    correct += count_correct(runtime.download(out), classes);
    network.backward(batch);
    optimizer.step(runtime, parameters);
    if (progress) progress((s + 1) * batch, result.loss / static_cast<double>(s + 1));
  }
  runtime.queue().finish();
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.images = steps * batch;
  result.loss /= static_cast<double>(std::max<int64_t>(steps, 1));
  result.train_accuracy = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(result.images, 1));
  return result;
}

EvalResult evaluate(Network& network, const data::LabelledImages& data, int64_t batch, bool time_layers,
                    const std::function<void(int64_t)>& progress) {
  check_shape(network, data);
  if (batch < 1) throw InvalidArgument(fmt::format("batch size {} must be at least 1", batch));
  Runtime& runtime = network.runtime();
  EvalResult result;
  result.steps = network.steps();
  result.step_ms.assign(result.steps.size(), 0.0);
  std::vector<int64_t> order(static_cast<size_t>(data.count));
  std::iota(order.begin(), order.end(), 0);
  std::vector<float> pixels;
  std::vector<int32_t> classes;
  std::vector<double> layer_ms;
  int64_t correct = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < data.count; first += batch) {
    const int64_t n = std::min(batch, data.count - first);
    const auto labels = runtime.allocate_bytes(static_cast<size_t>(n) * sizeof(int32_t));
    upload_batch(network, data, order.data() + first, n, *labels, pixels, classes);
    const DeviceTensor& out = network.forward(n, time_layers ? &layer_ms : nullptr);
    correct += count_correct(runtime.download(out), classes);
    for (size_t i = 0; i < layer_ms.size() && time_layers; ++i) result.step_ms[i] += layer_ms[i];
    if (progress) progress(first + n);
  }
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.images = data.count;
  result.accuracy = data.count ? static_cast<double>(correct) / static_cast<double>(data.count) : 0.0;
  return result;
}

}  // namespace convtune::nn
