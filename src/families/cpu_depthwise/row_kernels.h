// The cpu_depthwise family's SIMD row kernels (row_kernels.cpp, one copy per Highway target: AVX-512, AVX2,
// scalar): weighted sums of rows over a plane (an offset and a weight per filter tap) and dot products of rows.
// The family's plane loops (cpu_depthwise_family.cpp) turn every direction, stride, padding and dilation into such
// rows by copying planes padded and split into stride phases, so that each tap reads one contiguous run per row.
// And the channel-blocked form's kernels: sums with vectors across channels, and the moves between planes and
// pixels of interleaved channels.
#pragma once

#include <cstdint>

#include "src/backend/cpu/isa.h"

namespace convtune::cpu_depthwise {

// Rows read past their last used element by less than a vector (a tail load): the plane buffers keep this much
// slack after every row. User tensors are never read or written past their rows.
inline constexpr int64_t kRowSlack = 16;

using PlaneSum = void (*)(const float* base, const int64_t* offsets, const float* weights, int64_t taps, int64_t rows,
                          int64_t in_stride, int64_t count, float* out, int64_t out_stride);
using PlaneDot = void (*)(const float* base, const int64_t* offsets, int64_t taps, int64_t rows, int64_t in_stride,
                          const float* b, int64_t b_stride, int64_t count, double* sums);

using Deinterleave = void (*)(const float* in, int64_t count, float* even, float* odd);

// A unit-stride depthwise sum read in place: out[p * out_w + q] = sum over taps (r, s) of
// weights[r * S + s] * in[(p + r dil_h - pad_h) * in_w + q + s dil_w - pad_w], taps outside the in_h x in_w plane
// counting zero, for p < out_h and q < out_w. Padding may be negative (backward-data's when pad > dil (R - 1)).
struct DirectGeometry {
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};
using PlaneDirect = void (*)(const float* in, const DirectGeometry& g, const float* weights, float* out);
// Backward-filter's dots read in place: sums[r * S + s] += sum over p < out_h, q < out_w of b[p * out_w + q] *
// in[(p + r dil_h - pad_h) * in_w + q + s dil_w - pad_w] (zero outside the in_h x in_w plane).
using PlaneDotDirect = void (*)(const float* in, const DirectGeometry& g, const float* b, double* sums);

// The channel-blocked form (lanes channels interleaved per pixel, vectors across channels: no lane idles on a
// short row, and each tap's weights are one vector loaded once per block of outputs).
// out[j * out_step + l] = sum over t < taps of weights[w_offsets[t] + l] * in[in_offsets[t] + j * in_step + l] for
// j < count and l < lanes (zero for no taps): register blocks of up to kChannelBlock outputs.
using ChannelSum = void (*)(const float* in, const int64_t* in_offsets, const float* weights,
                            const int64_t* w_offsets, int64_t taps, int64_t count, int64_t in_step, float* out,
                            int64_t out_step);
// `channels` (<= lanes) planes of rows x cols floats (contiguous, `plane` apart) interleaved into pixels of lanes
// channels: pixel (i, x) to dst + i * dst_row + x * lanes, zero lanes for l >= channels. The planes are read as
// one run of rows x cols pixels, so small planes (7x7) fill whole transposed tiles.
using ToChannels = void (*)(const float* src, int64_t plane, int64_t channels, int64_t rows, int64_t cols,
                            float* dst, int64_t dst_row);
// The reverse over one run: dst[l * plane + x] = src[x * lanes + l] for l < channels and x < count (dst's other
// floats untouched).
using FromChannels = void (*)(const float* src, int64_t count, int64_t channels, float* dst, int64_t plane);
// Backward-filter's dots across channels: sums[t * lanes + l] += sum over rows i < rows and x < count of
// in[row_offsets[i] + tap_offsets[t] + x * in_step + l] * dy[(i * count + x) * lanes + l], for t < taps (float
// vectors over the call, added to `sums` once).
using ChannelDot = void (*)(const float* in, const int64_t* row_offsets, int64_t rows, int64_t count,
                            int64_t in_step, const int64_t* tap_offsets, int64_t taps, const float* dy, double* sums);
inline constexpr int kChannelBlock = 14;

struct RowKernels {
  int lanes = 1;
  // even[i] = in[2 i] and odd[i] = in[2 i + 1] for 2 i (+ 1) < count: a row split into stride 2's phases.
  Deinterleave deinterleave2 = nullptr;
  // Over `rows` rows: out[i * out_stride + x] = sum over t < taps of weights[t] * base[i * in_stride + offsets[t] + x]
  // for x < count (written, never read; zero for no taps). The base rows may be read up to kRowSlack floats past
  // count; out only below it. Register blocks of 1, 2 or 4 vectors along a row (the family's VECS):
  // plane_sum[VECS / 2].
  PlaneSum plane_sum[3] = {nullptr, nullptr, nullptr};
  // sums[t] += sum over rows i < rows and columns x < count of base[i * in_stride + offsets[t] + x] *
  // b[i * b_stride + x], for t < taps: each tap's products held in a vector over the whole plane, summed across
  // lanes once. b is read only below count; the base rows up to kRowSlack past it.
  PlaneDot plane_dot = nullptr;
  // The in-place sums for 3x3 and 5x5 filters (plane_direct[0] and [1]): no padded copy, the plane's borders
  // handled by masked loads. Other filters copy the plane instead (plane_sum).
  PlaneDirect plane_direct[2] = {nullptr, nullptr};
  // And backward-filter's dots read in place, for the same filters.
  PlaneDotDirect plane_dot_direct[2] = {nullptr, nullptr};
  // The channel-blocked form's sum and its layout moves.
  ChannelSum channel_sum = nullptr;
  ChannelDot channel_dot = nullptr;
  ToChannels to_channels = nullptr;
  FromChannels from_channels = nullptr;
};

// The kernels of one ISA (the CPU backend's active one by default: cpu::active_isa()).
const RowKernels& row_kernels(cpu::Isa isa);

}  // namespace convtune::cpu_depthwise
