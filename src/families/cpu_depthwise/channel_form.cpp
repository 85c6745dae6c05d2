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

namespace {

// One thread's buffers, kept between runs (thread_local). `zeros_of` names the form (ChannelForm's id_) whose
// padded copy's zero border the buffer holds: later items of that form write only the source's pixels.
struct ChannelScratch {
  std::vector<float> floats;
  uint64_t zeros_of = 0;
  float* aligned() {
    const auto at = reinterpret_cast<uintptr_t>(floats.data());
    return floats.data() + ((64 - at % 64) % 64) / sizeof(float);
  }
};

int64_t floor_mod(int64_t a, int64_t b) { return (a % b + b) % b; }

uint64_t next_form_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

}  // namespace

bool channel_form_applies(const ConvProblem& pb) {
  if (pb.groups != pb.c || pb.groups == 1 || pb.k != pb.c) return false;
  return pb.direction == Direction::Forward || pb.direction == Direction::BackwardData;
}

ChannelForm::ChannelForm(const ConvProblem& pb, int lanes) : pb_(pb), lanes_(lanes), id_(next_form_id()) {
  const int64_t sh = pb.stride.h, sw = pb.stride.w, dh = pb.dilation.h, dw = pb.dilation.w, L = lanes;
  if (pb.direction == Direction::Forward) {
    src_rows_ = pb.h, src_cols_ = pb.w, top_ = pb.pad.h, left_ = pb.pad.w;
    rows_ = std::max(top_ + pb.h, (pb.p() - 1) * sh + (pb.r - 1) * dh + 1);
    cols_ = std::max(left_ + pb.w, (pb.q() - 1) * sw + (pb.s - 1) * dw + 1);
    out_rows_ = pb.p(), out_cols_ = pb.q();
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

void ChannelForm::run(const RowKernels& k, const float* x, const float* w, float* y) const {
  const ConvProblem& pb = pb_;
  const int64_t L = lanes_, C = pb.c, blocks = (C + L - 1) / L, taps = pb.r * pb.s;
  const bool forward = pb.direction == Direction::Forward;
  const int64_t src_plane = src_rows_ * src_cols_, out_plane = out_rows_ * out_cols_;
  const float* in = forward ? x : y;
  float* out = forward ? y : const_cast<float*>(x);
  const size_t need = static_cast<size_t>(scratch_floats());
  parallel_for(pb.n * blocks, hardware_threads(), [&](int64_t item) {
    const int64_t n = item / blocks, b = item % blocks, c0 = b * L, channels = std::min(L, C - c0);
    thread_local ChannelScratch s;
    if (s.floats.size() < need) s.floats.resize(need), s.zeros_of = 0;
    float* buf = s.aligned();
    float* plane = buf + rows_ * cols_ * L;
    // The block's taps as vectors of its channels: wb[tap][lane] (zero past the last channel).
    float* wb = plane + out_rows_ * out_cols_ * L;
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t l = 0; l < L; ++l) wb[t * L + l] = l < channels ? w[(c0 + l) * taps + t] : 0.0f;
    // The copy: zeros above, below and beside the source's pixels (unless this thread's last item wrote them).
    const int64_t row_floats = cols_ * L;
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
    k.to_channels(in + (n * C + c0) * src_plane, src_plane, channels, src_rows_, src_cols_,
                  buf + top_ * row_floats + left_ * L, row_floats);
    for (const Sum& sum : sums_)
      k.channel_sum(buf, in_offsets_.data() + sum.first, wb, w_offsets_.data() + sum.first, sum.end - sum.first,
                    sum.count, sum.in_step, plane + (sum.row * out_cols_ + sum.x0) * L, sum.step * L);
    k.from_channels(plane, out_plane, channels, out + (n * C + c0) * out_plane, out_plane);
  });
}

}  // namespace convtune::cpu_depthwise
