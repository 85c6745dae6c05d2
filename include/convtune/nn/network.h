// Network: a sequence of layers with the activations and gradients of each batch size kept on the device,
// forward/backward over them, per-layer timing and inference fusion; and the named architectures.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "convtune/nn/layer.h"

namespace convtune::nn {

class Network {
 public:
  // input: one sample's shape (C, H, W for images).
  Network(Runtime& runtime, std::string architecture, std::vector<int64_t> input);

  Runtime& runtime() const { return *runtime_; }
  const std::string& architecture() const { return architecture_; }
  const std::vector<int64_t>& input_shape() const { return input_; }
  void add(std::unique_ptr<Layer> layer);
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  std::vector<Parameter*> parameters() const;
  void initialize(uint64_t seed);

  // The batch's input tensor (N x input), to upload into before forward().
  const DeviceTensor& input(int64_t batch);
  // Runs every layer not fused away; with layer_ms, each step's device time (ms) in steps() order, each
  // measured with Queue::elapsed_ms (which waits, so only for evaluation reports).
  const DeviceTensor& forward(int64_t batch, std::vector<double>* layer_ms = nullptr);
  // Where the loss writes dL/d(output) for this batch size.
  const DeviceTensor& output_grad(int64_t batch);
  // Back through every layer from output_grad(batch), after forward() of the same batch: fills each
  // parameter's gradient.
  void backward(int64_t batch);

  // Folds each conv2d -> relu -> maxpool 2x2 run into the convolution's forward plan (bias+ReLU+pool epilogue
  // of `family`) where the family computes it on this device; returns what was fused or why not. Inference
  // only: backward() refuses afterwards.
  std::vector<std::string> fuse_for_inference(const std::string& family);
  bool fused() const { return !fused_away_.empty(); }
  // What forward() runs, one entry per timed step: "conv1+relu1+pool1", "fc1".
  std::vector<std::string> steps() const;

 private:
  struct Batch {
    std::vector<DeviceTensor> activations;  // [0] input, [i+1] output of layer i
    std::vector<DeviceTensor> gradients;    // same shapes: dL/d activation
  };
  Batch& batch_state(int64_t batch);

  Runtime* runtime_;
  std::string architecture_;
  std::vector<int64_t> input_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::set<size_t> fused_away_;  // layers folded into the convolution before them
  std::map<int64_t, Batch> batches_;
};

// The architectures model files name. "lenet": conv5x5 1->32 pad 2, ReLU, maxpool 2, conv5x5 32->64 pad 2,
// ReLU, maxpool 2, dense 3136->256, ReLU, dense 256->10 (softmax cross-entropy on top). "lenet-small": the
// same with 8/16 channels and 64 hidden units, for quick tests. conv_family: the kernel family of the
// convolutions on kernel devices (empty: each plan's choice from the tuning database).
std::vector<std::string> architecture_names();
std::unique_ptr<Network> make_network(Runtime& runtime, const std::string& architecture,
                                      const std::string& conv_family = "");

}  // namespace convtune::nn
