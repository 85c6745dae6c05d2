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

// ---- 16-bit convolutions inside FP32 networks (Runtime with a bf16 or fp16 precision; src/nn/conv2d.cpp) ----
// Tensors between layers stay FP32; a 16-bit Conv2d converts its inputs to BF16/FP16 (round to nearest even, as
// src/core/rounding.cpp) and its outputs back. Gradients are scaled per tensor on the device: abs_max_bits finds
// max |dy|, and the conversion multiplies by the power of two that brings it into [0.5, 1), so FP16's narrow range
// loses nothing to underflow or overflow (BF16 has FP32's range and takes no scale); the conversions back multiply by
// its inverse. Exact: powers of two.

// atomic max of |x[i]|'s bit pattern into *out (non-negative floats order as their bits); *out must start at 0.
KERNEL void abs_max_bits(GLOBAL const float* RESTRICT x, GLOBAL unsigned int* RESTRICT out, const int count) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const float v = fabs(x[i]);
#ifdef __OPENCL_VERSION__
  atomic_max(out, as_uint(v));
#else
  atomicMax(out, __float_as_uint(v));
#endif
}

#ifdef __OPENCL_VERSION__
#define NN_AS_UINT(f) as_uint(f)
#define NN_AS_FLOAT(u) as_float(u)
#else
#define NN_AS_UINT(f) __float_as_uint(f)
#define NN_AS_FLOAT(u) __uint_as_float(u)
#endif

// The power of two that scales a tensor whose largest magnitude has these bits into [0.5, 1) (1 for 0, infinities
// and NaN, which then propagate), or its inverse.
DEVICE_FN float nn_gradient_scale(unsigned int max_bits, int inverse) {
  const int e = (int)(max_bits >> 23);  // biased exponent of max |x| (0: zero or subnormal)
  if (max_bits == 0u || e >= 255) return 1.0f;
  const int shift = 126 - (e == 0 ? 1 : e);  // max * 2^shift in [0.5, 1) for normal max
  const int scale_exponent = inverse ? -shift : shift;
  const int clamped = scale_exponent < -126 ? -126 : scale_exponent > 127 ? 127 : scale_exponent;
  return NN_AS_FLOAT((unsigned int)(clamped + 127) << 23);
}

DEVICE_FN unsigned int nn_round_bits(unsigned int u, int dropped) {
  const unsigned int below_half = (1u << (dropped - 1)) - 1u, lsb = (u >> dropped) & 1u;
  return (u + below_half + lsb) & ~((1u << dropped) - 1u);
}

// x * scale as BF16 (bf16 = 1) or FP16 bits; scale = 1, or the gradient scale of *max_bits when scaled = 1.
KERNEL void convert_to_16(GLOBAL const float* RESTRICT x, GLOBAL unsigned short* RESTRICT y, const int count,
                          const int bf16, const int scaled, GLOBAL const unsigned int* RESTRICT max_bits) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const float v = scaled ? x[i] * nn_gradient_scale(*max_bits, 0) : x[i];
  const unsigned int u = NN_AS_UINT(v);
  const unsigned int sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  unsigned short out;
  if (bf16) {
    out = a > 0x7F800000u ? (unsigned short)((u >> 16) | 0x40u) : (unsigned short)(nn_round_bits(u, 16) >> 16);
  } else if (a > 0x7F800000u) {
    out = (unsigned short)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  } else if (a >= 0x477FF000u) {
    out = (unsigned short)(sign | 0x7C00u);
  } else if (a >= 0x38800000u) {
    out = (unsigned short)(sign | (nn_round_bits(a - 0x38000000u, 13) >> 13));
  } else if (a <= 0x33000000u) {
    out = (unsigned short)sign;
  } else {
    const unsigned int exponent = a >> 23, mantissa = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = (int)(126u - exponent);
    unsigned int q = mantissa >> shift;
    const unsigned int rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
    out = (unsigned short)(sign | q);
  }
  y[i] = out;
}

// BF16 or FP16 bits back to FP32, times the inverse gradient scale of *max_bits when scaled = 1.
KERNEL void convert_from_16(GLOBAL const unsigned short* RESTRICT y, GLOBAL float* RESTRICT x, const int count,
                            const int bf16, const int scaled, GLOBAL const unsigned int* RESTRICT max_bits) {
  const long i = GLOBAL_ID(0);
  if (i >= count) return;
  const unsigned int h = y[i];
  float v;
  if (bf16) {
    v = NN_AS_FLOAT(h << 16);
  } else {
    const unsigned int sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    if (exponent == 0x1Fu) v = NN_AS_FLOAT(sign | 0x7F800000u | (mantissa << 13));
    else if (exponent == 0u) v = (sign ? -1.0f : 1.0f) * (float)mantissa * 5.9604644775390625e-8f;
    else v = NN_AS_FLOAT(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  x[i] = scaled ? v * nn_gradient_scale(*max_bits, 1) : v;
}
