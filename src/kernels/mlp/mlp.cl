// Seed 002's MLP (INPUTS-HIDDEN-OUTPUTS, sigmoid, squared error, SGD with momentum) on the device: a persistent
// per-sample kernel that trains a whole epoch in one launch, and three mini-batch kernels (forward, output, update).
//
// Layout (host and device alike, see include/convtune/mlp/mlp.h): W1[j * (INPUTS + 1) + i] is the weight from
// input i to hidden neuron j, i == INPUTS being the bias neuron (value -1, as in seed 002's network);
// W2[j * OUTPUTS + k] from hidden j to output k, j == HIDDEN the hidden bias neuron (-1). dW1, dW2: the momentum
// terms ("deltas" in seed 002), same layout. Seed 002's update for one sample:
//   og_k = o_k (1 - o_k) (t_k - o_k)                 hg_j = h_j (1 - h_j) sum_k W2[j][k] og_k   (W2 before update)
//   dW2[j][k] = lr h_j og_k + momentum dW2[j][k]      dW1[j][i] = lr x_i hg_j + momentum dW1[j][i]
//   W += dW
//
// Persistent kernel (mlp_sgd_epoch), GROUPS work-groups of WG threads, one launch per epoch. Each group owns
// HIDDEN_PER_GROUP hidden neurons: their rows of W1/dW1 are only ever read and written by that group, so the
// input layer needs no communication. Per sample: every group computes its hidden activations and publishes them
// (double-buffered by sample parity) -> one grid-wide barrier -> every group reads all HIDDEN activations and
// computes the small output layer (HIDDEN x OUTPUTS) redundantly, with its own copy of W2/dW2 in local memory;
// identical code on identical data keeps the copies bit-identical, so no second barrier is needed. Then each
// group computes its hidden gradients and updates its W1 slice and its W2 copy. Group 0 records the per-sample
// error and correctness and writes W2 back at the end.
// The grid barrier (a monotonically growing arrival counter, fences before arriving and after leaving) needs
// all GROUPS groups resident at once: the host launches GROUPS <= compute units only on GPUs (CUDA, or an OpenCL
// GPU), where one small group per SM is always resident; GROUPS == 1 compiles the barrier away and works on any
// OpenCL device (PoCL), streaming all of W1 through one group per sample. With W1_LOCAL (many groups, small
// slices) each group keeps its W1/dW1 rows in local memory for the whole epoch and writes them back at the end,
// so the per-sample work touches global memory only for the image, the exchange and the barrier.
// Math modes (MLP_MATH, the trainer's Precision): the operands of every product are first rounded to what a tensor of
// the mode's type would hold (round to nearest even), sums and the master weights stay FP32. 0: fp32 and 3xtf32
// (FP32-accurate, which FP32 is); 1: tf32; 2: bf16; 3: fp16. The rounded tensors: the image, the hidden activations,
// the weights as the products read them, and the gradients out_grad and hidden_grad, which FP16 rounds at
// MLP_LOSS_SCALE times their value (a power of two, so exact) and keeps unscaled: |out_grad| <= 1/4, so the scaled
// values stay far below FP16's 65504 while the small ones keep 10 bits instead of underflowing.
#include "common/compat.h"

#ifndef INPUTS
#define INPUTS 784
#endif
#ifndef HIDDEN
#define HIDDEN 150
#endif
#ifndef OUTPUTS
#define OUTPUTS 10
#endif
#ifndef WG
#define WG 256  // threads per work-group
#endif
#ifndef GROUPS
#define GROUPS 1
#endif
#ifndef HIDDEN_PER_GROUP
#define HIDDEN_PER_GROUP HIDDEN
#endif
#ifndef THREADS_PER_NEURON
#define THREADS_PER_NEURON 32  // power of two dividing WG: the threads that share one hidden neuron's dot product
#endif
#ifndef THREADS_PER_OUTPUT
#define THREADS_PER_OUTPUT 16  // power of two, THREADS_PER_OUTPUT * OUTPUTS <= WG
#endif
#ifndef W1_LOCAL
#define W1_LOCAL 0  // 1: the group's W1/dW1 rows live in local memory for the whole epoch (when they fit)
#endif
#ifndef TILE
#define TILE 16  // mini-batch forward: TILE x TILE outputs per work-group
#endif
#ifndef TILE_K
#define TILE_K 64  // mini-batch forward: inputs per local tile (a multiple of TILE); fewer barrier-bound steps
#endif

#define IN1 (INPUTS + 1)
#define HID1 (HIDDEN + 1)
#define BIAS_VALUE (-1.0f)
#define NEURONS_PER_PASS (WG / THREADS_PER_NEURON)
#define X_PER_THREAD ((INPUTS + WG - 1) / WG)  // image pixels each thread prefetches for the next sample
#define OUTPUTS_PER_PASS (WG / THREADS_PER_OUTPUT)

#ifdef __OPENCL_VERSION__
#define BARRIER_ALL() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#define DEVICE_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#define ATOMIC_ADD_INT(p, v) atomic_add((p), (v))
#define EXP(x) exp(x)
#else
#define BARRIER_ALL() __syncthreads()
#define DEVICE_FENCE() __threadfence()
#define ATOMIC_ADD_INT(p, v) atomicAdd((int*)(p), (v))
#define EXP(x) expf(x)
#endif

DEVICE_FN float sigmoid(float x) { return 1.0f / (1.0f + EXP(-x)); }

#ifndef MLP_MATH
#define MLP_MATH 0
#endif
#ifdef __OPENCL_VERSION__
#define MLP_AS_UINT(f) as_uint(f)
#define MLP_AS_FLOAT(u) as_float(u)
#define MLP_RINT(x) rint(x)
#else
#define MLP_AS_UINT(f) __float_as_uint(f)
#define MLP_AS_FLOAT(u) __uint_as_float(u)
#define MLP_RINT(x) rintf(x)
#endif
// x with its low `dropped` mantissa bits rounded off, to nearest even (finite x of the result's range).
DEVICE_FN float mlp_round_bits(float x, int dropped) {
  const unsigned int u = MLP_AS_UINT(x), lsb = (u >> dropped) & 1u;
  return MLP_AS_FLOAT((u + ((1u << (dropped - 1)) - 1u) + lsb) & ~((1u << dropped) - 1u));
}
// x as FP16 holds it: 10 mantissa bits, multiples of 2^-24 below 2^-14 (subnormals), infinity from 65520 on.
DEVICE_FN float mlp_round_f16(float x) {
  const float a = fabs(x);
  if (a < 6.103515625e-05f) return MLP_RINT(x * 16777216.0f) * 5.9604644775390625e-08f;
  if (a >= 65520.0f) return x > 0.0f ? 1.0f / 0.0f : -1.0f / 0.0f;
  return mlp_round_bits(x, 13);
}
#if MLP_MATH == 1
#define MLP_Q(x) mlp_round_bits((x), 13)
#elif MLP_MATH == 2
#define MLP_Q(x) mlp_round_bits((x), 16)
#elif MLP_MATH == 3
#define MLP_Q(x) mlp_round_f16(x)
#else
#define MLP_Q(x) (x)
#endif
#if MLP_MATH == 3
#define MLP_LOSS_SCALE 4096.0f
#define MLP_QG(x) (MLP_Q((x) * MLP_LOSS_SCALE) * (1.0f / MLP_LOSS_SCALE))
#else
#define MLP_QG(x) MLP_Q(x)
#endif

// Sums `count` consecutive partials in local memory in groups of `width` (a power of two), leaving each group's
// total in its first element. Every thread of the work-group must call it.
DEVICE_FN void reduce_groups(LOCAL float* partial, int width) {
  for (int stride = width / 2; stride > 0; stride /= 2) {
    const int t = LOCAL_ID(0);
    if ((t % width) < stride) partial[t] += partial[t + stride];
    BARRIER();
  }
}

// The index of the largest output, first one on ties (the network's guess).
DEVICE_FN int argmax_outputs(const LOCAL float* out) {
  int best = 0;
  for (int k = 1; k < OUTPUTS; ++k) {
    if (out[k] > out[best]) best = k;
  }
  return best;
}

KERNEL void mlp_sgd_epoch(const GLOBAL float* RESTRICT images, const GLOBAL int* RESTRICT labels,
                          GLOBAL float* RESTRICT w1, GLOBAL float* RESTRICT dw1, GLOBAL float* RESTRICT w2_out,
                          GLOBAL float* RESTRICT dw2_out, GLOBAL float* exchange, GLOBAL int* barrier_counter,
                          GLOBAL float* RESTRICT sample_error, GLOBAL int* RESTRICT sample_correct, int count,
                          float learning_rate, float momentum) {
  LOCAL_ARRAY float x[IN1];
  LOCAL_ARRAY float h_all[HID1];
  LOCAL_ARRAY float w2[HID1 * OUTPUTS];
  LOCAL_ARRAY float dw2[HID1 * OUTPUTS];
  LOCAL_ARRAY float partial[WG];
  LOCAL_ARRAY float out[OUTPUTS];
  LOCAL_ARRAY float out_grad[OUTPUTS];
  LOCAL_ARRAY float hidden_grad[HIDDEN_PER_GROUP];
#if W1_LOCAL
  LOCAL_ARRAY float w1_rows[HIDDEN_PER_GROUP * IN1];
  LOCAL_ARRAY float dw1_rows[HIDDEN_PER_GROUP * IN1];
#define W1_ROW(jj) (w1_rows + (jj) * IN1)
#define DW1_ROW(jj) (dw1_rows + (jj) * IN1)
#define W1_SPACE LOCAL
#else
#define W1_ROW(jj) (w1 + (long)(j_begin + (jj)) * IN1)
#define DW1_ROW(jj) (dw1 + (long)(j_begin + (jj)) * IN1)
#define W1_SPACE GLOBAL
#endif

  const int t = LOCAL_ID(0);
  const int group = (int)GROUP_ID(0);
  const int j_begin = group * HIDDEN_PER_GROUP;
  const int j_end = min(j_begin + HIDDEN_PER_GROUP, HIDDEN);
  const int slice = j_end - j_begin;

  for (int e = t; e < HID1 * OUTPUTS; e += WG) {
    w2[e] = w2_out[e];
    dw2[e] = dw2_out[e];
  }
#if W1_LOCAL
  for (int e = t; e < slice * IN1; e += WG) {
    w1_rows[e] = w1[(long)j_begin * IN1 + e];
    dw1_rows[e] = dw1[(long)j_begin * IN1 + e];
  }
#endif
  if (t == 0) {
    x[INPUTS] = BIAS_VALUE;
    h_all[HIDDEN] = BIAS_VALUE;
  }
  BARRIER();

  // The next image is loaded into registers while the grid barrier waits, and stored to x once every thread is
  // done with the current one: the image's L2 latency leaves the per-sample critical path.
  float x_next[X_PER_THREAD];
  PRAGMA_UNROLL
  for (int r = 0; r < X_PER_THREAD; ++r) {
    const int i = t + r * WG;
    x_next[r] = i < INPUTS ? MLP_Q(images[i]) : 0.0f;
  }
  for (int s = 0; s < count; ++s) {
    PRAGMA_UNROLL
    for (int r = 0; r < X_PER_THREAD; ++r) {
      const int i = t + r * WG;
      if (i < INPUTS) x[i] = x_next[r];
    }
    BARRIER();

    // Hidden layer, this group's slice: THREADS_PER_NEURON threads per neuron, reading its W1 row coalesced.
    const int lane = t % THREADS_PER_NEURON;
    for (int pass = 0; pass < slice; pass += NEURONS_PER_PASS) {
      const int jj = pass + t / THREADS_PER_NEURON;
      float sum = 0.0f;
      if (jj < slice) {
        const W1_SPACE float* row = W1_ROW(jj);
        for (int i = lane; i < IN1; i += THREADS_PER_NEURON) sum = FMA(x[i], MLP_Q(row[i]), sum);
      }
      partial[t] = sum;
      BARRIER();
      reduce_groups(partial, THREADS_PER_NEURON);
      if (lane == 0 && jj < slice) {
        const float h = MLP_Q(sigmoid(partial[t]));
        h_all[j_begin + jj] = h;
#if GROUPS > 1
        exchange[(s & 1) * HIDDEN + j_begin + jj] = h;
        DEVICE_FENCE();
#endif
      }
      BARRIER();
    }

    if (s + 1 < count) {
      const GLOBAL float* next_image = images + (long)(s + 1) * INPUTS;
      PRAGMA_UNROLL
      for (int r = 0; r < X_PER_THREAD; ++r) {
        const int i = t + r * WG;
        if (i < INPUTS) x_next[r] = MLP_Q(next_image[i]);
      }
    }

#if GROUPS > 1
    // Grid-wide barrier: arrival number s + 1 of every group. The counter only grows (the host zeroes it before
    // the launch), so there is no reset to race with; the fences order the exchange writes before the arrival
    // and the reads after it. Reads go through volatile pointers to skip the (non-coherent) L1 cache.
    BARRIER_ALL();
    if (t == 0) {
      DEVICE_FENCE();
      ATOMIC_ADD_INT(barrier_counter, 1);
      const int target = GROUPS * (s + 1);
      while (*((volatile GLOBAL int*)barrier_counter) < target) {
      }
      DEVICE_FENCE();
    }
    BARRIER_ALL();
    for (int j = t; j < HIDDEN; j += WG) {
      if (j < j_begin || j >= j_end) h_all[j] = ((volatile GLOBAL float*)exchange)[(s & 1) * HIDDEN + j];
    }
    BARRIER();
#endif

    // Output layer, redundantly in every group: THREADS_PER_OUTPUT threads per output.
    {
      const int k = t / THREADS_PER_OUTPUT;
      const int out_lane = t % THREADS_PER_OUTPUT;
      float sum = 0.0f;
      if (k < OUTPUTS) {
        for (int j = out_lane; j < HID1; j += THREADS_PER_OUTPUT) sum = FMA(h_all[j], MLP_Q(w2[j * OUTPUTS + k]), sum);
      }
      partial[t] = sum;
      BARRIER();
      reduce_groups(partial, THREADS_PER_OUTPUT);
      if (out_lane == 0 && k < OUTPUTS) {
        const float o = sigmoid(partial[t]);
        const float target = labels[s] == k ? 1.0f : 0.0f;
        out[k] = o;
        out_grad[k] = MLP_QG(o * (1.0f - o) * (target - o));
      }
      BARRIER();
    }
    if (group == 0 && t == 0) {
      float error = 0.0f;
      for (int k = 0; k < OUTPUTS; ++k) {
        const float d = out[k] - (labels[s] == k ? 1.0f : 0.0f);
        error = FMA(d, d, error);
      }
      sample_error[s] = error;
      sample_correct[s] = argmax_outputs(out) == labels[s] ? 1 : 0;
    }

    // Hidden gradients of this group's neurons, from W2 before its update.
    for (int jj = t; jj < slice; jj += WG) {
      const int j = j_begin + jj;
      float back = 0.0f;
      for (int k = 0; k < OUTPUTS; ++k) back = FMA(MLP_Q(w2[j * OUTPUTS + k]), out_grad[k], back);
      hidden_grad[jj] = MLP_QG(h_all[j] * (1.0f - h_all[j]) * back);
    }
    BARRIER();

    // Momentum updates: this group's copy of W2 (all groups alike) and its W1 rows.
    for (int e = t; e < HID1 * OUTPUTS; e += WG) {
      const float delta = FMA(learning_rate * h_all[e / OUTPUTS], out_grad[e % OUTPUTS], momentum * dw2[e]);
      dw2[e] = delta;
      w2[e] += delta;
    }
    for (int jj = 0; jj < slice; ++jj) {
      const float scaled_grad = learning_rate * hidden_grad[jj];
      W1_SPACE float* row = W1_ROW(jj);
      W1_SPACE float* delta_row = DW1_ROW(jj);
      for (int i = t; i < IN1; i += WG) {
        const float delta = FMA(scaled_grad, x[i], momentum * delta_row[i]);
        delta_row[i] = delta;
        row[i] += delta;
      }
    }
    BARRIER();
  }

  if (group == 0) {
    for (int e = t; e < HID1 * OUTPUTS; e += WG) {
      w2_out[e] = w2[e];
      dw2_out[e] = dw2[e];
    }
  }
#if W1_LOCAL
  for (int e = t; e < slice * IN1; e += WG) {
    w1[(long)j_begin * IN1 + e] = w1_rows[e];
    dw1[(long)j_begin * IN1 + e] = dw1_rows[e];
  }
#endif
}

// Mini-batch forward, hidden layer: hidden[b][j] = sigmoid(sum_i x_b[i] W1[j][i]) for the `rows` images from
// `first`, as a tiled product (TILE image rows x TILE hidden neurons per work-group, TILE_K inputs per step)
// through local memory. Global size: (HIDDEN rounded up to TILE, rows rounded up to TILE), local TILE x TILE.
KERNEL void mlp_hidden_forward(const GLOBAL float* RESTRICT images, const GLOBAL float* RESTRICT w1,
                               GLOBAL float* RESTRICT hidden, int first, int rows) {
  LOCAL_ARRAY float x_tile[TILE][TILE_K + 1];
  LOCAL_ARRAY float w_tile[TILE][TILE_K + 1];
  const int tj = LOCAL_ID(0), tb = LOCAL_ID(1);
  const int j0 = (int)GROUP_ID(0) * TILE, b0 = (int)GROUP_ID(1) * TILE;
  float sum = 0.0f;
  for (int i0 = 0; i0 < IN1; i0 += TILE_K) {
    // Both loads run along i, the contiguous axis of the images and of W1's rows; row tb of each tile.
    const int b = b0 + tb, j = j0 + tb;
    PRAGMA_UNROLL
    for (int r = 0; r < TILE_K / TILE; ++r) {
      const int ii = tj + r * TILE, i = i0 + ii;
      float v = 0.0f;
      if (b < rows) v = i < INPUTS ? MLP_Q(images[(long)(first + b) * INPUTS + i]) : (i == INPUTS ? BIAS_VALUE : 0.0f);
      x_tile[tb][ii] = v;
      w_tile[tb][ii] = (j < HIDDEN && i < IN1) ? MLP_Q(w1[(long)j * IN1 + i]) : 0.0f;
    }
    BARRIER();
    PRAGMA_UNROLL
    for (int ii = 0; ii < TILE_K; ++ii) sum = FMA(x_tile[tb][ii], w_tile[tj][ii], sum);
    BARRIER();
  }
  const int b = b0 + tb, j = j0 + tj;
  if (b < rows && j < HIDDEN) hidden[(long)b * HIDDEN + j] = MLP_Q(sigmoid(sum));
}

// Mini-batch output layer and gradients, one work-group of WG threads per image: outputs, per-sample error and
// correctness (at index first + b), and with `with_gradients` the output and hidden gradients for mlp_update.
KERNEL void mlp_output_layer(const GLOBAL float* RESTRICT hidden, const GLOBAL int* RESTRICT labels,
                             const GLOBAL float* RESTRICT w2, GLOBAL float* RESTRICT out_grad_all,
                             GLOBAL float* RESTRICT hidden_grad_all, GLOBAL float* RESTRICT sample_error,
                             GLOBAL int* RESTRICT sample_correct, int first, int with_gradients) {
  LOCAL_ARRAY float h[HID1];
  LOCAL_ARRAY float partial[WG];
  LOCAL_ARRAY float out[OUTPUTS];
  LOCAL_ARRAY float out_grad[OUTPUTS];
  const int t = LOCAL_ID(0);
  const int b = (int)GROUP_ID(0);
  const int label = labels[first + b];
  for (int j = t; j < HIDDEN; j += WG) h[j] = hidden[(long)b * HIDDEN + j];
  if (t == 0) h[HIDDEN] = BIAS_VALUE;
  BARRIER();
  const int k = t / THREADS_PER_OUTPUT;
  const int out_lane = t % THREADS_PER_OUTPUT;
  float sum = 0.0f;
  if (k < OUTPUTS) {
    for (int j = out_lane; j < HID1; j += THREADS_PER_OUTPUT) sum = FMA(h[j], MLP_Q(w2[j * OUTPUTS + k]), sum);
  }
  partial[t] = sum;
  BARRIER();
  reduce_groups(partial, THREADS_PER_OUTPUT);
  if (out_lane == 0 && k < OUTPUTS) {
    const float o = sigmoid(partial[t]);
    const float target = label == k ? 1.0f : 0.0f;
    out[k] = o;
    out_grad[k] = MLP_QG(o * (1.0f - o) * (target - o));
    if (with_gradients) out_grad_all[(long)b * OUTPUTS + k] = out_grad[k];
  }
  BARRIER();
  if (t == 0) {
    float error = 0.0f;
    for (int kk = 0; kk < OUTPUTS; ++kk) {
      const float d = out[kk] - (label == kk ? 1.0f : 0.0f);
      error = FMA(d, d, error);
    }
    sample_error[first + b] = error;
    sample_correct[first + b] = argmax_outputs(out) == label ? 1 : 0;
  }
  if (with_gradients) {
    for (int j = t; j < HIDDEN; j += WG) {
      float back = 0.0f;
      for (int kk = 0; kk < OUTPUTS; ++kk) back = FMA(MLP_Q(w2[j * OUTPUTS + kk]), out_grad[kk], back);
      hidden_grad_all[(long)b * HIDDEN + j] = MLP_QG(h[j] * (1.0f - h[j]) * back);
    }
  }
}

// Mini-batch momentum update of every weight, one thread per weight (W1's, then W2's): the gradient summed over
// the `rows` images of the batch from `first`, scaled by learning_rate / rows (the batch mean).
KERNEL void mlp_update(const GLOBAL float* RESTRICT images, const GLOBAL float* RESTRICT hidden,
                       const GLOBAL float* RESTRICT out_grad_all, const GLOBAL float* RESTRICT hidden_grad_all,
                       GLOBAL float* RESTRICT w1, GLOBAL float* RESTRICT dw1, GLOBAL float* RESTRICT w2,
                       GLOBAL float* RESTRICT dw2, int first, int rows, float learning_rate, float momentum) {
  const long e = GLOBAL_ID(0);
  const float scale = learning_rate / (float)rows;
  if (e < (long)HIDDEN * IN1) {
    const int j = (int)(e / IN1), i = (int)(e % IN1);
    float grad = 0.0f;
    for (int b = 0; b < rows; ++b) {
      const float x = i < INPUTS ? MLP_Q(images[(long)(first + b) * INPUTS + i]) : BIAS_VALUE;
      grad = FMA(hidden_grad_all[(long)b * HIDDEN + j], x, grad);
    }
    const float delta = FMA(scale, grad, momentum * dw1[e]);
    dw1[e] = delta;
    w1[e] += delta;
  } else if (e < (long)HIDDEN * IN1 + HID1 * OUTPUTS) {
    const int e2 = (int)(e - (long)HIDDEN * IN1);
    const int j = e2 / OUTPUTS, k = e2 % OUTPUTS;
    float grad = 0.0f;
    for (int b = 0; b < rows; ++b) {
      const float h = j < HIDDEN ? hidden[(long)b * HIDDEN + j] : BIAS_VALUE;
      grad = FMA(h, out_grad_all[(long)b * OUTPUTS + k], grad);
    }
    const float delta = FMA(scale, grad, momentum * dw2[e2]);
    dw2[e2] = delta;
    w2[e2] += delta;
  }
}
