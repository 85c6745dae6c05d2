// Backward-filter: dW[k][c][kh][kw] = sum over images and output pixels of dy[k][pixel] x[c][pixel + tap], as
// register blocks that stay in registers over a whole reduction tile (images x rows). Three forms (ORIENT):
//   0 vectors of input channels (x copied channel-interleaved and padded), dy broadcast: many input channels;
//   1 dot products along output rows (x copied padded and split into stride phases so rows are contiguous),
//     lanes summed at the end: few channels on both sides. LAYOUT 1 (stride_h 1): dot products over whole output
//     planes instead, dy read in place and each reduction tile's x copied once per filter column with rows Q wide,
//     so a tap's reads over consecutive output rows are one run as dy's are; lane sums kept as vectors until the
//     end (fmnist1, one input channel: 1.39 -> 1.04 ms, where vectors over output channels paid for
//     interleaving its 10 MB of dy);
//   2 vectors of output channels (dy copied channel-interleaved), x broadcast along a row of filter taps: few
//     input channels, many output channels (AlexNet's first layer). LAYOUT 1 copies only each reduction tile's
//     rows of x and dy, right before the tile's kernels read them, into buffers that stay in L2, instead of both
//     whole tensors up front (alex1: 22 MB written and read back, 4 ms of a 19.5 ms run).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <tuple>

#include "convtune/error.h"
#include "src/core/parallel_for.h"
#include "src/families/cpu_blocked/plan.h"

namespace convtune::cpu_blocked::detail {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Bytes of operands one reduction tile may touch: about half of a core's L2 (half_l2(), 1 MiB on the developer
// host), so x and dy rows of a tile are read from cache by every output tile.
int64_t tile_bytes() { return half_l2(); }
// Whole-plane dots (ORIENT 1, LAYOUT 1): bytes of x copies and dy planes one reduction tile's block reads, about
// half of an L1d (24 KiB of the developer host's 48).
int64_t plane_tile_bytes() { return l1d_bytes() / 2; }

enum class Mode { ChannelVectors = 0, Dots = 1, KernelVectors = 2 };

class FilterStrategy final : public Strategy {
 public:
  FilterStrategy(const ConvProblem& pb, const Choice& choice, const KernelTable& kt)
      : pb_(pb), kt_(kt), lanes_(kt.lanes) {
    mode_ = static_cast<Mode>(choice.orient);
    cg_ = pb.c_per_group();
    kg_ = pb.k_per_group();
    p_ = pb.p();
    q_ = pb.q();
    // Padding: input rows oh * s + kh * d - pad for every output row and tap.
    pad_top_ = pb.pad.h;
    pad_left_ = pb.pad.w;
    pad_bottom_ = std::max<int64_t>(0, (p_ - 1) * pb.stride.h + (pb.r - 1) * pb.dilation.h - pb.pad.h - (pb.h - 1));
    pad_right_ = std::max<int64_t>(0, (q_ - 1) * pb.stride.w + (pb.s - 1) * pb.dilation.w - pb.pad.w - (pb.w - 1));
    hi_ = pb.h + pad_top_ + pad_bottom_;
    wi_ = pb.w + pad_left_ + pad_right_;
    nj_ = choice.cols;
    switch (mode_) {
      case Mode::Dots:
        ni_ = choice.vecs;
        phases_ = pb.stride.w;
        ws_ = (wi_ + phases_ - 1) / phases_;
        row_floats_ = phases_ * ws_;
        tap_period_ = pb.stride.w / std::gcd(pb.stride.w, pb.dilation.w);
        // 1x1: output channels x input channels over x and dy in place (channel_dots). Else LAYOUT 1: whole-plane
        // dots (stride_h 1, the constraints see to it).
        channel_dots_ = channel_dots(pb);
        planes_ = per_tile_ = choice.layout == 1 && !channel_dots_;
        break;
      case Mode::ChannelVectors:
        nv_ = static_cast<int>(std::min<int64_t>(choice.vecs, (cg_ + lanes_ - 1) / lanes_));
        block_ = int64_t{nv_} * lanes_;
        blocks_ = (cg_ + block_ - 1) / block_;
        row_floats_ = wi_ * block_;
        break;
      case Mode::KernelVectors:
        nv_ = static_cast<int>(std::min<int64_t>(choice.vecs, (kg_ + lanes_ - 1) / lanes_));
        block_ = int64_t{nv_} * lanes_;
        blocks_ = (kg_ + block_ - 1) / block_;
        row_floats_ = wi_;
        per_tile_ = choice.layout == 1;
        break;
    }
    // Reduction tiles: a block of rows of one image, or (all rows) as many whole images as fit tile_bytes().
    const int64_t image_bytes = static_cast<int64_t>(sizeof(float)) * (pb.c * hi_ * wi_ + pb.k * p_ * q_);
    if (choice.row_block > 0 && choice.row_block < p_) {
      rows_per_tile_ = choice.row_block;
      images_per_tile_ = 1;
    } else if (planes_) {
      // Whole-plane dots: a tile's x copy (every filter column's shift) and a block's dy planes within about
      // half of L1, so the dy planes a block of output channels reads stay there for every tap block.
      rows_per_tile_ = p_;
      const int64_t plane_bytes = static_cast<int64_t>(sizeof(float)) * (pb.c * pb.s * hi_ * q_ + ni_ * p_ * q_);
      images_per_tile_ = std::clamp<int64_t>(plane_tile_bytes() / std::max<int64_t>(plane_bytes, 1), 1, pb.n);
    } else {
      rows_per_tile_ = p_;
      images_per_tile_ = std::clamp<int64_t>(tile_bytes() / std::max<int64_t>(image_bytes, 1), 1, pb.n);
    }
    row_tiles_ = (p_ + rows_per_tile_ - 1) / rows_per_tile_;
    tiles_ = (pb.n + images_per_tile_ - 1) / images_per_tile_ * row_tiles_;
    threads_ = threads_for(pb);
    // Splitting the reduction needs a private result per thread; with fewer tiles than threads it cannot pay.
    split_reduction_ = choice.order == 1 && tiles_ > 1;
    // A 1x1 filter's channel vectors are runs of dW's own rows (dW[k][c], c contiguous): written there directly,
    // with no channel-blocked result to convert, unless threads split the reduction into copies of their own. Two
    // threads, alternated three times: ResNet-50's 2048 -> 512 on 7x7 4.0-4.2 -> 3.2-3.3 ms, the batch-1 512 ->
    // 1024 on 28x28 3.3 -> 2.7-2.8, 1024 -> 256 on 14x14 3.1-3.3 -> 2.9-3.0.
    direct_channels_ = mode_ == Mode::ChannelVectors && pb.r * pb.s == 1 && !split_reduction_;
    // Per-tile copies: the padded x rows one tile's output rows read (all taps), and its dy rows.
    x_rows_ = (rows_per_tile_ - 1) * pb.stride.h + (pb.r - 1) * pb.dilation.h + 1;
    Carver size(nullptr);
    carve(size);
    workspace_ = size.used();
  }

  size_t workspace_bytes() const override { return workspace_; }

  void run(float* x, const float*, float* w, float* y, void* workspace, StageTimes& times) override {
    Carver carver(workspace);
    Buffers b = carve(carver);
    if (per_tile_) {
      run_per_tile(x, y, w, b, times);
      return;
    }
    auto start = Clock::now();
    switch (mode_) {
      case Mode::ChannelVectors: copy_x_channel_blocked(x, b.x); break;
      case Mode::Dots:
        if (channel_dots_) {
          b.x = x;  // read in place
        } else {
          copy_x_phase_split(x, b.x);
        }
        break;
      case Mode::KernelVectors:
        copy_x_padded(x, b.x);
        copy_dy_channel_blocked(y, b.dy);
        break;
    }
    const float* dy = mode_ == Mode::KernelVectors ? b.dy : y;
    times.input_ms = ms_since(start);
    start = Clock::now();
    // Results go to per-thread copies when threads split the reduction, else (dots) straight to dW or to the
    // channel-blocked result.
    const unsigned copies = split_reduction_ ? threads_ : 1;
    parallel_threads(threads_, [&](unsigned t, unsigned nt) {
      if (split_reduction_) {
        const int64_t begin = tiles_ * t / nt, end = tiles_ * (t + 1) / nt;
        float* result = b.results + static_cast<int64_t>(t) * result_floats();
        if (begin == end) {
          std::fill(result, result + result_floats(), 0.0f);
          return;
        }
        for (int64_t tile = begin; tile < end; ++tile)
          for (int64_t o = 0; o < output_tiles(); ++o) output_tile(b.x, dy, result, tile, o, tile > begin);
      } else {
        const int64_t begin = output_tiles() * t / nt, end = output_tiles() * (t + 1) / nt;
        float* result = b.results ? b.results : w;
        for (int64_t tile = 0; tile < tiles_; ++tile)
          for (int64_t o = begin; o < end; ++o) output_tile(b.x, dy, result, tile, o, tile > 0);
      }
    });
    times.compute_ms = ms_since(start);
    start = Clock::now();
    finish(b.results, copies, w);
    times.output_ms = ms_since(start);
  }

  // The direct sum less the taps skipped because they read only padding: output rows per filter row in every
  // form, output columns per filter column with channel vectors (what the FMA units do, but for lanes of channel
  // padding), so % peak cannot read above 100 for a kernel that skips work.
  double performed_flops(const ConvProblem&) const override {
    double rows = 0, columns = 0;
    for (int64_t kh = 0; kh < pb_.r; ++kh) {
      const auto [from, to] = inside(0, p_, kh * pb_.dilation.h, pb_.stride.h, pad_top_, pad_top_ + pb_.h);
      rows += static_cast<double>(to - from);
    }
    for (int64_t kw = 0; kw < pb_.s; ++kw) {
      const auto [from, to] = mode_ == Mode::ChannelVectors
                                  ? inside(0, q_, kw * pb_.dilation.w, pb_.stride.w, pad_left_, pad_left_ + pb_.w)
                                  : std::pair<int64_t, int64_t>{0, q_};
      columns += static_cast<double>(to - from);
    }
    return 2.0 * static_cast<double>(pb_.n * pb_.groups * kg_ * cg_) * rows * columns;
  }

  std::string describe() const override {
    const char* form = mode_ == Mode::ChannelVectors ? "vectors over input channels, channels x output channels"
                       : channel_dots_ ? "dot products along whole planes, output channels x input channels, x and dy "
                                         "read in place"
                       : mode_ == Mode::Dots ? "dot products along rows, output channels x taps"
                                             : "vectors over output channels, channels x taps";
    return fmt::format("{} block {}x{}, reduction tiles of {} image(s) x {} row(s){}, threads split the {}", form,
                       mode_ == Mode::Dots ? ni_ : nv_, nj_, images_per_tile_, rows_per_tile_,
                       planes_ ? ", whole planes (x copied per tap column)" : per_tile_ ? " copied per tile" : "",
                       split_reduction_ ? "reduction (private sums)" : "output tiles");
  }

 private:
  struct Buffers {
    float* x = nullptr;
    float* dy = nullptr;
    float* results = nullptr;
  };

  // Where the kernels read one reduction tile's x and dy: the whole copies, or a tile's own (per_tile_). x's
  // padded row `row` of channel c of the tile's image i is at x + i * x_image + c * x_plane + (row - x_row0) * wi_;
  // dy's output row oh of (group, block) gb at dy + i * dy_image + gb * dy_block + (oh - dy_row0) * q * block.
  struct TileView {
    const float* x = nullptr;
    int64_t x_image = 0, x_plane = 0, x_row0 = 0;
    const float* dy = nullptr;
    int64_t dy_image = 0, dy_block = 0, dy_row0 = 0;
  };

  // The views of the whole copies, for the tile starting at image n0.
  TileView whole_view(const float* x, const float* dy, int64_t n0) const {
    TileView v;
    v.x_image = pb_.c * hi_ * wi_, v.x_plane = hi_ * wi_;
    v.x = x + n0 * v.x_image;
    v.dy_block = p_ * q_ * block_, v.dy_image = pb_.groups * blocks_ * v.dy_block;
    v.dy = dy + n0 * v.dy_image;
    return v;
  }

  // Floats of one tile's copies (per_tile_): x rows of every channel, dy rows of every channel block.
  // Whole-plane dots: x rows Q wide, one copy per filter column (kw), dy read in place.
  int64_t tile_x_floats() const {
    return planes_ ? images_per_tile_ * pb_.c * pb_.s * x_rows_ * q_ : images_per_tile_ * pb_.c * x_rows_ * wi_;
  }
  int64_t tile_dy_floats() const {
    return planes_ ? 0 : images_per_tile_ * pb_.groups * blocks_ * rows_per_tile_ * q_ * block_;
  }

  // Copies reduction tile `tile`'s x rows (zero padded) and dy rows (channel-interleaved) into `xs` and `dys`,
  // items [part, ...) of every `parts`-th (threads share one tile's copy), and returns the tile's view.
  TileView copy_tile(const float* x, const float* y, int64_t tile, float* xs, float* dys, int64_t part,
                     int64_t parts) const {
    if (planes_) return copy_tile_planes(x, y, tile, xs, part, parts);
    const Range r = range_of(tile);
    TileView v;
    v.x = xs, v.x_plane = x_rows_ * wi_, v.x_image = pb_.c * v.x_plane, v.x_row0 = r.oh0 * pb_.stride.h;
    v.dy = dys, v.dy_block = rows_per_tile_ * q_ * block_, v.dy_image = pb_.groups * blocks_ * v.dy_block;
    v.dy_row0 = r.oh0;
    const int64_t rows = std::min(x_rows_, hi_ - v.x_row0);
    const int64_t x_items = r.images * pb_.c, dy_items = r.images * pb_.groups * blocks_;
    for (int64_t item = part; item < x_items + dy_items; item += parts) {
      if (item < x_items) {
        const int64_t i = item / pb_.c, c = item % pb_.c;
        const float* src = x + ((r.n0 + i) * pb_.c + c) * pb_.h * pb_.w;
        float* d = xs + i * v.x_image + c * v.x_plane;
        for (int64_t j = 0; j < rows; ++j) {
          float* row = d + j * wi_;
          const int64_t in_row = v.x_row0 + j - pad_top_;
          if (in_row < 0 || in_row >= pb_.h) {
            std::fill(row, row + wi_, 0.0f);
            continue;
          }
          padded_row(row, src + in_row * pb_.w, pad_left_, pb_.w, wi_ - pad_left_ - pb_.w);
        }
      } else {
        const int64_t rest = item - x_items;
        const int64_t i = rest / (pb_.groups * blocks_), gb = rest % (pb_.groups * blocks_);
        const int64_t g = gb / blocks_, k0 = (gb % blocks_) * block_;
        // The tile's rows of a plane are one run of rows x Q pixels.
        kt_.interleave(y + ((r.n0 + i) * pb_.k + g * kg_ + k0) * p_ * q_ + r.oh0 * q_, p_ * q_,
                       std::min(block_, kg_ - k0), r.rows * q_, dys + i * v.dy_image + gb * v.dy_block, block_);
      }
    }
    return v;
  }

  // Whole-plane dots: for each image, channel and filter column kw, the tile's padded x rows with column q holding
  // padded column q * stride_w + kw * dilation_w (rows Q wide), so that with stride_h 1 filter tap (kh, kw) reads
  // output row oh's pixels at row oh + kh * dilation_h of copy kw: consecutive output rows are one contiguous run,
  // as dy's rows are in its NCHW planes (read in place). x_plane: floats per channel (S copies).
  TileView copy_tile_planes(const float* x, const float* y, int64_t tile, float* xs, int64_t part,
                            int64_t parts) const {
    const Range r = range_of(tile);
    TileView v;
    const int64_t copy_floats = x_rows_ * q_;
    v.x = xs, v.x_plane = pb_.s * copy_floats, v.x_image = pb_.c * v.x_plane, v.x_row0 = r.oh0;
    v.dy = y, v.dy_image = pb_.k * p_ * q_, v.dy_block = p_ * q_;
    const int64_t rows = std::min(x_rows_, hi_ - v.x_row0);
    const int64_t items = r.images * pb_.c * pb_.s;
    for (int64_t item = part; item < items; item += parts) {
      Digits digits(item);
      const int64_t kw = digits.next(pb_.s), c = digits.next(pb_.c), i = digits.rest();
      const float* src = x + ((r.n0 + i) * pb_.c + c) * pb_.h * pb_.w;
      float* d = xs + i * v.x_image + c * v.x_plane + kw * copy_floats;
      // Output column q reads input column q * stride_w + shift; with unit stride the real ones are [lo, hi).
      const int64_t shift = kw * pb_.dilation.w - pad_left_;
      const int64_t lo = std::clamp<int64_t>(-shift, 0, q_), hi = std::clamp<int64_t>(pb_.w - shift, lo, q_);
      if (pb_.stride.w == 1 && q_ == pb_.w) {
        // Rows as wide as the input's ("same" padding): the copy is the image's real rows shifted by `shift`
        // floats as one run, then the columns that wrapped into the next or previous row zeroed. Row by row
        // (three short pieces each) it took about 17% of fmnist1's one-thread samples beside the dots' 40%.
        const int64_t j0 = std::clamp<int64_t>(pad_top_ - v.x_row0, 0, rows);
        const int64_t j1 = std::clamp<int64_t>(pb_.h + pad_top_ - v.x_row0, j0, rows);
        zero_run(d, j0 * q_);
        zero_run(d + j1 * q_, (rows - j1) * q_);
        const int64_t n = (j1 - j0) * q_;
        const float* s0 = src + (v.x_row0 + j0 - pad_top_) * pb_.w;
        float* d0 = d + j0 * q_;
        // Reads stay within the real rows: d0[t] = s0[t + shift] for t + shift in [0, n).
        const int64_t from = std::max<int64_t>(0, -shift), to = n - std::max<int64_t>(0, shift);
        if (to > from) copy_run(d0 + from, s0 + from + shift, to - from);
        for (int64_t j = 0; j < j1 - j0; ++j) {
          for (int64_t col = 0; col < lo; ++col) d0[j * q_ + col] = 0.0f;
          for (int64_t col = hi; col < q_; ++col) d0[j * q_ + col] = 0.0f;
        }
        continue;
      }
      for (int64_t j = 0; j < rows; ++j) {
        float* row = d + j * q_;
        const int64_t in_row = v.x_row0 + j - pad_top_;
        if (in_row < 0 || in_row >= pb_.h) {
          zero_run(row, q_);
          continue;
        }
        const float* in = src + in_row * pb_.w;
        if (pb_.stride.w == 1) {
          zero_run(row, lo);
          copy_run(row + lo, in + lo + shift, hi - lo);
          zero_run(row + hi, q_ - hi);
          continue;
        }
        for (int64_t col = 0; col < q_; ++col) {
          const int64_t at = col * pb_.stride.w + shift;
          row[col] = at >= 0 && at < pb_.w ? in[at] : 0.0f;
        }
      }
    }
    return v;
  }

  // LAYOUT 1: every reduction tile copied right before its kernels run. Threads splitting the reduction copy
  // their own tiles; threads splitting the output tiles share one copy per tile, made by all of them first.
  void run_per_tile(const float* x, const float* y, float* w, const Buffers& b, StageTimes& times) const {
    const auto start = Clock::now();
    const unsigned copies = split_reduction_ ? threads_ : 1;
    if (split_reduction_) {
      parallel_threads(threads_, [&](unsigned t, unsigned nt) {
        const int64_t begin = tiles_ * t / nt, end = tiles_ * (t + 1) / nt;
        float* result = b.results + static_cast<int64_t>(t) * result_floats();
        if (begin == end) {
          std::fill(result, result + result_floats(), 0.0f);
          return;
        }
        float* xs = b.x + t * tile_x_floats();
        float* dys = b.dy + t * tile_dy_floats();
        for (int64_t tile = begin; tile < end; ++tile) {
          const TileView v = copy_tile(x, y, tile, xs, dys, 0, 1);
          tile_kernels(v, result, range_of(tile), 0, output_tiles(), tile > begin);
        }
      });
    } else {
      for (int64_t tile = 0; tile < tiles_; ++tile) {
        TileView v;
        parallel_threads(threads_, [&](unsigned t, unsigned nt) {
          const TileView mine = copy_tile(x, y, tile, b.x, b.dy, t, nt);
          if (t == 0) v = mine;
        });
        parallel_threads(threads_, [&](unsigned t, unsigned nt) {
          const int64_t begin = output_tiles() * t / nt, end = output_tiles() * (t + 1) / nt;
          tile_kernels(v, b.results, range_of(tile), begin, end, tile > 0);
        });
      }
    }
    // Copies and kernels interleave: all of it counts as compute.
    times.compute_ms = ms_since(start);
    const auto out_start = Clock::now();
    finish(b.results, copies, w);
    times.output_ms = ms_since(out_start);
  }

  // Floats of one result copy: dW itself (dots), a vector of lane sums per dW element (whole-plane dots), or its
  // channel-blocked form [group][block][other channel][R][S][lanes].
  int64_t result_floats() const {
    if (planes_) return pb_.w_elements() * lanes_;
    if (mode_ == Mode::Dots) return pb_.w_elements();
    return pb_.groups * blocks_ * (mode_ == Mode::ChannelVectors ? kg_ : cg_) * pb_.r * pb_.s * block_;
  }

  Buffers carve(Carver& c) const {
    Buffers b;
    if (per_tile_) {
      const int64_t copies = split_reduction_ ? threads_ : 1;
      b.x = c.floats(static_cast<size_t>(copies * tile_x_floats()));
      b.dy = c.floats(static_cast<size_t>(copies * tile_dy_floats()));
      b.results = c.floats(static_cast<size_t>(copies * result_floats()));
      return b;
    }
    const int64_t x_planes = mode_ == Mode::ChannelVectors ? pb_.n * pb_.groups * blocks_
                             : channel_dots_                ? 0
                                                            : pb_.n * pb_.c;
    if (x_planes > 0) b.x = c.floats(static_cast<size_t>(x_planes * hi_ * row_floats_));
    if (mode_ == Mode::KernelVectors) b.dy = c.floats(static_cast<size_t>(pb_.n * pb_.groups * blocks_ * p_ * q_ * block_));
    const bool direct = (mode_ == Mode::Dots && !split_reduction_) || direct_channels_;
    const int64_t copies = split_reduction_ ? threads_ : 1;
    if (!direct) b.results = c.floats(static_cast<size_t>(copies * result_floats()));
    return b;
  }

  void copy_x_channel_blocked(const float* x, float* out) const {
    copy_channel_blocked({pb_.n * pb_.groups, cg_, pb_.h, pb_.w, pad_top_, pad_left_, hi_, wi_, block_}, x, out, kt_, threads_);
  }
  void copy_dy_channel_blocked(const float* dy, float* out) const {
    copy_channel_blocked({pb_.n * pb_.groups, kg_, p_, q_, 0, 0, p_, q_, block_}, dy, out, kt_, threads_);
  }

  // x -> [n][c][Hi][Wi], zero borders.
  void copy_x_padded(const float* x, float* out) const {
    parallel_items(pb_.n * pb_.c, threads_, [&](int64_t plane, unsigned) {
      float* d = out + plane * hi_ * wi_;
      std::memset(d, 0, static_cast<size_t>(hi_ * wi_) * sizeof(float));
      const float* s = x + plane * pb_.h * pb_.w;
      for (int64_t r = 0; r < pb_.h; ++r)
        std::memcpy(d + (r + pad_top_) * wi_ + pad_left_, s + r * pb_.w, static_cast<size_t>(pb_.w) * sizeof(float));
    });
  }

  // x -> [n][c][Hi][phase][Ws]: padded rows with column i at (i % stride, i / stride), so a stride-s row of
  // taps is a contiguous run in its phase.
  void copy_x_phase_split(const float* x, float* out) const {
    parallel_items(pb_.n * pb_.c, threads_, [&](int64_t plane, unsigned) {
      float* d = out + plane * hi_ * row_floats_;
      std::memset(d, 0, static_cast<size_t>(hi_ * row_floats_) * sizeof(float));
      const float* s = x + plane * pb_.h * pb_.w;
      for (int64_t r = 0; r < pb_.h; ++r) {
        float* row = d + (r + pad_top_) * row_floats_;
        const float* in_row = s + r * pb_.w;
        if (phases_ == 1) {
          std::memcpy(row + pad_left_, in_row, static_cast<size_t>(pb_.w) * sizeof(float));
          continue;
        }
        // Phase by phase: padded column i = phase + j * stride comes from input column i - pad_left.
        for (int64_t ph = 0; ph < phases_; ++ph) {
          float* o = row + ph * ws_;
          int64_t j = 0, col = ph - pad_left_;
          for (; col < 0; ++j, col += phases_) {
          }
          for (; col < pb_.w; ++j, col += phases_) o[j] = in_row[col];
        }
      }
    });
  }

  // Output tiles: channel vectors (group, channel block, output-channel block of COLS, kh, kw); dots (group,
  // output-channel block of VECS, channel, kh, tap class, tap block; whole-plane dots: block of COLS taps kw);
  // kernel vectors (group, output-channel block, channel, kh, block of COLS taps kw).
  int64_t output_tiles() const {
    switch (mode_) {
      case Mode::ChannelVectors: return pb_.groups * blocks_ * ceil_div(kg_, nj_) * pb_.r * pb_.s;
      case Mode::Dots:
        if (channel_dots_) return pb_.groups * ceil_div(cg_, nj_) * ceil_div(kg_, ni_);
        return pb_.groups * ceil_div(kg_, ni_) * cg_ * pb_.r * (planes_ ? ceil_div(pb_.s, nj_) : tap_blocks());
      case Mode::KernelVectors: return pb_.groups * blocks_ * cg_ * pb_.r * ceil_div(pb_.s, nj_);
    }
    return 0;
  }
  // Taps kw of one class (kw % tap_period) are adjacent in the phase-split rows.
  int64_t taps_in_class(int64_t cls) const { return cls < pb_.s ? (pb_.s - cls + tap_period_ - 1) / tap_period_ : 0; }
  int64_t tap_blocks() const {
    int64_t most = 0;
    for (int64_t cls = 0; cls < std::min(tap_period_, pb_.s); ++cls) most = std::max(most, taps_in_class(cls));
    return std::min(tap_period_, pb_.s) * ceil_div(most, nj_);
  }

  // Widest compiled column count not above n (the last block of a dimension that does not divide).
  int fit(int n) const {
    for (int m = n; m > 1; --m)
      if (mode_ == Mode::Dots ? kt_.dot[ni_ - 1][m - 1] != nullptr : kt_.bcast[nv_ - 1][m - 1] != nullptr) return m;
    return 1;
  }

  // The reduction tile: images [n0, n0 + images), output rows [oh0, oh0 + rows).
  struct Range {
    int64_t n0 = 0, images = 1, oh0 = 0, rows = 1;
  };

  Range range_of(int64_t tile) const {
    Range r;
    r.n0 = (tile / row_tiles_) * images_per_tile_;
    r.images = std::min(images_per_tile_, pb_.n - r.n0);
    r.oh0 = (tile % row_tiles_) * rows_per_tile_;
    r.rows = std::min(rows_per_tile_, p_ - r.oh0);
    return r;
  }

  void output_tile(const float* input, const float* dy, float* result, int64_t tile, int64_t o,
                   bool accumulate) const {
    const Range r = range_of(tile);
    switch (mode_) {
      case Mode::ChannelVectors: channel_tile(input, dy, result, r, o, accumulate); break;
      case Mode::Dots: dot_tile(input, dy, result, r, o, accumulate); break;
      case Mode::KernelVectors: kernel_tile(whole_view(input, dy, r.n0), result, r, o, accumulate); break;
    }
  }

  // Output rows of the tile whose input row for filter row kh is a real row of the padded x copy.
  std::pair<int64_t, int64_t> real_rows(const Range& r, int64_t kh) const {
    return inside(r.oh0, r.oh0 + r.rows, kh * pb_.dilation.h, pb_.stride.h, pad_top_, pad_top_ + pb_.h);
  }

  void channel_tile(const float* xb, const float* dy, float* result, const Range& r, int64_t o,
                    bool accumulate) const {
    Digits digits(o);
    const int64_t kw = digits.next(pb_.s), kh = digits.next(pb_.r), kb = digits.next(ceil_div(kg_, nj_));
    const int64_t cb = digits.next(blocks_), g = digits.rest();
    const int64_t k0 = kb * nj_;
    const int64_t k_end = std::min(kg_, k0 + nj_);
    // Only the output rows and columns whose input pixel for this tap is real, not padding.
    const auto [oh0, oh1] = real_rows(r, kh);
    const auto [ow0, ow1] = inside(0, q_, kw * pb_.dilation.w, pb_.stride.w, pad_left_, pad_left_ + pb_.w);
    BcastArgs a;
    a.b_j = p_ * q_;
    a.n0 = r.images, a.a0 = pb_.groups * blocks_ * hi_ * wi_ * block_, a.b0 = pb_.k * p_ * q_;
    a.n1 = oh1 - oh0, a.a1 = pb_.stride.h * wi_ * block_, a.b1 = q_;
    a.n2 = ow1 - ow0, a.a2 = pb_.stride.w * block_, a.b2 = 1;
    a.o_v = lanes_, a.o_lane = 1, a.o_j = direct_channels_ ? cg_ : pb_.r * pb_.s * block_;
    // Into dW itself only the block's real channels; the channel-blocked result has room for the padding lanes.
    a.valid = direct_channels_ ? std::min(block_, cg_ - cb * block_) : block_;
    a.accumulate = accumulate;
    const float* x_image = xb + ((r.n0 * pb_.groups + g) * blocks_ + cb) * hi_ * wi_ * block_;
    a.a = x_image +
          ((oh0 * pb_.stride.h + kh * pb_.dilation.h) * wi_ + ow0 * pb_.stride.w + kw * pb_.dilation.w) * block_;
    // Channel-blocked result [group][channel block][k][kh][kw][block], or (direct_channels_) dW [k][c].
    float* out = direct_channels_ ? result + g * kg_ * cg_ + cb * block_
                                  : result + ((((g * blocks_ + cb) * kg_) * pb_.r + kh) * pb_.s + kw) * block_;
    for (int64_t k = k0; k < k_end;) {
      const int use = fit(static_cast<int>(std::min<int64_t>(k_end - k, nj_)));
      a.b = dy + ((r.n0 * pb_.k + g * kg_ + k) * p_ + oh0) * q_ + ow0;
      a.out = out + k * a.o_j;
      kt_.bcast[nv_ - 1][use - 1](a);
      k += use;
    }
  }

  void kernel_tile(const TileView& v, float* result, const Range& r, int64_t o, bool accumulate) const {
    Digits digits(o);
    const int64_t tb = digits.next(ceil_div(pb_.s, nj_)), kh = digits.next(pb_.r), c = digits.next(cg_);
    const int64_t kb = digits.next(blocks_), g = digits.rest();
    const int64_t kw0 = tb * nj_;
    const int64_t kw_end = std::min(pb_.s, kw0 + nj_);
    // Only the output rows whose input row for this filter row is real (the taps of a block share columns).
    const auto [oh0, oh1] = real_rows(r, kh);
    BcastArgs a;
    a.b_j = pb_.dilation.w;
    a.n0 = r.images, a.a0 = v.dy_image, a.b0 = v.x_image;
    a.n1 = oh1 - oh0, a.a1 = q_ * block_, a.b1 = pb_.stride.h * wi_;
    a.n2 = q_, a.a2 = block_, a.b2 = pb_.stride.w;
    a.o_v = lanes_, a.o_lane = 1, a.o_j = block_;
    a.valid = block_;
    a.accumulate = accumulate;
    a.a = v.dy + (g * blocks_ + kb) * v.dy_block + (oh0 - v.dy_row0) * q_ * block_;
    const float* x_row =
        v.x + (g * cg_ + c) * v.x_plane + (oh0 * pb_.stride.h + kh * pb_.dilation.h - v.x_row0) * wi_;
    // Channel-blocked result [group][output-channel block][c][kh][kw][block].
    float* out = result + ((((g * blocks_ + kb) * cg_ + c) * pb_.r + kh) * pb_.s) * block_;
    for (int64_t kw = kw0; kw < kw_end;) {
      const int use = fit(static_cast<int>(std::min<int64_t>(kw_end - kw, nj_)));
      a.b = x_row + kw * pb_.dilation.w;
      a.out = out + kw * block_;
      kt_.bcast[nv_ - 1][use - 1](a);
      kw += use;
    }
  }

  // channel_dots_: dW[k][c] (+)= the dot products of dy's rows k and x's rows c over the tile's images, output
  // tile o = (group, block of COLS input channels, block of VECS output channels), output channels fastest: a
  // thread's consecutive tiles keep one block of x rows in L1 and walk dy's rows (in L2).
  void channel_dot_tile(const float* x, const float* dy, float* result, const Range& r, int64_t o,
                        bool accumulate) const {
    Digits digits(o);
    const int64_t kb = digits.next(ceil_div(kg_, ni_)), cb = digits.next(ceil_div(cg_, nj_)), g = digits.rest();
    const int64_t k0 = kb * ni_, ks = std::min<int64_t>(ni_, kg_ - k0);
    const int64_t c0 = cb * nj_, cs = std::min<int64_t>(nj_, cg_ - c0);
    DotArgs a;
    a.a_i = q_, a.b_j = q_, a.len = q_;
    a.n0 = r.images, a.a0 = pb_.k * q_, a.b0 = pb_.c * q_;
    a.o_i = cg_, a.o_j = 1;
    a.accumulate = accumulate;
    for (int64_t c = c0; c < c0 + cs;) {
      const int use_j = fit(static_cast<int>(std::min<int64_t>(c0 + cs - c, nj_)));
      for (int64_t k = k0; k < k0 + ks;) {
        int use_i = static_cast<int>(std::min<int64_t>(k0 + ks - k, ni_));
        while (use_i > 1 && kt_.dot[use_i - 1][use_j - 1] == nullptr) --use_i;
        a.a = dy + (r.n0 * pb_.k + g * kg_ + k) * q_;
        a.b = x + (r.n0 * pb_.c + g * cg_ + c) * q_;
        a.out = result + (g * kg_ + k) * cg_ + c;
        kt_.dot[use_i - 1][use_j - 1](a);
        k += use_i;
      }
      c += use_j;
    }
  }

  void dot_tile(const float* xs, const float* dy, float* result, const Range& r, int64_t o, bool accumulate) const {
    if (channel_dots_) {
      channel_dot_tile(xs, dy, result, r, o, accumulate);
      return;
    }
    const int64_t classes = std::min(tap_period_, pb_.s);
    const int64_t per_class = tap_blocks() / classes;
    Digits digits(o);
    const int64_t tb = digits.next(per_class), cls = digits.next(classes), kh = digits.next(pb_.r);
    const int64_t c = digits.next(cg_), kb = digits.next(ceil_div(kg_, ni_)), g = digits.rest();
    // Taps of this block: kw = cls + (tb * nj + m) * tap_period.
    const int64_t first = tb * nj_;
    const int64_t taps = std::min<int64_t>(nj_, taps_in_class(cls) - first);
    if (taps <= 0) return;
    const int64_t kw0 = cls + first * tap_period_;
    const int64_t e0 = kw0 * pb_.dilation.w;  // padded column of tap kw0 for output column 0
    const int64_t k0 = kb * ni_;
    const int64_t ks = std::min<int64_t>(ni_, kg_ - k0);
    // Only the output rows whose input row for this filter row is real (the taps of a block share columns).
    const auto [oh0, oh1] = real_rows(r, kh);
    DotArgs a;
    a.a_i = p_ * q_;
    a.b_j = tap_period_ * pb_.dilation.w / phases_;
    a.len = q_;
    a.n0 = r.images, a.a0 = pb_.k * p_ * q_, a.b0 = pb_.c * hi_ * row_floats_;
    a.n1 = oh1 - oh0, a.a1 = q_, a.b1 = pb_.stride.h * row_floats_;
    a.o_i = cg_ * pb_.r * pb_.s, a.o_j = tap_period_;
    a.accumulate = accumulate;
    const float* x_plane = xs + (r.n0 * pb_.c + g * cg_ + c) * hi_ * row_floats_;
    const float* b = x_plane + (oh0 * pb_.stride.h + kh * pb_.dilation.h) * row_floats_ + (e0 % phases_) * ws_ +
                     e0 / phases_;
    for (int64_t t = 0; t < taps;) {
      const int use_j = fit(static_cast<int>(std::min<int64_t>(taps - t, nj_)));
      for (int64_t k = k0; k < k0 + ks;) {
        int use_i = static_cast<int>(std::min<int64_t>(k0 + ks - k, ni_));
        while (use_i > 1 && kt_.dot[use_i - 1][use_j - 1] == nullptr) --use_i;
        a.a = dy + ((r.n0 * pb_.k + g * kg_ + k) * p_ + oh0) * q_;
        a.b = b + t * a.b_j;
        a.out = result + ((g * kg_ + k) * cg_ + c) * pb_.r * pb_.s + kh * pb_.s + kw0 + t * tap_period_;
        kt_.dot[use_i - 1][use_j - 1](a);
        k += use_i;
      }
      t += use_j;
    }
  }

  // Output tiles [begin, end)'s kernels on a per-tile copy (LAYOUT 1).
  void tile_kernels(const TileView& v, float* result, const Range& r, int64_t begin, int64_t end,
                    bool accumulate) const {
    if (planes_) {
      plane_tiles(v, result, r, begin, end, accumulate);
      return;
    }
    for (int64_t o = begin; o < end; ++o) kernel_tile(v, result, r, o, accumulate);
  }

  // Whole-plane dots: dW[k][c][kh][kw] over the tile's images and real output rows, as one run of (rows x Q)
  // pixels per tap: the tap block's columns kw are x copies x_plane / S apart, the block's output channels dy
  // planes P x Q apart. Output tiles [begin, end) in order (tap block fastest, then kh, c, output-channel block,
  // group), their digits stepped rather than divided out per tile: a block's call is a few hundred cycles.
  void plane_tiles(const TileView& v, float* result, const Range& r, int64_t begin, int64_t end,
                   bool accumulate) const {
    const int64_t tap_blocks = ceil_div(pb_.s, nj_), k_blocks = ceil_div(kg_, ni_);
    const int64_t copy_floats = x_rows_ * q_;
    Digits digits(begin);
    int64_t tb = digits.next(tap_blocks), kh = digits.next(pb_.r), c = digits.next(cg_);
    int64_t kb = digits.next(k_blocks), g = digits.rest();
    DotArgs a;
    a.a_i = v.dy_block;
    a.b_j = copy_floats;
    a.n0 = r.images, a.a0 = v.dy_image, a.b0 = v.x_image;
    a.o_i = cg_ * pb_.r * pb_.s * lanes_, a.o_j = lanes_;
    a.accumulate = accumulate;
    a.vectors = true;
    a.align = true;
    // The calls that read one block of dy planes (every tap of every channel), and the share of the next block's
    // planes each prefetches (the planes after a block's are the next block's, or the next image's first).
    const int64_t calls = cg_ * pb_.r * tap_blocks;
    const int64_t share = ceil_div(ni_ * v.dy_block, calls);
    auto [oh0, oh1] = real_rows(r, kh);
    for (int64_t o = begin; o < end; ++o) {
      const int64_t kw0 = tb * nj_, taps = std::min<int64_t>(nj_, pb_.s - kw0);
      const int64_t k0 = kb * ni_, ks = std::min<int64_t>(ni_, kg_ - k0);
      const int64_t call = (c * pb_.r + kh) * tap_blocks + tb;
      a.len = std::max<int64_t>(oh1 - oh0, 0) * q_;
      const float* b =
          v.x + (g * cg_ + c) * v.x_plane + kw0 * copy_floats + (oh0 + kh * pb_.dilation.h - v.x_row0) * q_;
      for (int64_t t = 0; t < taps;) {
        const int use_j = fit(static_cast<int>(std::min<int64_t>(taps - t, nj_)));
        for (int64_t k = k0; k < k0 + ks;) {
          int use_i = static_cast<int>(std::min<int64_t>(k0 + ks - k, ni_));
          while (use_i > 1 && kt_.dot[use_i - 1][use_j - 1] == nullptr) --use_i;
          const float* planes = v.dy + r.n0 * v.dy_image + (g * kg_ + k) * v.dy_block;
          a.a = planes + oh0 * q_;
          a.prefetch = planes + use_i * v.dy_block + call * share;
          a.b = b + t * copy_floats;
          a.out = result + ((((g * kg_ + k) * cg_ + c) * pb_.r + kh) * pb_.s + kw0 + t) * lanes_;
          kt_.dot[use_i - 1][use_j - 1](a);
          k += use_i;
        }
        t += use_j;
      }
      if (++tb < tap_blocks) continue;
      tb = 0;
      if (++kh == pb_.r) {
        kh = 0;
        if (++c == cg_) {
          c = 0;
          if (++kb == k_blocks) kb = 0, ++g;
        }
      }
      std::tie(oh0, oh1) = real_rows(r, kh);
    }
  }

  // Adds the per-thread copies (when threads split the reduction) and writes KCRS dW.
  void finish(const float* results, unsigned copies, float* w) const {
    const int64_t rs = pb_.r * pb_.s;
    if (planes_) {
      // Every copy's lanes of each element.
      const int64_t count = pb_.w_elements(), stride = count * lanes_;
      parallel_items((count + 1023) / 1024, threads_, [&](int64_t chunk, unsigned) {
        const int64_t end = std::min(count, (chunk + 1) * 1024);
        for (int64_t i = chunk * 1024; i < end; ++i) {
          float sum = 0;
          for (unsigned t = 0; t < copies; ++t)
            for (int64_t l = 0; l < lanes_; ++l) sum += results[t * stride + i * lanes_ + l];
          w[i] = sum;
        }
      });
      return;
    }
    if (direct_channels_) return;  // written in place
    if (mode_ == Mode::Dots) {
      if (!split_reduction_) return;  // written in place
      const int64_t count = pb_.w_elements();
      parallel_items((count + 4095) / 4096, threads_, [&](int64_t chunk, unsigned) {
        const int64_t end = std::min(count, (chunk + 1) * 4096);
        for (int64_t i = chunk * 4096; i < end; ++i) {
          float sum = 0;
          for (unsigned t = 0; t < copies; ++t) sum += results[t * count + i];
          w[i] = sum;
        }
      });
      return;
    }
    // Channel vectors: [g][c block][k][kh][kw][c lane]; kernel vectors: [g][k block][c][kh][kw][k lane]: `vec`
    // the channel along the lanes, `other` the one along the rows. Read in that order, a run of kChunk rows a block
    // (one contiguous stretch of the results), each row's lanes written to their places in dW. Walking dW's order
    // instead read one lane block per vector block, all of them a power of two apart (64 KB for ResNet-50's
    // 2048 -> 512 1x1): every read a conflict miss in L1 and L2, and the conversion took 1.7 ms of a 4.5 ms run.
    const int64_t per_copy = result_floats();
    const bool channel_vectors = mode_ == Mode::ChannelVectors;
    const int64_t vecs = channel_vectors ? cg_ : kg_;
    const int64_t others = channel_vectors ? kg_ : cg_;
    constexpr int64_t kChunk = 16;
    const int64_t chunks = (others + kChunk - 1) / kChunk;
    parallel_items(pb_.groups * chunks, threads_, [&](int64_t item, unsigned) {
      const int64_t g = item / chunks;
      const int64_t o0 = item % chunks * kChunk, o1 = std::min(others, o0 + kChunk);
      // Each lane's taps are one run of dW (rs floats): written front to back, the lanes' places worked out once
      // per run. With the place of every element worked out in the innermost loop, the conversion took 70% of a
      // batch-1 512 -> 512 3x3 on 7x7 (2.4 M weights from 49 pixels; one thread, Intel Xeon: 8.4 ms in all).
      for (int64_t vb = 0; vb < blocks_; ++vb) {
        const int64_t valid = std::min(block_, vecs - vb * block_);
        for (int64_t other = o0; other < o1; ++other) {
          const float* src = results + ((g * blocks_ + vb) * others + other) * rs * block_;
          for (int64_t l = 0; l < valid; ++l) {
            const int64_t v = vb * block_ + l;
            const int64_t k = g * kg_ + (channel_vectors ? other : v), c = channel_vectors ? v : other;
            float* dst = w + (k * cg_ + c) * rs;
            if (copies == 1) {
              for (int64_t t = 0; t < rs; ++t) dst[t] = src[t * block_ + l];
              continue;
            }
            for (int64_t t = 0; t < rs; ++t) {
              float sum = 0;
              for (unsigned copy = 0; copy < copies; ++copy) sum += src[copy * per_copy + t * block_ + l];
              dst[t] = sum;
            }
          }
        }
      }
    });
  }

  ConvProblem pb_;
  const KernelTable& kt_;
  int64_t lanes_;
  Mode mode_ = Mode::ChannelVectors;
  int64_t cg_ = 1, kg_ = 1, p_ = 1, q_ = 1;
  int64_t pad_top_ = 0, pad_left_ = 0, pad_bottom_ = 0, pad_right_ = 0, hi_ = 0, wi_ = 0;
  int nv_ = 1, ni_ = 1, nj_ = 1;
  int64_t block_ = 1, blocks_ = 1;
  int64_t phases_ = 1, ws_ = 0, row_floats_ = 0, tap_period_ = 1;
  int64_t rows_per_tile_ = 1, images_per_tile_ = 1, row_tiles_ = 1, tiles_ = 1;
  unsigned threads_ = 1;
  bool split_reduction_ = false;
  bool per_tile_ = false;  // LAYOUT 1 (kernel vectors): x and dy copied per reduction tile
  bool planes_ = false;    // LAYOUT 1 (dots): whole-plane dots over per-tile x copies, dy in place
  bool channel_dots_ = false;  // 1x1 dots: output channels x input channels, x and dy in place
  bool direct_channels_ = false;  // 1x1 channel vectors written straight into dW
  int64_t x_rows_ = 0;     // padded x rows a tile's copy holds
  size_t workspace_ = 0;
};

}  // namespace

bool channel_dots(const ConvProblem& pb) {
  return pb.direction == Direction::BackwardFilter && pb.r == 1 && pb.s == 1 && pb.h == 1 &&
         pb.stride == Pair{1, 1} && pb.pad == Pair{0, 0};
}

std::unique_ptr<Strategy> make_filter_strategy(const ConvProblem& problem, const Choice& choice,
                                               const KernelTable& kernels) {
  return std::make_unique<FilterStrategy>(problem, choice, kernels);
}

}  // namespace convtune::cpu_blocked::detail
