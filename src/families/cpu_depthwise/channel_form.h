// cpu_depthwise's channel-blocked form: every direction with vectors across channels (lanes channels
// interleaved per pixel in a per-thread padded copy), for planes whose rows fill SIMD vectors poorly (7x7, 14x14,
// stride 2) and large filters.
#pragma once

#include <cstdint>
#include <vector>

#include "convtune/conv_problem.h"

namespace convtune::cpu_depthwise {

struct RowKernels;
struct ChannelScratch;

// Whether the form computes `pb`: depthwise with one output channel per group (no multiplier), every direction.
// Channel multipliers keep the plane form.
bool channel_form_applies(const ConvProblem& pb);

// One problem prepared once: the padded copy's geometry and every output row's taps.
class ChannelForm {
 public:
  // `pb` must satisfy channel_form_applies; `lanes` is the kernels' vector width.
  ChannelForm(const ConvProblem& pb, int lanes);
  // Floats of one thread's scratch: the padded interleaved copy, the output plane and slack for alignment.
  int64_t scratch_floats() const;
  // Forward writes y from x and w, backward-data writes x (dx) from y (dy) and w, backward-filter w from x and
  // y (NCHW / KCRS operands), with `k`, whose lanes are the constructor's.
  void run(const RowKernels& k, float* x, float* w, float* y) const;

 private:
  void backward_filter(const RowKernels& k, const float* x, const float* dy, float* dw) const;
  void fill(const RowKernels& k, ChannelScratch& s, const float* src, int64_t channels) const;
  // The sum of one output row and column phase: the columns from x0, stride `step`, `count` of them; taps
  // [first, end) of in_offsets_ / w_offsets_. (Backward-filter has none: in_offsets_ holds each output row's
  // first input row, w_offsets_ each tap's offset from it.)
  struct Sum {
    int64_t row = 0, x0 = 0, step = 1, count = 0, first = 0, end = 0, in_step = 0;
  };
  ConvProblem pb_;
  int64_t lanes_;
  uint64_t id_;  // never reused: which form's zeros a thread's scratch holds
  // The padded copy of the read operand (x forward, dy backward-data): rows_ x cols_ pixels of lanes floats, the
  // source's src_rows_ x src_cols_ from row top_, column left_, zeros around.
  int64_t rows_ = 0, cols_ = 0, top_ = 0, left_ = 0, src_rows_ = 0, src_cols_ = 0;
  int64_t out_rows_ = 0, out_cols_ = 0;
  std::vector<Sum> sums_;
  std::vector<int64_t> in_offsets_, w_offsets_;
};

}  // namespace convtune::cpu_depthwise
