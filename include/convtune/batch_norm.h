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

// A batch norm's kernels compiled for one device, for every tensor of its problem's sizes. Operands are buffers of
// that device (wrap_cuda_buffer, wrap_host_buffer... for memory the caller has); float32 vectors of C:
//   params  gamma then beta (2C), stats  mean then biased variance of y over N, H, W (2C), dparams  dgamma then
//   dbeta (2C). `workspace` holds workspace_bytes(). Safe to call from several threads at once (runs take turns).
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

  // stats = mean and biased variance of y; a = act((y - mean) * gamma / sqrt(var + eps) + beta + residual), in y's
  // type (FP32 arithmetic, one rounding). `residual` (y's shape, type and layout) only with problem().residual.
  void forward(Queue& queue, const Buffer& y, const Buffer& params, const Buffer* residual, const Buffer& stats,
               const Buffer& a, float eps, const Buffer& workspace) const;
  // The gradients of forward() from da (the gradient of a): dy, dparams, and with a residual dresidual (the
  // gradient reaching the shortcut). `a` is forward()'s output (the ReLU's mask; ignored without a ReLU), y, stats
  // and params forward()'s inputs and statistics, `eps` the same as forward()'s.
  void backward(Queue& queue, const Buffer& da, const Buffer& a, const Buffer& y, const Buffer& stats,
                const Buffer& params, float eps, const Buffer& dy, const Buffer& dparams, const Buffer* dresidual,
                const Buffer& workspace) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convtune
