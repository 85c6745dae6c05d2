// Batch normalisation in training, fused with the ReLU and the residual add around it: the kernels a training step
// runs between a convolution and the next one. User API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "convtune/backend.h"
#include "convtune/conv_problem.h"
#include "convtune/types.h"

namespace convtune {

// The tensor a batch norm normalises (a convolution's output y: N x C x H x W in `layout`, elements of `type`) and
// what follows it in the block: a = act(batch_norm(y) + residual), act a ReLU (clamped at relu_max when positive:
// ReLU6) or none. Statistics, parameters and their gradients are float32, one per channel.
struct BatchNormProblem {
  ElementType type = ElementType::F32;
  Layout layout = Layout::NCHW;
  int64_t n = 1, c = 1, h = 1, w = 1;
  bool residual = false;
  bool relu = false;
  float relu_max = 0;  // > 0 (with relu): the clamp
  int64_t elements() const { return n * c * h * w; }
  std::string to_string() const;  // "bn bf16 nhwc 64x256x56x56 +residual+relu"
};

// The buffers of BatchNormPlan::forward. Tensors have the problem's shape, type and layout; vectors are C float32s.
struct BatchNormForward {
  const Buffer* y = nullptr;         // the batch norm's input (a convolution's output)
  const Buffer* gamma = nullptr;     // scale (all ones for a batch norm without affine parameters)
  const Buffer* beta = nullptr;      // shift (all zeros likewise)
  const Buffer* residual = nullptr;  // the shortcut, with BatchNormProblem::residual only
  const Buffer* stats = nullptr;     // written: mean, then biased variance of y over N, H, W (2C floats)
  const Buffer* a = nullptr;         // written: act((y - mean) gamma / sqrt(var + eps) + beta + residual)
  // Both or neither: running statistics moved `momentum` of the way to the batch's (the variance unbiased), as
  // BatchNorm2d's training step does.
  const Buffer* running_mean = nullptr;
  const Buffer* running_var = nullptr;
  float momentum = 0.1f;
  float eps = 1e-5f;
};

// The buffers of BatchNormPlan::backward: forward()'s y, a (the ReLU's mask; unused without a ReLU), stats, gamma
// and eps, the gradient da of a, and what it writes.
struct BatchNormBackward {
  const Buffer* da = nullptr;
  const Buffer* a = nullptr;
  const Buffer* y = nullptr;
  const Buffer* stats = nullptr;
  const Buffer* gamma = nullptr;
  const Buffer* dy = nullptr;         // written: the gradient of y
  const Buffer* dgamma = nullptr;     // written (C floats)
  const Buffer* dbeta = nullptr;      // written (C floats)
  const Buffer* dresidual = nullptr;  // written with BatchNormProblem::residual: the gradient reaching the shortcut
  float eps = 1e-5f;
};

// A batch norm's kernels compiled for one device, for every tensor of its problem's sizes: a pass for the statistics
// (partial sums by chunks of rows, then one work-item per channel) and one elementwise pass, each way. Buffers are the
// device's (wrap_cuda_buffer, wrap_host_buffer... for memory the caller has); `workspace` holds workspace_bytes().
// Safe to call from several threads at once (runs take turns).
class BatchNormPlan {
 public:
  // Throws InvalidArgument naming the field for a problem with a non-positive size or more elements than the
  // kernels index, or a clamp without a ReLU.
  BatchNormPlan(Device& device, const BatchNormProblem& problem);
  ~BatchNormPlan();
  BatchNormPlan(BatchNormPlan&&) noexcept;
  BatchNormPlan& operator=(BatchNormPlan&&) noexcept;

  const BatchNormProblem& problem() const;
  size_t workspace_bytes() const;

  // Enqueue on `queue`; throw InvalidArgument naming a missing or short buffer, or a bad eps or momentum.
  void forward(Queue& queue, const BatchNormForward& args, const Buffer& workspace) const;
  void backward(Queue& queue, const BatchNormBackward& args, const Buffer& workspace) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convtune
