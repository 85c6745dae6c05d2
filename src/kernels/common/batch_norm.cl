// Batch normalisation in training with its ReLU and residual add (src/plan/batch_norm_plan.cpp): per-channel
// statistics in two steps (partial sums by chunks of rows, then a column of work-items per channel), then one
// elementwise pass; the backward pass the same way. Every tensor access moves VEC consecutive elements (16 bytes where the contiguous
// axis allows: NHWC's channels, NCHW's pixels; else VEC = 1). Defines: ELEM (0 FP32, 1 BF16, 2 FP16), VEC,
// LAYOUT_NHWC with BN_CT (work-items across a row's channel vectors; the rest of the BN_LOCAL go down the rows),
// HAS_RESIDUAL, HAS_RELU, HAS_RELU_MAX with RELU_MAX (a float literal). Sizes are arguments: one program serves every
// shape of a type, vector width, layout and block. Arithmetic in FP32; tensors of ELEM rounded once.
#include "common/compat.h"

#include "common/elements.h"  // ct_load_vec, ct_store_vec

#define BN_LOCAL 256
#if LAYOUT_NHWC
#define BN_RT (BN_LOCAL / BN_CT)  // work-items down the rows
#define BN_LANES VEC              // sums each work-item keeps: one per channel of its vector
#else
#define BN_LANES 1                // one channel per work-group
#endif
// The workspace: the partial sums (chunks x 2 x c floats), then the coefficients of the apply step (3 x c).
#define BN_COEFFS(chunks, c) ((long)(chunks) * 2 * (c))

#if HAS_RESIDUAL
#define RESIDUAL_ARG GLOBAL const ct_elem* RESTRICT residual,
#define DRESIDUAL_ARG GLOBAL ct_elem* RESTRICT dresidual,
#else
#define RESIDUAL_ARG
#define DRESIDUAL_ARG
#endif

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

// Where this work-item's vectors lie. NHWC: group axis 0 a block of BN_CT channel vectors, the work-item's vector
// kv (channels kv * VEC ...) of rows first_row, first_row + BN_RT, ... of its chunk; element (row, kv) at
// row * c + kv * VEC. NCHW: group axis 0 the channel, the work-item's vectors jv = first, first + BN_LOCAL, ... of
// the chunk, over the channel's n x hw / VEC vectors, image by image. Group axis 1: the chunk.
typedef struct {
  long first, end, step;  // vectors (NCHW) or rows (NHWC) this work-item visits
  int kv;                 // NHWC: the channel vector; NCHW: the channel
  int active;
} BnWalk;

DEVICE_FN BnWalk bn_walk(int n, int c, int hw, int chunks) {
  BnWalk w;
  const long chunk = GROUP_ID(1);
#if LAYOUT_NHWC
  const long total = (long)n * hw;
  w.kv = (int)GROUP_ID(0) * BN_CT + LOCAL_ID(0) % BN_CT;
  w.active = w.kv < c / VEC;
  w.step = BN_RT;
  const long offset = LOCAL_ID(0) / BN_CT;
#else
  const long total = (long)n * (hw / VEC);
  w.kv = (int)GROUP_ID(0);
  w.active = 1;
  w.step = BN_LOCAL;
  const long offset = LOCAL_ID(0);
#endif
  const long per_chunk = (total + chunks - 1) / chunks, start = chunk * per_chunk;
  w.first = start + offset;
  w.end = start + per_chunk < total ? start + per_chunk : total;
  return w;
}

// The first element of the vector the walk is at.
DEVICE_FN long bn_element(const BnWalk* w, long at, int c, int hw) {
#if LAYOUT_NHWC
  return at * c + (long)w->kv * VEC;
#else
  const long per_image = hw / VEC, image = at / per_image;
  return (image * c + w->kv) * hw + (at - image * per_image) * VEC;
#endif
}

// The work-group's sums of each work-item's lanes into partial[chunk][0][k] and partial[chunk][1][k]: NHWC each
// channel's BN_RT work-items, NCHW all BN_LOCAL (and their lanes, one channel).
DEVICE_FN void bn_store_partial(LOCAL float* red, const float* v1, const float* v2, GLOBAL float* partial,
                                const BnWalk* w, int c) {
  const int lid = LOCAL_ID(0);
  const long chunk = GROUP_ID(1);
  PRAGMA_UNROLL for (int e = 0; e < BN_LANES; ++e) {
    red[(2 * e) * BN_LOCAL + lid] = v1[e];
    red[(2 * e + 1) * BN_LOCAL + lid] = v2[e];
  }
  BARRIER();
#if LAYOUT_NHWC
  if (lid < BN_CT && w->active) {
    PRAGMA_UNROLL for (int e = 0; e < VEC; ++e) {
      float a1 = 0.0f, a2 = 0.0f;
      for (int r = 0; r < BN_RT; ++r) {
        a1 += red[(2 * e) * BN_LOCAL + r * BN_CT + lid];
        a2 += red[(2 * e + 1) * BN_LOCAL + r * BN_CT + lid];
      }
      partial[(chunk * 2) * c + (long)w->kv * VEC + e] = a1;
      partial[(chunk * 2 + 1) * c + (long)w->kv * VEC + e] = a2;
    }
  }
#else
  for (int width = BN_LOCAL / 2; width > 0; width /= 2) {
    if (lid < width) {
      red[lid] += red[lid + width];
      red[BN_LOCAL + lid] += red[BN_LOCAL + lid + width];
    }
    BARRIER();
  }
  if (lid == 0) {
    partial[(chunk * 2) * c + w->kv] = red[0];
    partial[(chunk * 2 + 1) * c + w->kv] = red[BN_LOCAL];
  }
#endif
}

// The channel of element i of a VEC-vector (NCHW: the whole vector's).
DEVICE_FN int bn_channel(long i, int c, int hw) {
#if LAYOUT_NHWC
  return (int)(i % c);
#else
  return (int)((i / hw) % c);
#endif
}

// Forward, step 1: sums of (y - y0) and (y - y0)^2 for each chunk of rows, y0 the channel's first element (a sample
// of its values, so the variance does not lose digits to a mean far from zero).
KERNEL void bn_forward_partial(GLOBAL const ct_elem* RESTRICT y, GLOBAL float* RESTRICT workspace, const int n,
                               const int c, const int hw, const int chunks) {
  LOCAL_ARRAY float red[2 * BN_LANES * BN_LOCAL];
  const BnWalk w = bn_walk(n, c, hw, chunks);
  float sum[BN_LANES], squares[BN_LANES], y0[BN_LANES];
  PRAGMA_UNROLL for (int e = 0; e < BN_LANES; ++e) sum[e] = squares[e] = 0.0f;
  if (w.active) {
#if LAYOUT_NHWC
    ct_load_vec(y + (long)w.kv * VEC, y0);
#else
    y0[0] = ct_to_float(y[(long)w.kv * hw]);
#endif
    for (long at = w.first; at < w.end; at += w.step) {
      float v[VEC];
      ct_load_vec(y + bn_element(&w, at, c, hw), v);
      PRAGMA_UNROLL for (int e = 0; e < VEC; ++e) {
        const float d = v[e] - y0[BN_LANES == 1 ? 0 : e];
        sum[BN_LANES == 1 ? 0 : e] += d;
        squares[BN_LANES == 1 ? 0 : e] = FMA(d, d, squares[BN_LANES == 1 ? 0 : e]);
      }
    }
  }
  bn_store_partial(red, sum, squares, workspace, &w, c);
}

// The finalize steps' work-groups: BN_FK channels, each summed over the chunks by a column of BN_FG work-items
// (channel fastest, so a chunk's BN_FK sums are one contiguous read). One work-item a channel summing 512 chunks
// took 25-30 us a launch on an H100.
#define BN_FK 16
#define BN_FG (BN_LOCAL / BN_FK)

// The channel this work-item's column sums in the finalize steps.
DEVICE_FN int bn_final_channel(void) { return (int)GROUP_ID(0) * BN_FK + (int)(LOCAL_ID(0) % BN_FK); }

// Channel k's two partial sums over every chunk: work-item j of the column adds chunks j, j + BN_FG, ..., then a
// tree over the column in local memory (a fixed order: the same sums every run). Every work-item of the group calls
// it (barriers); every one gets its column's totals.
DEVICE_FN void bn_chunk_sums(LOCAL float* red, GLOBAL const float* partial, int chunks, int c, int k, float* first,
                             float* second) {
  const int lid = LOCAL_ID(0), j = lid / BN_FK;
  float s1 = 0.0f, s2 = 0.0f;
  if (k < c) {
    for (int g = j; g < chunks; g += BN_FG) {
      s1 += partial[(g * 2L) * c + k];
      s2 += partial[(g * 2L + 1) * c + k];
    }
  }
  red[lid] = s1;
  red[BN_LOCAL + lid] = s2;
  BARRIER();
  for (int rows = BN_FG / 2; rows > 0; rows /= 2) {
    if (j < rows) {
      red[lid] += red[lid + rows * BN_FK];
      red[BN_LOCAL + lid] += red[BN_LOCAL + lid + rows * BN_FK];
    }
    BARRIER();
  }
  *first = red[lid % BN_FK];
  *second = red[BN_LOCAL + lid % BN_FK];
}

// Forward, step 2 (a column of work-items per channel): the chunks' sums into the mean and biased variance (stats)
// and the scale and shift the apply step uses (gamma / sqrt(var + eps), beta - mean * scale); with `update`,
// running_mean and running_var (unbiased) moved `factor` of the way to the batch's, as BatchNorm2d's momentum does
// (in this launch: a launch of its own cost each block a few microseconds of the host's time).
KERNEL void bn_forward_finalize(GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT gamma,
                                GLOBAL const float* RESTRICT beta, GLOBAL float* RESTRICT stats,
                                GLOBAL float* RESTRICT workspace, GLOBAL float* RESTRICT running_mean,
                                GLOBAL float* RESTRICT running_var, const int n, const int c, const int hw,
                                const int chunks, const float eps, const float factor, const int update) {
  LOCAL_ARRAY float red[2 * BN_LOCAL];
  const int k = bn_final_channel();
  float sum, squares;
  bn_chunk_sums(red, workspace, chunks, c, k, &sum, &squares);
  if (LOCAL_ID(0) >= BN_FK || k >= c) return;
  GLOBAL float* coeffs = workspace + BN_COEFFS(chunks, c);
  const long rows = (long)n * hw;
  const float count = (float)rows;
  const float shifted_mean = sum / count;
  const float spread = squares / count - shifted_mean * shifted_mean;
  const float var = spread > 0.0f ? spread : 0.0f;
#if LAYOUT_NHWC
  const float mean = ct_to_float(y[k]) + shifted_mean;
#else
  const float mean = ct_to_float(y[(long)k * hw]) + shifted_mean;
#endif
  const float scale = gamma[k] / sqrt(var + eps);
  stats[k] = mean;
  stats[c + k] = var;
  coeffs[k] = scale;
  coeffs[c + k] = FMA(-mean, scale, beta[k]);
  if (update) {
    const float unbiased = var * ((float)rows / (float)(rows - 1));
    running_mean[k] = (1.0f - factor) * running_mean[k] + factor * mean;
    running_var[k] = (1.0f - factor) * running_var[k] + factor * unbiased;
  }
}

// Forward, step 3: a = act(y * scale + shift + residual), a grid-stride loop over every vector.
KERNEL void bn_forward_apply(GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT workspace,
                             RESIDUAL_ARG GLOBAL ct_elem* RESTRICT a, const long count, const int c, const int hw,
                             const int chunks) {
  GLOBAL const float* coeffs = workspace + BN_COEFFS(chunks, c);
  for (long i = GLOBAL_ID(0) * VEC; i < count; i += GLOBAL_SIZE(0) * VEC) {
    float v[VEC];
    ct_load_vec(y + i, v);
#if HAS_RESIDUAL
    float r[VEC];
    ct_load_vec(residual + i, r);
#endif
    const int k = bn_channel(i, c, hw);
    PRAGMA_UNROLL for (int e = 0; e < VEC; ++e) {
      const int ke = LAYOUT_NHWC ? k + e : k;
      float t = FMA(v[e], coeffs[ke], coeffs[c + ke]);
#if HAS_RESIDUAL
      t += r[e];
#endif
#if HAS_RELU
      t = t > 0.0f ? t : 0.0f;
#if HAS_RELU_MAX
      t = t < RELU_MAX ? t : RELU_MAX;
#endif
#endif
      v[e] = t;
    }
    ct_store_vec(a + i, v);
  }
}

// Backward, step 1: sums of dz and dz * (y - mean) for each chunk of rows, dz the gradient through the ReLU.
KERNEL void bn_backward_partial(GLOBAL const ct_elem* RESTRICT da, GLOBAL const ct_elem* RESTRICT a,
                                GLOBAL const ct_elem* RESTRICT y, GLOBAL const float* RESTRICT stats,
                                GLOBAL float* RESTRICT workspace, const int n, const int c, const int hw,
                                const int chunks) {
  LOCAL_ARRAY float red[2 * BN_LANES * BN_LOCAL];
  const BnWalk w = bn_walk(n, c, hw, chunks);
  float sum[BN_LANES], products[BN_LANES], mean[BN_LANES];
  PRAGMA_UNROLL for (int e = 0; e < BN_LANES; ++e) sum[e] = products[e] = 0.0f;
  if (w.active) {
    PRAGMA_UNROLL for (int e = 0; e < BN_LANES; ++e) mean[e] = stats[LAYOUT_NHWC ? w.kv * VEC + e : w.kv];
    for (long at = w.first; at < w.end; at += w.step) {
      const long i = bn_element(&w, at, c, hw);
      float g[VEC], out[VEC], v[VEC];
      ct_load_vec(da + i, g);
#if HAS_RELU
      ct_load_vec(a + i, out);
#endif
      ct_load_vec(y + i, v);
      PRAGMA_UNROLL for (int e = 0; e < VEC; ++e) {
        const int l = BN_LANES == 1 ? 0 : e;
#if HAS_RELU
        const float dz = bn_through_relu(g[e], out[e]);
#else
        const float dz = g[e];
#endif
        sum[l] += dz;
        products[l] = FMA(dz, v[e] - mean[l], products[l]);
      }
    }
  }
  bn_store_partial(red, sum, products, workspace, &w, c);
}

// Backward, step 2 (a column of work-items per channel): dgamma = sum(dz * xhat), dbeta = sum(dz), and the
// coefficients of dy = A dz + B (y - mean) + C: A = gamma / sigma, B = -A dgamma / (sigma count), C = -A dbeta / count,
// sigma = sqrt(var + eps) as in the forward pass.
KERNEL void bn_backward_finalize(GLOBAL const float* RESTRICT stats, GLOBAL const float* RESTRICT gamma,
                                 GLOBAL float* RESTRICT dgamma_out, GLOBAL float* RESTRICT dbeta_out,
                                 GLOBAL float* RESTRICT workspace, const int n, const int c, const int hw,
                                 const int chunks, const float eps) {
  LOCAL_ARRAY float red[2 * BN_LOCAL];
  const int k = bn_final_channel();
  float sum, products;
  bn_chunk_sums(red, workspace, chunks, c, k, &sum, &products);
  if (LOCAL_ID(0) >= BN_FK || k >= c) return;
  GLOBAL float* coeffs = workspace + BN_COEFFS(chunks, c);
  const float count = (float)((long)n * hw);
  const float inv_sigma = 1.0f / sqrt(stats[c + k] + eps);
  const float dgamma = products * inv_sigma;
  const float scale = gamma[k] * inv_sigma;
  dgamma_out[k] = dgamma;
  dbeta_out[k] = sum;
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
  for (long i = GLOBAL_ID(0) * VEC; i < count; i += GLOBAL_SIZE(0) * VEC) {
    float g[VEC], out[VEC], v[VEC];
    ct_load_vec(da + i, g);
#if HAS_RELU
    ct_load_vec(a + i, out);
#endif
    ct_load_vec(y + i, v);
    const int k = bn_channel(i, c, hw);
    PRAGMA_UNROLL for (int e = 0; e < VEC; ++e) {
      const int ke = LAYOUT_NHWC ? k + e : k;
#if HAS_RELU
      g[e] = bn_through_relu(g[e], out[e]);
#endif
      v[e] = FMA(coeffs[ke], g[e], FMA(coeffs[c + ke], v[e] - stats[ke], coeffs[2 * c + ke]));
    }
    ct_store_vec(dy + i, v);
#if HAS_RESIDUAL
    ct_store_vec(dresidual + i, g);
#endif
  }
}
