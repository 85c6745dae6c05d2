// The cpu_depthwise family's SIMD row kernels (row_kernels.cpp, one copy per Highway target: AVX-512, AVX2,
// scalar): weighted sums of rows (a row pointer and a weight per filter tap) and dot products of rows. The family's
// plane loops (cpu_depthwise_family.cpp) turn every direction, stride, padding and dilation into such rows by
// copying planes padded and split into stride phases, so that each tap reads one contiguous run per output row.
#pragma once

#include <cstdint>

#include "src/backend/cpu/isa.h"

namespace convtune::cpu_depthwise {

// Rows read past their last used element by less than a vector (a tail load): the plane buffers keep this much
// slack after every row. User tensors are never read or written past their rows.
inline constexpr int64_t kRowSlack = 16;

using TapsSum = void (*)(const float* const* rows, const float* weights, int64_t taps, int64_t count, float* out);
using TapsDot = void (*)(const float* const* a, int64_t taps, const float* const* b, int64_t nrows, int64_t count,
                         double* sums);

struct RowKernels {
  int lanes = 1;
  // out[i] = sum over t < taps of weights[t] * rows[t][i], i < count (out written, never read; zero for no taps).
  // rows may be read up to kRowSlack floats past count; out is written only below count. Register blocks of 1, 2
  // or 4 vectors along the row (the family's VECS): sum[VECS / 2].
  TapsSum sum[3] = {nullptr, nullptr, nullptr};
  // sums[t] += sum over rows i < nrows and columns c < count of a[t * nrows + i][c] * b[i][c], for t < taps: each
  // tap's products held in a vector across all rows, summed across lanes once. b is read only below count; the a
  // rows up to kRowSlack past it.
  TapsDot dot = nullptr;
};

// The kernels of one ISA (the CPU backend's active one by default: cpu::active_isa()).
const RowKernels& row_kernels(cpu::Isa isa);

}  // namespace convtune::cpu_depthwise
