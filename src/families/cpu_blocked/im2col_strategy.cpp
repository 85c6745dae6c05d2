// Forward at unit stride as pixel vectors along whole output planes, across rows (ALGO 2). Per work item (ROW_BLOCK
// output rows of one image and group) the thread about to compute it copies, for every input channel c and filter
// column s, the input rows the item reads shifted by s's columns and cut to the output width Q: X_cs[i][ow] =
// x_padded[y0 + i][ow + s dilation_w]. Filter tap (r, s) of output pixel y0 Q + p is then X_cs at r dilation_h Q + p,
// one contiguous run over the item's pixels whatever the row boundaries, so VECS x COLS blocks of pixel vectors x
// output channels fill their lanes along the plane: Fashion-MNIST's first layer has rows of 28 pixels (28 of 32
// lanes under 16-lane vectors) and planes of 784 (49 whole vectors). The copy is S runs of Q floats per input row
// and channel, against Q x K FMA lanes a filter row: small beside the FMAs for a few dozen output channels.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "src/families/cpu_blocked/plan.h"

namespace convtune::cpu_blocked::detail {

namespace {

using Clock = std::chrono::steady_clock;

// The most floats padded_runs writes past a run (a vector less one, at most 16 lanes).
constexpr int64_t kSlack = 16;

class Im2colStrategy final : public Strategy {
 public:
  Im2colStrategy(const ConvProblem& pb, const Choice& choice, const KernelTable& kt)
      : pb_(pb), kt_(kt), lanes_(kt.lanes), nv_(static_cast<int>(choice.vecs)), nj_(static_cast<int>(choice.cols)) {
    groups_ = pb.groups, ic_ = pb.c_per_group(), oc_ = pb.k_per_group();
    p_ = pb.p(), q_ = pb.q();
    rows_ = choice.row_block > 0 ? std::min(choice.row_block, p_) : im2col_rows(pb);
    row_blocks_ = ceil_div(p_, rows_);
    in_rows_ = rows_ + (pb.r - 1) * pb.dilation.h;
    plane_ = in_rows_ * q_;
    threads_ = threads_for(pb);
    Carver size(nullptr);
    size.floats(buffer_floats() * threads_);
    workspace_ = size.used();
  }

  size_t workspace_bytes() const override { return workspace_; }
  size_t packed_weight_floats() const override { return static_cast<size_t>(groups_ * ic_ * pb_.r * pb_.s * oc_); }

  // [group][c][r][s][k]: a reduction step's COLS weights adjacent (the broadcast columns).
  void pack_weights(const float* w, float* packed) const override {
    const int64_t steps = ic_ * pb_.r * pb_.s;
    parallel_items(groups_ * oc_, threads_, [&](int64_t item, unsigned) {
      const int64_t g = item / oc_, o = item % oc_;
      const float* src = w + (g * oc_ + o) * steps;  // KCRS: filter (o, c, r, s) contiguous over (c, r, s)
      float* dst = packed + g * steps * oc_ + o;
      for (int64_t t = 0; t < steps; ++t) dst[t * oc_] = src[t];
    });
  }

  void run(float* x, const float* packed, float*, float* y, void* workspace, StageTimes& times) override {
    Carver carver(workspace);
    float* buffers = carver.floats(buffer_floats() * threads_);
    const auto start = Clock::now();
    const int64_t items = pb_.n * groups_ * row_blocks_;
    const int64_t steps = ic_ * pb_.r * pb_.s;
    const float* x_end = x + pb_.n * pb_.c * pb_.h * pb_.w;
    parallel_items(items, threads_, [&](int64_t item, unsigned t) {
      Digits d(item);
      const int64_t rb = d.next(row_blocks_);
      const int64_t g = d.next(groups_);
      const int64_t n = d.rest();
      const int64_t y0 = rb * rows_, rows = std::min(rows_, p_ - y0);
      float* buffer = buffers + static_cast<size_t>(t) * buffer_floats();
      gather(x + (n * pb_.c + g * ic_) * pb_.h * pb_.w, x_end, y0, rows, buffer);
      compute(buffer, rows * q_, packed + g * steps * oc_, y + ((n * pb_.k + g * oc_) * p_ + y0) * q_);
    });
    // The copies run inside the items, beside the kernels: all of it counts as compute.
    times.input_ms = 0;
    times.compute_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    times.output_ms = 0;
  }

  std::string describe() const override {
    return fmt::format("vectors along output planes (column-shifted input copies), pixels x channels block {}x{}, "
                       "{} row(s) of {} pixels per item",
                       nv_, nj_, rows_, q_);
  }

 private:
  // Per thread: the C/groups x S shifted copies (plane_ floats each), with slack for padded_runs and for the
  // kernels' whole-vector reads past the last pixel.
  size_t buffer_floats() const { return static_cast<size_t>(ic_ * pb_.s * plane_ + kSlack + 15) / 16 * 16; }

  // Each shifted copy's rows as padded runs read from the image (KernelTable::padded_runs, whole vectors: a run's
  // overshoot lands on the next run, written after it, or in the slack). Copy (c, s), row i is input row
  // y0 - pad_h + i from column s dilation_w - pad_w on: zeros left and right of the image's columns, zero rows above
  // and below it.
  void gather(const float* image, const float* x_end, int64_t y0, int64_t rows, float* buffer) const {
    const int64_t used_rows = rows + (pb_.r - 1) * pb_.dilation.h;
    const int64_t first = y0 - pb_.pad.h;  // the input row of copy row 0
    const int64_t top = std::clamp<int64_t>(-first, 0, used_rows);
    const int64_t inside = std::clamp<int64_t>(pb_.h - std::max<int64_t>(first, 0), 0, used_rows - top);
    const int64_t bottom = used_rows - top - inside;
    for (int64_t c = 0; c < ic_; ++c) {
      const float* plane = image + c * pb_.h * pb_.w;
      for (int64_t s = 0; s < pb_.s; ++s) {
        float* copy = buffer + (c * pb_.s + s) * plane_;
        const int64_t col = s * pb_.dilation.w - pb_.pad.w;  // the input column of output column 0
        const int64_t left = std::clamp<int64_t>(-col, 0, q_);
        const int64_t n = std::clamp<int64_t>(pb_.w - std::max<int64_t>(col, 0), 0, q_ - left);
        const float* from = plane + std::max<int64_t>(first, 0) * pb_.w + std::max<int64_t>(col, 0);
        kt_.padded_runs(plane, 0, x_end, q_, 0, copy, q_, q_, top);
        kt_.padded_runs(from, pb_.w, x_end, left, n, copy + top * q_, q_, q_, inside);
        kt_.padded_runs(plane, 0, x_end, q_, 0, copy + (top + inside) * q_, q_, q_, bottom);
      }
    }
    zero_run(buffer + ic_ * pb_.s * plane_, kSlack);
  }

  // out[o plane + i] for output channels o and the item's pixels i: groups of COLS channels outside spans of VECS
  // vectors, so each group's output runs are written front to back while the copies stay in cache.
  void compute(const float* buffer, int64_t pixels, const float* weights, float* out) const {
    const int64_t plane = p_ * q_, span = int64_t{nv_} * lanes_;
    const auto widths = [&](int nv) {
      return split_columns(oc_, nj_, [&](int n) { return kt_.bcast[nv - 1][n - 1] != nullptr; });
    };
    // Steps (c, r, s): c a channel's S copies further, r dilation_h rows of Q further, s the next copy.
    BcastArgs base;
    base.b_j = 1;
    base.n0 = ic_, base.a0 = pb_.s * plane_, base.b0 = pb_.r * pb_.s * oc_;
    base.n1 = pb_.r, base.a1 = pb_.dilation.h * q_, base.b1 = pb_.s * oc_;
    base.n2 = pb_.s, base.a2 = plane_, base.b2 = oc_;
    base.o_v = lanes_, base.o_lane = 1, base.o_j = plane;
    const auto block = [&](int64_t x0, int64_t o0, int width, int nv) {
      BcastArgs a = base;
      a.a = buffer + x0;
      a.b = weights + o0;
      a.out = out + o0 * plane + x0;
      a.valid = std::min<int64_t>(int64_t{nv} * lanes_, pixels - x0);
      kt_.bcast[nv - 1][width - 1](a);
    };
    const int64_t whole_end = pixels / span * span;
    int64_t o0 = 0;
    for (int width : widths(nv_)) {
      for (int64_t x0 = 0; x0 < whole_end; x0 += span) block(x0, o0, width, nv_);
      o0 += width;
    }
    if (whole_end == pixels) return;
    // The last, partial span: fewer vectors, their own (wider) split of the output channels.
    const int last_nv = static_cast<int>(ceil_div(pixels - whole_end, lanes_));
    o0 = 0;
    for (int width : widths(last_nv)) {
      block(whole_end, o0, width, last_nv);
      o0 += width;
    }
  }

  ConvProblem pb_;
  const KernelTable& kt_;
  int64_t lanes_;
  int nv_, nj_;
  int64_t groups_ = 1, ic_ = 1, oc_ = 1, p_ = 1, q_ = 1;
  int64_t rows_ = 1, row_blocks_ = 1;
  int64_t in_rows_ = 1;   // input rows one item of rows_ output rows reads
  int64_t plane_ = 1;     // floats of one shifted copy: in_rows_ x Q
  unsigned threads_ = 1;
  size_t workspace_ = 0;
};

}  // namespace

int64_t im2col_rows(const ConvProblem& problem) {
  // Floats one output row adds to an item's copies (S runs of Q per channel) and padded rows.
  const int64_t row_bytes = 4 * problem.c_per_group() * (problem.s * problem.q() + problem.w + 2 * problem.pad.w);
  return std::clamp<int64_t>(half_l2() / std::max<int64_t>(row_bytes, 1), 1, problem.p());
}

std::unique_ptr<Strategy> make_im2col_strategy(const ConvProblem& problem, const Choice& choice,
                                               const KernelTable& kernels) {
  return std::make_unique<Im2colStrategy>(problem, choice, kernels);
}

}  // namespace convtune::cpu_blocked::detail
