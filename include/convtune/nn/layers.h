// The layers convtune's networks are made of: Conv2d, Dense, activations, pooling, Flatten.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "convtune/epilogue.h"
#include "convtune/nn/layer.h"
#include "convtune/plan.h"

namespace convtune::nn {

// 2-D convolution with bias, stride 1, square kernel and padding. Every direction runs through a Plan (forward with
// the bias fused on kernel devices, backward-data for dx, backward-filter for dw), created once per batch size and
// reused: of `family` when one is named, else the tuning database's choice; on the CPU backend, its C++ families.
// With a 16-bit runtime (bf16, fp16) the plans compute 16-bit tensors converted from and back to the layer's FP32
// ones (weights, activations and gradients stay FP32 between steps; dy scaled per tensor).
// The bias gradient is a reduction kernel (a host loop on the CPU backend). For inference, set_fused_epilogue()
// folds a following ReLU and 2x2 max-pool into the forward plan (the family must support the epilogue; see
// Network::fuse_for_inference).
class Conv2d final : public Layer {
 public:
  Conv2d(Runtime& runtime, std::string name, int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t pad,
         std::string family = "");

  std::string kind() const override { return "conv2d"; }
  std::string spec() const override;
  std::vector<int64_t> output_shape(const std::vector<int64_t>& input) const override;
  void forward(const DeviceTensor& x, const DeviceTensor& y) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, const DeviceTensor* dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  void initialize(uint64_t seed) override;

  // Bias, ReLU and pool after the convolution in one forward plan of `family` (inference only: backward
  // needs the pre-pool activations that a fused forward never writes).
  void set_fused_epilogue(const Epilogue& epilogue, const std::string& family);
  const Epilogue& fused_epilogue() const { return fused_; }
  // The plans' description for reports ("implicit_gemm[...]", or "threaded" on the CPU backend).
  std::string algorithm() const;
  ConvProblem problem(int64_t batch, Direction direction) const;

 private:
  struct Plans {
    std::optional<Plan> forward, backward_data, backward_filter;
    std::shared_ptr<Buffer> scratch;  // the CPU backend's pre-epilogue output
    // 16-bit convolutions (Runtime::conv_type): the forward's x and w converted (kept for the backward directions),
    // the 16-bit output (y, then dx or dw), the scaled gradient dy, and dy's max |value| bits (its scale).
    std::shared_ptr<Buffer> x16, w16, out16, dy16, dy_max;
  };
  bool sixteen_bit() const;
  // A buffer of at least `bytes` in `slot`, reallocated only when it is too small.
  Buffer& scratch(std::shared_ptr<Buffer>& slot, size_t bytes);
  Plans& plans_for(int64_t batch);
  // The plan in `slot`, made on first use.
  const Plan& plan(std::optional<Plan>& slot, const ConvProblem& problem, const Epilogue& epilogue,
                   const std::string& family);

  Runtime& runtime_;
  int64_t in_, out_, kernel_, pad_;
  std::string family_;
  Epilogue fused_;  // only bias (training) unless fused for inference
  std::string fused_family_;
  Parameter weight_, bias_;
  std::map<int64_t, Plans> plans_;
};

// Fully connected: y (N x out) = x (N x in) * W^T + b, W stored out x in, through GEMM plans (the gemm family on
// kernel devices with the tuning database's parameters, cpu_gemm on the CPU backend). Any input shape is read as
// N x (product of the rest).
class Dense final : public Layer {
 public:
  Dense(Runtime& runtime, std::string name, int64_t in_features, int64_t out_features);
  std::string kind() const override { return "dense"; }
  std::string spec() const override;
  std::vector<int64_t> output_shape(const std::vector<int64_t>& input) const override;
  void forward(const DeviceTensor& x, const DeviceTensor& y) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, const DeviceTensor* dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  void initialize(uint64_t seed) override;

 private:
  Runtime& runtime_;
  int64_t in_, out_;
  Parameter weight_, bias_;
};

enum class ActivationKind { Relu = 0, Sigmoid = 1, Tanh = 2 };  // values shared with nn/nn.cl

class Activation final : public Layer {
 public:
  Activation(Runtime& runtime, std::string name, ActivationKind kind);
  std::string kind() const override;
  std::string spec() const override { return kind(); }
  std::vector<int64_t> output_shape(const std::vector<int64_t>& input) const override { return input; }
  void forward(const DeviceTensor& x, const DeviceTensor& y) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, const DeviceTensor* dx) override;

 private:
  Runtime& runtime_;
  ActivationKind activation_;
};

enum class PoolKind { Max = 0, Average = 1 };  // values shared with nn/nn.cl

// Non-overlapping pooling (window = stride = size) over NCHW; rows/columns beyond a multiple of size are dropped.
class Pool final : public Layer {
 public:
  Pool(Runtime& runtime, std::string name, PoolKind kind, int64_t size);
  std::string kind() const override { return pool_ == PoolKind::Max ? "maxpool" : "avgpool"; }
  std::string spec() const override;
  std::vector<int64_t> output_shape(const std::vector<int64_t>& input) const override;
  void forward(const DeviceTensor& x, const DeviceTensor& y) override;
  void backward(const DeviceTensor& x, const DeviceTensor& y, const DeviceTensor& dy, const DeviceTensor* dx) override;
  int64_t size() const { return size_; }
  PoolKind pool_kind() const { return pool_; }

 private:
  Runtime& runtime_;
  PoolKind pool_;
  int64_t size_;
};

// N x C x H x W -> N x (C*H*W); the same memory (NCHW is already row-major per image).
class Flatten final : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  std::string kind() const override { return "flatten"; }
  std::string spec() const override { return "flatten"; }
  std::vector<int64_t> output_shape(const std::vector<int64_t>& input) const override;
  void forward(const DeviceTensor&, const DeviceTensor&) override {}
  void backward(const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor*) override {}
  bool aliases_input() const override { return true; }
};

}  // namespace convtune::nn
