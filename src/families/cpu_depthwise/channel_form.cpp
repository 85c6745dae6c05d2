// cpu_depthwise's channel-blocked form (channel_form.h): per (image, block of lanes channels) a padded copy with
// the channels interleaved per pixel, per output row and column phase one register-blocked sum over the filter
// taps into an interleaved output plane, and that plane moved back into the NCHW planes.
#include "src/families/cpu_depthwise/channel_form.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "src/core/parallel_for.h"
#include "src/families/cpu_depthwise/row_kernels.h"

namespace convtune::cpu_depthwise {

// One thread's buffers, kept between runs (thread_local). `zeros_of` names the form (ChannelForm's id_) whose
// padded copy's zero border the buffer holds: later items of that form write only the source's pixels.
struct ChannelScratch {
  std::vector<float> floats;
  uint64_t zeros_of = 0;
  // The run (a number never reused) and block whose weights the buffer holds: weights change between runs.
  uint64_t weights_run = 0;
  int64_t weights_of = -1;
  float* aligned() {
    const auto at = reinterpret_cast<uintptr_t>(floats.data());
    return floats.data() + ((64 - at % 64) % 64) / sizeof(float);
  }
};

namespace {

int64_t floor_mod(int64_t a, int64_t b) { return (a % b + b) % b; }

// This thread's scratch, at least `need` floats (a buffer that grows forgets what it held).
ChannelScratch& channel_scratch(size_t need) {
  thread_local ChannelScratch s;
  if (s.floats.size() < need) s.floats.resize(need), s.zeros_of = 0, s.weights_run = 0;
  return s;
}

// Numbers never reused, for forms and runs alike.
uint64_t next_form_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

}  // namespace

bool channel_form_applies(const ConvProblem& pb) {
  return pb.groups == pb.c && pb.groups > 1 && pb.k == pb.c;
}

ChannelForm::ChannelForm(const ConvProblem& pb, int lanes) : pb_(pb), lanes_(lanes), id_(next_form_id()) {
  const int64_t sh = pb.stride.h, sw = pb.stride.w, dh = pb.dilation.h, dw = pb.dilation.w, L = lanes;
  if (pb.direction != Direction::BackwardData) {
    // Forward, and backward-filter's x (its "output plane" below holds dy interleaved).
    src_rows_ = pb.h, src_cols_ = pb.w, top_ = pb.pad.h, left_ = pb.pad.w;
    rows_ = std::max(top_ + pb.h, (pb.p() - 1) * sh + (pb.r - 1) * dh + 1);
    cols_ = std::max(left_ + pb.w, (pb.q() - 1) * sw + (pb.s - 1) * dw + 1);
    out_rows_ = pb.p(), out_cols_ = pb.q();
    if (pb.direction == Direction::BackwardFilter) {
      for (int64_t p = 0; p < out_rows_; ++p) in_offsets_.push_back(p * sh * cols_ * L);
      for (int64_t r = 0; r < pb.r; ++r)
        for (int64_t t = 0; t < pb.s; ++t) w_offsets_.push_back((r * dh * cols_ + t * dw) * L);
      return;
    }
    for (int64_t p = 0; p < out_rows_; ++p) {
      Sum sum{p, 0, 1, out_cols_, static_cast<int64_t>(in_offsets_.size()), 0, sw * L};
      for (int64_t r = 0; r < pb.r; ++r) {
        const int64_t at = p * sh + r * dh;
        if (at < top_ || at >= top_ + src_rows_) continue;  // a row of padding only
        for (int64_t t = 0; t < pb.s; ++t) in_offsets_.push_back((at * cols_ + t * dw) * L), w_offsets_.push_back((r * pb.s + t) * L);
      }
      sum.end = static_cast<int64_t>(in_offsets_.size());
      sums_.push_back(sum);
    }
    return;
  }
  // Backward-data: dx (h, x) reads dy row (h + pad_h - r dh) / sh and column (x + pad_w - s dw) / sw where those
  // divide: from -ceil((R-1) dh / sh) up to (H - 1 + pad_h) / sh, which may pass P (zeros there). Columns of one
  // phase (x modulo sw) share their taps and read consecutive dy columns.
  src_rows_ = pb.p(), src_cols_ = pb.q();
  top_ = ((pb.r - 1) * dh + sh - 1) / sh, left_ = ((pb.s - 1) * dw + sw - 1) / sw;
  rows_ = top_ + std::max(pb.p(), (pb.h - 1 + pb.pad.h) / sh + 1);
  cols_ = left_ + std::max(pb.q(), (pb.w - 1 + pb.pad.w) / sw + 1);
  out_rows_ = pb.h, out_cols_ = pb.w;
  for (int64_t h = 0; h < out_rows_; ++h) {
    for (int64_t x0 = 0; x0 < std::min(sw, out_cols_); ++x0) {
      Sum sum{h, x0, sw, (out_cols_ - x0 + sw - 1) / sw, static_cast<int64_t>(in_offsets_.size()), 0, L};
      for (int64_t r = 0; r < pb.r; ++r) {
        const int64_t e = h + pb.pad.h - r * dh;
        if (floor_mod(e, sh) != 0) continue;
        const int64_t i = e / sh;
        if (i < 0 || i >= src_rows_) continue;  // zeros only
        for (int64_t t = 0; t < pb.s; ++t) {
          const int64_t f = x0 + pb.pad.w - t * dw;
          if (floor_mod(f, sw) != 0) continue;
          in_offsets_.push_back(((i + top_) * cols_ + f / sw + left_) * L), w_offsets_.push_back((r * pb.s + t) * L);
        }
      }
      sum.end = static_cast<int64_t>(in_offsets_.size());
      sums_.push_back(sum);
    }
  }
}

int64_t ChannelForm::scratch_floats() const {
  return (rows_ * cols_ + out_rows_ * out_cols_ + pb_.r * pb_.s) * lanes_ + 16;
}

void ChannelForm::run(const RowKernels& k, float* x, float* w, float* y) const {
  const ConvProblem& pb = pb_;
  const int64_t L = lanes_, C = pb.c, blocks = (C + L - 1) / L, taps = pb.r * pb.s;
  if (pb.direction == Direction::BackwardFilter) return backward_filter(k, x, y, w);
  const bool forward = pb.direction == Direction::Forward;
  const int64_t src_plane = src_rows_ * src_cols_, out_plane = out_rows_ * out_cols_;
  const float* in = forward ? x : y;
  float* out = forward ? y : x;
  const size_t need = static_cast<size_t>(scratch_floats());
  const uint64_t run = next_form_id();
  parallel_for(pb.n * blocks, hardware_threads(), [&](int64_t item) {
    // Images inside channel blocks: a thread's consecutive items share the block's weights.
    const int64_t b = item / pb.n, n = item % pb.n, c0 = b * L, channels = std::min(L, C - c0);
    ChannelScratch& s = channel_scratch(need);
    float* buf = s.aligned();
    float* plane = buf + rows_ * cols_ * L;
    // The block's taps as vectors of its channels, wb[tap][lane] (zero past the last channel): the interleave of
    // its filters (a scalar loop per item was a quarter of ConvNeXt's 7x7 on 7x7 planes).
    float* wb = plane + out_rows_ * out_cols_ * L;
    if (s.weights_run != run || s.weights_of != b) {
      k.to_channels(w + c0 * taps, taps, channels, 1, taps, wb, taps * L);
      s.weights_run = run, s.weights_of = b;
    }
    fill(k, s, in + (n * C + c0) * src_plane, channels);
    for (const Sum& sum : sums_)
      k.channel_sum(buf, in_offsets_.data() + sum.first, wb, w_offsets_.data() + sum.first, sum.end - sum.first,
                    sum.count, sum.in_step, plane + (sum.row * out_cols_ + sum.x0) * L, sum.step * L);
    k.from_channels(plane, out_plane, channels, out + (n * C + c0) * out_plane, out_plane);
  });
}

// dw[c][r][s] = sum over images and output pixels of x at the tap times dy, per block of lanes channels: x's
// padded interleaved copy and dy's plane interleaved, then one dot per tap across channels. A work item is a block
// with its images in order, so the sums (float over an image, double across images) do not depend on the threads.
void ChannelForm::backward_filter(const RowKernels& k, const float* x, const float* dy, float* dw) const {
  const ConvProblem& pb = pb_;
  const int64_t L = lanes_, C = pb.c, blocks = (C + L - 1) / L, taps = pb.r * pb.s;
  const int64_t src_plane = src_rows_ * src_cols_, out_plane = out_rows_ * out_cols_;
  const size_t need = static_cast<size_t>(scratch_floats());
  std::vector<double> sums(static_cast<size_t>(blocks * taps * L), 0.0);
  parallel_for(blocks, hardware_threads(), [&](int64_t b) {
    const int64_t c0 = b * L, channels = std::min(L, C - c0);
    ChannelScratch& s = channel_scratch(need);
    float* buf = s.aligned();
    float* plane = buf + rows_ * cols_ * L;
    double* block_sums = sums.data() + b * taps * L;
    for (int64_t n = 0; n < pb.n; ++n) {
      fill(k, s, x + (n * C + c0) * src_plane, channels);
      k.to_channels(dy + (n * C + c0) * out_plane, out_plane, channels, out_rows_, out_cols_, plane, out_cols_ * L);
      k.channel_dot(buf, in_offsets_.data(), out_rows_, out_cols_, pb.stride.w * L, w_offsets_.data(), taps, plane,
                    block_sums);
    }
  });
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < taps; ++t)
      dw[c * taps + t] = static_cast<float>(sums[static_cast<size_t>(((c / L) * taps + t) * L + c % L)]);
}

// The padded interleaved copy of `channels` planes from src into the thread's buffer: the zero border unless the
// buffer holds this form's already.
void ChannelForm::fill(const RowKernels& k, ChannelScratch& s, const float* src, int64_t channels) const {
  const int64_t L = lanes_, row_floats = cols_ * L, src_plane = src_rows_ * src_cols_;
  float* buf = s.aligned();
  if (s.zeros_of != id_) {
    std::fill(buf, buf + top_ * row_floats, 0.0f);
    std::fill(buf + (top_ + src_rows_) * row_floats, buf + rows_ * row_floats, 0.0f);
    for (int64_t i = top_; i < top_ + src_rows_; ++i) {
      float* row = buf + i * row_floats;
      std::fill(row, row + left_ * L, 0.0f);
      std::fill(row + (left_ + src_cols_) * L, row + row_floats, 0.0f);
    }
    s.zeros_of = id_;
  }
  k.to_channels(src, src_plane, channels, src_rows_, src_cols_, buf + top_ * row_floats + left_ * L, row_floats);
}

}  // namespace convtune::cpu_depthwise
