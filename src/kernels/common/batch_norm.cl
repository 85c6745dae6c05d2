// Batch normalisation in training with its ReLU and residual add (src/plan/batch_norm_plan.cpp): per-channel
// statistics in two steps (partial sums by chunks of rows, then one thread per channel), then one elementwise pass;
// the backward pass the same way. Defines: ELEM (0 FP32, 1 BF16, 2 FP16), LAYOUT_NHWC, HAS_RESIDUAL, HAS_RELU,
// HAS_RELU_MAX with RELU_MAX (a float literal). Sizes are arguments: one program serves every shape of a type,
// layout and block. Arithmetic in FP32; tensors of ELEM rounded once.
#include "common/compat.h"

#include "common/elements.h"

// NHWC: a work-group of BN_LOCAL items reads BN_CHANNELS adjacent channels of BN_ROWS rows at a time (coalesced
// along the channels); NCHW: BN_LOCAL adjacent pixels of one channel.
#define BN_LOCAL 256
#define BN_CHANNELS 64
#define BN_ROWS (BN_LOCAL / BN_CHANNELS)
// The workspace: the partial sums (chunks x 2 x c floats), then the coefficients of the apply step (3 x c).
#define BN_COEFFS(chunks, c) ((long)(chunks) * 2 * (c))

#if HAS_RESIDUAL
#define RESIDUAL_ARG GLOBAL const ct_elem* RESTRICT residual,
#define DRESIDUAL_ARG GLOBAL ct_elem* RESTRICT dresidual,
#else
#define RESIDUAL_ARG
#define DRESIDUAL_ARG
#endif

// Element j (0 <= j < rows) of channel k, rows = n * hw: NHWC row j's channel k, NCHW image j / hw's pixel j % hw.
DEVICE_FN long bn_index(long j, int k, int c, int hw) {
#if LAYOUT_NHWC
  return j * c + k;
#else
  const long image = j / hw;
  return (image * c + k) * hw + (j - image * hw);
#endif
}

// The gradient reaching the batch norm's output through the ReLU: zero where the ReLU (and its clamp) cut.
DEVICE_FN float bn_through_relu(float da, float a) {
#if HAS_RELU
#if HAS_RELU_MAX
  return a > 0.0f && a < RELU_MAX ? da : 0.0f;
#else
  return a > 0.0f ? da : 0.0f;
#endif
#else
  return da;
#endif
}

// Sums of this work-item's two values over the work-group into partial[chunk][0][k] and partial[chunk][1][k].
// NHWC: the BN_ROWS items of each channel are summed; NCHW: all BN_LOCAL (one channel per work-group).
DEVICE_FN void bn_store_partial(LOCAL float* s1, LOCAL float* s2, float v1, float v2, GLOBAL float* partial, int k,
                                int c, long chunk) {
  const int lid = LOCAL_ID(0);
  s1[lid] = v1;
  s2[lid] = v2;
  BARRIER();
#if LAYOUT_NHWC
  if (lid < BN_CHANNELS && k < c) {
    float a1 = 0.0f, a2 = 0.0f;
    for (int r = 0; r < BN_ROWS; ++r) {
      a1 += s1[r * BN_CHANNELS + lid];
      a2 += s2[r * BN_CHANNELS + lid];
    }
    partial[(chunk * 2) * c + k] = a1;
    partial[(chunk * 2 + 1) * c + k] = a2;
  }
#else
  for (int width = BN_LOCAL / 2; width > 0; width /= 2) {
    if (lid < width) {
      s1[lid] += s1[lid + width];
      s2[lid] += s2[lid + width];
    }
    BARRIER();
  }
  if (lid == 0) {
    partial[(chunk * 2) * c + k] = s1[0];
    partial[(chunk * 2 + 1) * c + k] = s2[0];
  }
#endif
}

// This work-item's channel and first row, the rows' step, and its chunk's end. Group axis 0: NHWC a block of
// BN_CHANNELS channels, NCHW one channel; group axis 1: the chunk of rows.
#if LAYOUT_NHWC
#define BN_ROW_LOOP(k, j, step)                                         \
  const int k = (int)GROUP_ID(0) * BN_CHANNELS + LOCAL_ID(0) % BN_CHANNELS; \
  const long step = BN_ROWS;                                            \
  const long j##_first = chunk_start + LOCAL_ID(0) / BN_CHANNELS;
#else
#define BN_ROW_LOOP(k, j, step)            \
  const int k = (int)GROUP_ID(0);          \
  const long step = BN_LOCAL;              \
  const long j##_first = chunk_start + LOCAL_ID(0);
#endif

// Forward, step 1: sums of (y - y0) and (y - y0)^2 for each chunk of rows, y0 the channel's first element (a sample
// of its values, so the variance does not lose digits to a mean far from zero).
KERNEL void bn_forward_partial(GLOBAL const ct_elem* RESTRICT y, GLOBAL float* RESTRICT partial, const int n,
                               const int c, const int hw, const int chunks) {  // partial: the workspace
  LOCAL_ARRAY float s1[BN_LOCAL];
  LOCAL_ARRAY float s2[BN_LOCAL];
  const long rows = (long)n * hw, chunk = GROUP_ID(1), per_chunk = (rows + chunks - 1) / chunks;
  const long chunk_start = chunk * per_chunk;
  const long chunk_end = chunk_start + per_chunk < rows ? chunk_start + per_chunk : rows;
  BN_ROW_LOOP(k, j, step)
  float sum = 0.0f, squares = 0.0f;
  if (k < c) {
    const float y0 = ct_to_float(y[bn_index(0, k, c, hw)]);
    for (long j = j_first; j < chunk_end; j += step) {
      const float v = ct_to_float(y[bn_index(j, k, c, hw)]) - y0;
      sum += v;
      squares = FMA(v, v, squares);
    }
  }
  bn_store_partial(s1, s2, sum, squares, partial, k, c, chunk);
}

// Forward, step 2 (one work-item per channel): the chunks' sums in order into the mean and biased variance (stats)
// and the scale and shift the apply step uses (coeffs: gamma / sqrt(var + eps), beta - mean * scale).
KERNEL void bn_forward_finalize(GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT params,
                                GLOBAL float* RESTRICT stats, GLOBAL float* RESTRICT workspace, const int n,
                                const int c, const int hw, const int chunks, const float eps) {
  const int k = (int)GLOBAL_ID(0);
  if (k >= c) return;
  GLOBAL const float* partial = workspace;
  GLOBAL float* coeffs = workspace + BN_COEFFS(chunks, c);
  float sum = 0.0f, squares = 0.0f;
  for (int g = 0; g < chunks; ++g) {
    sum += partial[(g * 2L) * c + k];
    squares += partial[(g * 2L + 1) * c + k];
  }
  const float count = (float)((long)n * hw);
  const float shifted_mean = sum / count;
  const float spread = squares / count - shifted_mean * shifted_mean;
  const float var = spread > 0.0f ? spread : 0.0f;
  const float mean = ct_to_float(y[bn_index(0, k, c, hw)]) + shifted_mean;
  const float scale = params[k] / sqrt(var + eps);
  stats[k] = mean;
  stats[c + k] = var;
  coeffs[k] = scale;
  coeffs[c + k] = FMA(-mean, scale, params[c + k]);
}

// Forward, step 3: a = act(y * scale + shift + residual), a grid-stride loop over every element.
KERNEL void bn_forward_apply(GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT workspace,
                             RESIDUAL_ARG GLOBAL ct_elem* RESTRICT a, const long count, const int c, const int hw,
                             const int chunks) {
  GLOBAL const float* coeffs = workspace + BN_COEFFS(chunks, c);
  for (long i = GLOBAL_ID(0); i < count; i += GLOBAL_SIZE(0)) {
#if LAYOUT_NHWC
    const int k = (int)(i % c);
#else
    const int k = (int)((i / hw) % c);
#endif
    float v = FMA(ct_to_float(y[i]), coeffs[k], coeffs[c + k]);
#if HAS_RESIDUAL
    v += ct_to_float(residual[i]);
#endif
#if HAS_RELU
    v = v > 0.0f ? v : 0.0f;
#if HAS_RELU_MAX
    v = v < RELU_MAX ? v : RELU_MAX;
#endif
#endif
    a[i] = ct_from_float(v);
  }
}

// Backward, step 1: sums of dz and dz * (y - mean) for each chunk of rows, dz the gradient through the ReLU.
KERNEL void bn_backward_partial(GLOBAL const ct_elem* RESTRICT da, GLOBAL const ct_elem* RESTRICT a,
                                GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT stats,
                                GLOBAL float* RESTRICT partial, const int n, const int c, const int hw,
                                const int chunks) {
  LOCAL_ARRAY float s1[BN_LOCAL];
  LOCAL_ARRAY float s2[BN_LOCAL];
  const long rows = (long)n * hw, chunk = GROUP_ID(1), per_chunk = (rows + chunks - 1) / chunks;
  const long chunk_start = chunk * per_chunk;
  const long chunk_end = chunk_start + per_chunk < rows ? chunk_start + per_chunk : rows;
  BN_ROW_LOOP(k, j, step)
  float sum = 0.0f, products = 0.0f;
  if (k < c) {
    const float mean = stats[k];
    for (long j = j_first; j < chunk_end; j += step) {
      const long i = bn_index(j, k, c, hw);
      const float dz = bn_through_relu(ct_to_float(da[i]), ct_to_float(a[i]));
      sum += dz;
      products = FMA(dz, ct_to_float(y[i]) - mean, products);
    }
  }
  bn_store_partial(s1, s2, sum, products, partial, k, c, chunk);
}

// Backward, step 2 (one work-item per channel): dgamma = sum(dz * xhat), dbeta = sum(dz) (dparams), and the
// coefficients of dy = A dz + B (y - mean) + C (coeffs): A = gamma / sigma, B = -A dgamma / (sigma count),
// C = -A dbeta / count, sigma = sqrt(var + eps) as in the forward pass.
KERNEL void bn_backward_finalize(GLOBAL const float* RESTRICT stats, GLOBAL const float* RESTRICT params,
                                 GLOBAL float* RESTRICT dparams, GLOBAL float* RESTRICT workspace, const int n,
                                 const int c, const int hw, const int chunks, const float eps) {
  const int k = (int)GLOBAL_ID(0);
  if (k >= c) return;
  GLOBAL const float* partial = workspace;
  GLOBAL float* coeffs = workspace + BN_COEFFS(chunks, c);
  float sum = 0.0f, products = 0.0f;
  for (int g = 0; g < chunks; ++g) {
    sum += partial[(g * 2L) * c + k];
    products += partial[(g * 2L + 1) * c + k];
  }
  const float count = (float)((long)n * hw);
  const float inv_sigma = 1.0f / sqrt(stats[c + k] + eps);
  const float dgamma = products * inv_sigma;
  const float scale = params[k] * inv_sigma;
  dparams[k] = dgamma;
  dparams[c + k] = sum;
  coeffs[k] = scale;
  coeffs[c + k] = -scale * dgamma * inv_sigma / count;
  coeffs[2 * c + k] = -scale * sum / count;
}

// Backward, step 3: dy = A dz + B (y - mean) + C and, with a residual, dresidual = dz.
KERNEL void bn_backward_apply(GLOBAL const ct_elem* RESTRICT da, GLOBAL const ct_elem* RESTRICT a,
                              GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT stats,
                              GLOBAL const float* RESTRICT workspace, GLOBAL ct_elem* RESTRICT dy,
                              DRESIDUAL_ARG const long count, const int c, const int hw, const int chunks) {
  GLOBAL const float* coeffs = workspace + BN_COEFFS(chunks, c);
  for (long i = GLOBAL_ID(0); i < count; i += GLOBAL_SIZE(0)) {
#if LAYOUT_NHWC
    const int k = (int)(i % c);
#else
    const int k = (int)((i / hw) % c);
#endif
    const float dz = bn_through_relu(ct_to_float(da[i]), ct_to_float(a[i]));
    dy[i] = ct_from_float(FMA(coeffs[k], dz, FMA(coeffs[c + k], ct_to_float(y[i]) - stats[k], coeffs[2 * c + k])));
#if HAS_RESIDUAL
    dresidual[i] = ct_from_float(dz);
#endif
  }
}
