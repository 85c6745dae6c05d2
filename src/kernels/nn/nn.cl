// The network layers' element-wise, pooling, reduction, loss and optimiser kernels (one source for OpenCL and
// CUDA). Shapes come in as arguments, not defines, so one compiled program serves every layer and batch size;
// the heavy layers (Conv2d, Dense) use the convolution families and gemm.cl instead.
#include "common/compat.h"

#ifndef REDUCE_THREADS
#define REDUCE_THREADS 256  // work-group size of bias_grad; a power of two
#endif

// Activation modes shared with src/nn/activation.cpp.
#define ACT_RELU 0
#define ACT_SIGMOID 1
#define ACT_TANH 2

KERNEL void activation_forward(GLOBAL const float* RESTRICT x, GLOBAL float* RESTRICT y, const int count,
                               const int mode) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const float v = x[i];
  y[i] = mode == ACT_RELU ? (v > 0.0f ? v : 0.0f) : mode == ACT_SIGMOID ? 1.0f / (1.0f + exp(-v)) : tanh(v);
}

// The derivative from the output y alone: relu' = (y > 0), sigmoid' = y(1-y), tanh' = 1-y^2.
KERNEL void activation_backward(GLOBAL const float* RESTRICT y, GLOBAL const float* RESTRICT dy,
                                GLOBAL float* RESTRICT dx, const int count, const int mode) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const float v = y[i];
  const float d = mode == ACT_RELU ? (v > 0.0f ? 1.0f : 0.0f) : mode == ACT_SIGMOID ? v * (1.0f - v) : 1.0f - v * v;
  dx[i] = dy[i] * d;
}

// Non-overlapping pooling (window = stride = size), one work-item per output; mode 0 max, 1 average.
KERNEL void pool_forward(GLOBAL const float* RESTRICT x, GLOBAL float* RESTRICT y, const int planes, const int h,
                         const int w, const int p, const int q, const int size, const int mode) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)planes * p * q) return;
  const int plane = (int)(i / (p * q)), pq = (int)(i % (p * q));
  const int h0 = (pq / q) * size, w0 = (pq % q) * size;
  GLOBAL const float* in = x + (long)plane * h * w;
  float best = in[h0 * w + w0], sum = 0.0f;
  for (int r = 0; r < size; ++r)
    for (int s = 0; s < size; ++s) {
      const float v = in[(h0 + r) * w + w0 + s];
      best = v > best ? v : best;
      sum += v;
    }
  y[i] = mode == 0 ? best : sum / (float)(size * size);
}

// One work-item per input element, so no two write the same dx: max pooling routes dy to the first maximum of
// its window (recomputed from x, nothing stored in forward), average pooling spreads it evenly. Rows and
// columns that the floor of h/size cropped get zero.
KERNEL void pool_backward(GLOBAL const float* RESTRICT x, GLOBAL const float* RESTRICT dy, GLOBAL float* RESTRICT dx,
                          const int planes, const int h, const int w, const int p, const int q, const int size,
                          const int mode) {
  const long i = GLOBAL_ID(0);
  if (i >= (long)planes * h * w) return;
  const int plane = (int)(i / (h * w)), hw = (int)(i % (h * w));
  const int ih = hw / w, iw = hw % w, oh = ih / size, ow = iw / size;
  if (oh >= p || ow >= q) {
    dx[i] = 0.0f;
    return;
  }
  const float g = dy[(long)plane * p * q + oh * q + ow];
  if (mode == 1) {
    dx[i] = g / (float)(size * size);
    return;
  }
  GLOBAL const float* in = x + (long)plane * h * w;
  const int h0 = oh * size, w0 = ow * size;
  int best_at = h0 * w + w0;
  float best = in[best_at];
  for (int r = 0; r < size; ++r)
    for (int s = 0; s < size; ++s) {
      const int at = (h0 + r) * w + w0 + s;
      if (in[at] > best) {
        best = in[at];
        best_at = at;
      }
    }
  dx[i] = best_at == hw ? g : 0.0f;
}

// y[n][k][inner] += bias[k]: Dense (inner 1) and the CPU-free path of anything that adds a bias afterwards.
KERNEL void bias_add(GLOBAL float* RESTRICT y, GLOBAL const float* RESTRICT bias, const int count, const int k,
                     const int inner) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  y[i] += bias[(i / inner) % k];
}

// db[k] = sum over n and inner of dy[n][k][inner]: one work-group of REDUCE_THREADS per channel, a strided
// partial sum per work-item and a tree in local memory (no atomics, so the result is deterministic).
KERNEL void bias_grad(GLOBAL const float* RESTRICT dy, GLOBAL float* RESTRICT db, const int n, const int k,
                      const int inner) {
  LOCAL_ARRAY float partial[REDUCE_THREADS];
  const int channel = (int)GROUP_ID(0), t = LOCAL_ID(0);
  float sum = 0.0f;
  const int per_channel = n * inner;
  for (int j = t; j < per_channel; j += REDUCE_THREADS) {
    const int image = j / inner, at = j % inner;
    sum += dy[((long)image * k + channel) * inner + at];
  }
  partial[t] = sum;
  BARRIER();
  for (int stride = REDUCE_THREADS / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    BARRIER();
  }
  if (t == 0) db[channel] = partial[0];
}

// Softmax + cross-entropy per sample (one work-item per row of `classes` logits): loss[i] = -log softmax[label],
// grad = (softmax - onehot) * scale, scale = 1/batch for a mean loss.
KERNEL void softmax_cross_entropy(GLOBAL const float* RESTRICT logits, GLOBAL const int* RESTRICT labels,
                                  GLOBAL float* RESTRICT loss, GLOBAL float* RESTRICT grad, const int n,
                                  const int classes, const float scale) {
  const long i = GLOBAL_ID(0);
  if (i >= n) return;
  GLOBAL const float* z = logits + i * classes;
  float top = z[0];
  for (int c = 1; c < classes; ++c) top = z[c] > top ? z[c] : top;
  float total = 0.0f;
  for (int c = 0; c < classes; ++c) total += exp(z[c] - top);
  const int label = labels[i];
  loss[i] = log(total) - (z[label] - top);
  for (int c = 0; c < classes; ++c) {
    const float softmax = exp(z[c] - top) / total;
    grad[i * classes + c] = (softmax - (c == label ? 1.0f : 0.0f)) * scale;
  }
}

// Squared error against one-hot targets: loss[i] = 1/2 sum_c (out - target)^2, grad = (out - target) * scale.
KERNEL void squared_error(GLOBAL const float* RESTRICT out, GLOBAL const int* RESTRICT labels,
                          GLOBAL float* RESTRICT loss, GLOBAL float* RESTRICT grad, const int n, const int classes,
                          const float scale) {
  const long i = GLOBAL_ID(0);
  if (i >= n) return;
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) {
    const float diff = out[i * classes + c] - (c == labels[i] ? 1.0f : 0.0f);
    sum += diff * diff;
    grad[i * classes + c] = diff * scale;
  }
  loss[i] = 0.5f * sum;
}

// Seed 002's rule: v = momentum * v - lr * g; w += v.
KERNEL void sgd_momentum(GLOBAL float* RESTRICT w, GLOBAL const float* RESTRICT g, GLOBAL float* RESTRICT v,
                         const int count, const float lr, const float momentum) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const float velocity = momentum * v[i] - lr * g[i];
  v[i] = velocity;
  w[i] += velocity;
}

// Adam; the host folds the bias corrections into step = lr * sqrt(1 - beta2^t) / (1 - beta1^t) and
// eps_hat = eps * sqrt(1 - beta2^t), the usual rearrangement.
KERNEL void adam(GLOBAL float* RESTRICT w, GLOBAL const float* RESTRICT g, GLOBAL float* RESTRICT m,
                 GLOBAL float* RESTRICT v, const int count, const float step, const float beta1, const float beta2,
                 const float eps_hat) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const float grad = g[i];
  const float mean = beta1 * m[i] + (1.0f - beta1) * grad;
  const float var = beta2 * v[i] + (1.0f - beta2) * grad * grad;
  m[i] = mean;
  v[i] = var;
  w[i] -= step * mean / (sqrt(var) + eps_hat);
}
