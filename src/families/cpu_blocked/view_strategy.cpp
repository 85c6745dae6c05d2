// Forward and backward-data as one output-stationary direct convolution over a zero-padded input copy:
// backward-data is a forward pass over dy with the filter transposed and flipped, split into stride x stride
// phases when strided. Register blocks hold output channels x pixels (ORIENT 0) or pixels x channels (ORIENT 1).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "convtune/error.h"
#include "src/core/parallel_for.h"
#include "src/families/cpu_blocked/plan.h"

namespace convtune::cpu_blocked::detail {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Drops reduction levels of one iteration by shifting the outer ones inward, so 1x1 filters loop over channels
// in the innermost (cheapest) loop rather than three nested loops of which two run once.
void normalize(BcastArgs& a) {
  for (int pass = 0; pass < 2; ++pass) {
    if (a.n2 == 1) {
      a.n2 = a.n1, a.a2 = a.a1, a.b2 = a.b1;
      a.n1 = a.n0, a.a1 = a.a0, a.b1 = a.b0;
      a.n0 = 1, a.a0 = 0, a.b0 = 0;
    } else if (a.n1 == 1) {
      a.n1 = a.n0, a.a1 = a.a0, a.b1 = a.b0;
      a.n0 = 1, a.a0 = 0, a.b0 = 0;
    }
  }
}

// Where filter index k sits along one axis: its phase and its tap index within the phase; phase -1 for a tap no
// output reads (backward-data at a stride beyond dx's extent: its residue has no phase).
struct TapSlot {
  int64_t phase = -1;
  int64_t tap = 0;
  bool used() const { return phase >= 0; }
};

std::vector<TapSlot> tap_slots(const std::vector<AxisPhase>& phases, int64_t filter) {
  std::vector<TapSlot> slots(static_cast<size_t>(filter));
  for (size_t ph = 0; ph < phases.size(); ++ph)
    for (int64_t t = 0; t < phases[ph].taps; ++t) {
      const int64_t k = phases[ph].filter_index(t);
      if (slots[static_cast<size_t>(k)].used())
        throw Error(fmt::format("cpu_blocked: filter index {} belongs to two phases", k));
      slots[static_cast<size_t>(k)] = {static_cast<int64_t>(ph), t};
    }
  return slots;
}

class ViewStrategy final : public Strategy {
 public:
  ViewStrategy(const ConvProblem& pb, const Choice& choice, const KernelTable& kt)
      : pb_(pb), choice_(choice), kt_(kt), lanes_(kt.lanes) {
    forward_ = pb.direction == Direction::Forward;
    groups_ = pb.groups;
    // Channels of the tensor read (input) and written (output), per group.
    ic_ = forward_ ? pb.c_per_group() : pb.k_per_group();
    oc_ = forward_ ? pb.k_per_group() : pb.c_per_group();
    src_rows_ = forward_ ? pb.h : pb.p();
    src_cols_ = forward_ ? pb.w : pb.q();
    out_rows_ = forward_ ? pb.p() : pb.h;
    out_cols_ = forward_ ? pb.q() : pb.w;
    if (forward_) {
      ph_h_ = forward_axis(pb.p(), pb.stride.h, pb.pad.h, pb.dilation.h, pb.r);
      ph_w_ = forward_axis(pb.q(), pb.stride.w, pb.pad.w, pb.dilation.w, pb.s);
    } else {
      ph_h_ = backward_data_axis(pb.h, pb.stride.h, pb.pad.h, pb.dilation.h, pb.r);
      ph_w_ = backward_data_axis(pb.w, pb.stride.w, pb.pad.w, pb.dilation.w, pb.s);
    }
    tap_h_ = tap_slots(ph_h_, pb.r);
    tap_w_ = tap_slots(ph_w_, pb.s);
    while (first_w_ + 1 < static_cast<int64_t>(ph_w_.size()) && ph_w_[static_cast<size_t>(first_w_)].count == 0) ++first_w_;
    std::tie(pad_top_, pad_bottom_) = pad_for(ph_h_, src_rows_);
    std::tie(pad_left_, pad_right_) = pad_for(ph_w_, src_cols_);
    hi_ = src_rows_ + pad_top_ + pad_bottom_;
    wi_ = src_cols_ + pad_left_ + pad_right_;
    pixel_vectors_ = choice.orient == 1;
    // Pixel vectors read whole vectors past a row's last pixel (lanes that are never stored): the copy gets
    // slack so they stay inside the buffer, unless every row is whole vectors that a 1x1 filter reads in place
    // (planes of a multiple of the vector width: computed_problem's 56x56 and 28x28 planes; MobileNetV2's 144 ->
    // 32 projection spent as long copying its input as computing). Channel vectors read only real pixels, so an
    // unpadded input is used in place.
    const bool padded = pad_top_ || pad_bottom_ || pad_left_ || pad_right_;
    const bool whole_vector_rows = pb.r == 1 && pb.s == 1 && src_cols_ == out_cols_ && src_cols_ % lanes_ == 0;
    copy_input_ = padded || (choice.orient == 1 && !whole_vector_rows);
    // Channel-blocked input (LAYOUT 1, with channel vectors): a vector's worth of input channels per pixel, so a
    // reduction step's broadcasts come from one cache line per pixel and a filter row's taps x channels are one
    // contiguous run (the innermost loop).
    blocked_in_ = !pixel_vectors_ && choice.layout >= 1;
    // LAYOUT 2: the same channel-blocked copy made an image at a time by the thread about to compute on it, into
    // a buffer of its own that stays in L2 (the whole-tensor copy writes a padded tensor to memory and the kernels
    // read it back); a row block's rows at a time where an image's copy would not stay in L2 (below).
    per_image_ = blocked_in_ && choice.layout == 2;
    in_block_ = blocked_in_ ? lanes_ : 1;
    in_blocks_ = (ic_ + in_block_ - 1) / in_block_;
    if (blocked_in_) copy_input_ = true;
    if (pixel_vectors_) {
      nv_ = choice.vecs;
      nj_ = choice.cols;
    } else {
      nv_ = static_cast<int>(std::min<int64_t>(choice.vecs, (oc_ + lanes_ - 1) / lanes_));
      nj_ = choice.cols;
      block_ = int64_t{nv_} * lanes_;
      oc_blocks_ = (oc_ + block_ - 1) / block_;
    }
    // Packed weights: one slab per (group, phase h, phase w).
    int64_t offset = 0;
    for (int64_t g = 0; g < groups_; ++g)
      for (const auto& h : ph_h_)
        for (const auto& w : ph_w_) {
          slab_offsets_.push_back(offset);
          const int64_t taps = h.taps * w.taps;
          offset += pixel_vectors_ ? ic_ * taps * oc_ : oc_blocks_ * in_blocks_ * in_block_ * taps * block_;
        }
    packed_floats_ = static_cast<size_t>(offset);
    rows_max_ = 0;
    for (const auto& h : ph_h_) rows_max_ = std::max(rows_max_, h.count);
    row_block_ = choice.row_block > 0 ? std::min(choice.row_block, std::max<int64_t>(rows_max_, 1))
                                      : std::max<int64_t>(rows_max_, 1);
    row_blocks_ = (rows_max_ + row_block_ - 1) / row_block_;
    chunk_ = choice.ic_chunk;
    threads_ = threads_for(pb);
    column_parts_ = column_parts();
    column_budget_ = l2_bytes() / 4;
    // Planar input copied a row block at a time (the padded rows one item reads, every channel) by the thread
    // about to compute on it, into a buffer of its own that stays in L2, where the whole padded copy would not fit
    // L2 and items of the same rows follow each other (ORDER 1, or one channel block). The whole copy writes the
    // padded tensor to memory and the kernels read it back: alex1 forward (16 x 3 x 228 x 228 floats, 10 MB) spent
    // 1.3 ms of its 17.3 (one thread) on it; two threads copying at once halved it only to 0.65-0.9 ms. One phase
    // per axis, and only where a row block's rows overlap the next block's by little (alex1, 16 rows: 71 rows
    // copied per 64 advanced). Channel-blocked input copied per thread (LAYOUT 2) likewise, where an image's copy
    // outgrows image_copy_bytes() (an image at a time would not stay in L2).
    // Strided backward-data's phases (channel-blocked) read nearly the same input rows for a row block: one copy
    // of their rows' union serves them all, the phases then taken inside row blocks.
    const bool per_thread = !blocked_in_ || (per_image_ && 4 * image_floats() > image_copy_bytes());
    const bool one_phase = ph_h_.size() == 1 && ph_w_.size() == 1;
    const bool same_ins = std::all_of(ph_h_.begin(), ph_h_.end(), [&](const AxisPhase& h) { return h.ins == ph_h_[0].ins; });
    if (copy_input_ && per_thread && (one_phase || (blocked_in_ && same_ins)) && row_blocks_ > 1 &&
        (choice.order == 1 || pixel_vectors_ || oc_blocks_ == 1)) {
      // Padded rows [y0 ins + rows_off_, + block_rows_) hold every row a row block's phases read.
      int64_t lo = 0, hi = 0;
      bool any = false;
      for (const AxisPhase& h : ph_h_) {
        if (h.taps == 0) continue;
        const int64_t end = h.off + (row_block_ - 1) * h.ins + (h.taps - 1) * h.step + 1;
        lo = any ? std::min(lo, h.off) : h.off, hi = any ? std::max(hi, end) : end, any = true;
      }
      rows_off_ = lo;
      block_rows_ = hi - lo;
      const int64_t ins = ph_h_[0].ins;
      const double whole_bytes = 4.0 * static_cast<double>(pb.n * groups_ * image_floats());
      per_rows_ = any && (blocked_in_ || whole_bytes > l2_scaled(2e6)) && block_rows_ * 4 <= row_block_ * ins * 5 &&
                  block_rows_ < hi_;
      if (per_rows_) per_image_ = false;
    }
    Carver size(nullptr);
    carve(size);
    workspace_ = size.used();
  }

  size_t workspace_bytes() const override { return workspace_; }
  bool copies_row_blocks() const { return per_rows_; }
  size_t packed_weight_floats() const override { return packed_floats_; }

  // Offset of filter (o, i)'s R x S taps (contiguous in KCRS) within group g: o indexes the channels written, i
  // those read. Backward-data reads the forward filter transposed (its output channel is the forward input one).
  int64_t filter_offset(int64_t g, int64_t o, int64_t i) const {
    const int64_t rs = pb_.r * pb_.s;
    return forward_ ? ((g * oc_ + o) * ic_ + i) * rs : ((g * ic_ + i) * oc_ + o) * rs;
  }

  // Packs in the filter's own order (each (o, i)'s taps are read contiguously) and scatters into the slabs:
  // every filter tap belongs to exactly one phase per axis, at tap index tap_h_/tap_w_.
  void pack_weights(const float* w, float* packed) const override {
    const int64_t phases_w = static_cast<int64_t>(ph_w_.size());
    const auto slab_of = [&](int64_t g, const TapSlot& h, const TapSlot& wt) {
      return packed + slab_offsets_[static_cast<size_t>((g * static_cast<int64_t>(ph_h_.size()) + h.phase) * phases_w + wt.phase)];
    };
    if (pixel_vectors_) {
      // [ic][th][tw][oc] per slab: the broadcast columns are adjacent output channels.
      parallel_items(groups_ * ic_, threads_, [&](int64_t item, unsigned) {
        const int64_t g = item / ic_, i = item % ic_;
        for (int64_t o = 0; o < oc_; ++o) {
          const float* src = w + filter_offset(g, o, i);
          for (int64_t kh = 0; kh < pb_.r; ++kh)
            for (int64_t kw = 0; kw < pb_.s; ++kw) {
              const TapSlot& h = tap_h_[static_cast<size_t>(kh)];
              const TapSlot& wt = tap_w_[static_cast<size_t>(kw)];
              if (!h.used() || !wt.used()) continue;
              const int64_t th = ph_h_[static_cast<size_t>(h.phase)].taps, tw = ph_w_[static_cast<size_t>(wt.phase)].taps;
              slab_of(g, h, wt)[((i * th + h.tap) * tw + wt.tap) * oc_ + o] = src[kh * pb_.s + kw];
            }
        }
      });
      return;
    }
    // [ocb][ic block][th][tw][ic in block][block] per slab (planar input: blocks of one channel): a block's
    // vectors adjacent, output and input channels past oc_ and ic_ zero.
    const int64_t padded_ic = in_blocks_ * in_block_;
    parallel_items(groups_ * oc_blocks_, threads_, [&](int64_t item, unsigned) {
      const int64_t g = item / oc_blocks_, ocb = item % oc_blocks_;
      const int64_t valid = std::min(block_, oc_ - ocb * block_);
      for (size_t ph = 0; ph < ph_h_.size(); ++ph)
        for (size_t pw = 0; pw < ph_w_.size(); ++pw) {
          const int64_t taps = ph_h_[ph].taps * ph_w_[pw].taps;
          float* slab = packed + slab_offsets_[(static_cast<size_t>(g) * ph_h_.size() + ph) * ph_w_.size() + pw];
          if (valid < block_ || padded_ic != ic_) {
            std::fill(slab + ocb * padded_ic * taps * block_, slab + (ocb + 1) * padded_ic * taps * block_, 0.0f);
          }
        }
      // Writes in the packed order (output channel innermost), reading the block's filters side by side: the
      // block's filters (block x ic x R x S floats) stay in cache while every cache line of them is used.
      for (int64_t i = 0; i < ic_; ++i)
        for (int64_t kh = 0; kh < pb_.r; ++kh)
          for (int64_t kw = 0; kw < pb_.s; ++kw) {
            const TapSlot& h = tap_h_[static_cast<size_t>(kh)];
            const TapSlot& wt = tap_w_[static_cast<size_t>(kw)];
            if (!h.used() || !wt.used()) continue;
            const int64_t th = ph_h_[static_cast<size_t>(h.phase)].taps, tw = ph_w_[static_cast<size_t>(wt.phase)].taps;
            const int64_t ib = i / in_block_, il = i % in_block_;
            float* dst = slab_of(g, h, wt) +
                         ((((ocb * in_blocks_ + ib) * th + h.tap) * tw + wt.tap) * in_block_ + il) * block_;
            const int64_t tap = kh * pb_.s + kw;
            // The block's filters are a fixed stride apart in the filter tensor: one gather per packed run.
            const int64_t stride = filter_offset(g, 1, 0) - filter_offset(g, 0, 0);
            kt_.gather(w + filter_offset(g, ocb * block_, i) + tap, stride, valid, dst);
          }
    });
  }

  void run(float* x, const float* packed, float*, float* y, void* workspace, StageTimes& times) override {
    const float* src = forward_ ? x : y;
    float* dst = forward_ ? y : x;
    Carver carver(workspace);
    float* in = carve(carver);
    auto start = Clock::now();
    if (per_image_ || per_rows_) {
      // copied inside compute(), an image or a row block at a time
    } else if (blocked_in_) {
      copy_channel_blocked(blocking(), src, in, kt_, threads_);
    } else if (copy_input_) {
      copy_padded(src, in);
    } else {
      in = const_cast<float*>(src);  // read only: an unpadded input is used where it is
    }
    times.input_ms = ms_since(start);
    start = Clock::now();
    compute(src, in, packed, dst);
    times.compute_ms = ms_since(start);
    times.output_ms = 0;
  }

  // The direct sum less the filter rows skipped because they read only padding (every column is computed): what
  // the FMA units do, but for lanes of channel padding. The direct sum itself overstated it (alex2, 5x5 with
  // padding 2 over 27 rows: 4% of the row taps skipped), which let % peak read above 100.
  double performed_flops(const ConvProblem&) const override {
    double rows = 0, columns = 0;
    for (const AxisPhase& h : ph_h_) {
      if (h.taps == 0) continue;
      for (int64_t yy = 0; yy < h.count; ++yy) {
        const auto [t0, t1] = real_row_taps(h, yy);
        rows += static_cast<double>(t1 - t0);
      }
    }
    for (const AxisPhase& w : ph_w_) columns += static_cast<double>(w.count * w.taps);
    return 2.0 * static_cast<double>(pb_.n * groups_ * ic_ * oc_) * rows * columns;
  }

  std::string describe() const override {
    std::string phases = ph_h_.size() * ph_w_.size() > 1 ? fmt::format(", {} phases", ph_h_.size() * ph_w_.size())
                                                          : "";
    const std::string chunk = (chunk_ > 0 && chunk_ < ic_ ? fmt::format(", {} input channels per pass", chunk_) : "") +
                              (column_parts_ > 1 ? fmt::format(", rows split in {} column parts", column_parts_) : "");
    const std::string layout = blocked_in_ ? fmt::format(", input in blocks of {} channels{}", in_block_,
                                                         per_image_  ? " (copied per image by each thread)"
                                                         : per_rows_ ? fmt::format(" (copied {} rows per item by each thread)", block_rows_)
                                                                     : "")
                               : per_rows_ ? fmt::format(", input copied {} rows per item by each thread", block_rows_)
                                           : "";
    return fmt::format("{}, {} block {}x{}{}{}{}, {} row(s) per item, {}", pixel_vectors_ ? "vectors over pixels" : "vectors over output channels",
                       pixel_vectors_ ? "pixels x channels" : "channels x pixels", nv_, nj_, phases, layout, chunk, row_block_,
                       copy_input_ ? fmt::format("input copied padded to {}x{}", hi_, wi_) : "input read in place");
  }

 private:
  // Slack after the padded input for whole-vector reads past a row's end.
  int64_t slack() const { return int64_t{kMaxNv} * lanes_ + wi_; }

  // Floats of one (image, group)'s input copy.
  int64_t image_floats() const { return in_blocks_ * in_block_ * hi_ * wi_; }
  // Floats of one thread's row-block copy (per_rows_), slack for pixel vectors' reads past a row's end included.
  int64_t rows_floats() const { return in_blocks_ * in_block_ * block_rows_ * wi_ + slack(); }

  float* carve(Carver& c) const {
    if (!copy_input_) return nullptr;
    if (per_rows_) return c.floats(static_cast<size_t>(int64_t{threads_} * rows_floats()));
    const int64_t images = per_image_ ? int64_t{threads_} : pb_.n * groups_;  // LAYOUT 2: one image per thread
    return c.floats(static_cast<size_t>(images * image_floats() + slack()));
  }

  ChannelBlocking blocking() const {
    return {pb_.n * groups_, ic_, src_rows_, src_cols_, pad_top_, pad_left_, hi_, wi_, in_block_};
  }

  void copy_padded(const float* src, float* in) const {
    const int64_t planes = pb_.n * groups_ * ic_;
    const int64_t plane = hi_ * wi_;
    parallel_items(planes, threads_, [&](int64_t p, unsigned) {
      const float* s = src + p * src_rows_ * src_cols_;
      float* d = in + p * plane;
      std::memset(d, 0, static_cast<size_t>(pad_top_ * wi_) * sizeof(float));
      for (int64_t r = 0; r < src_rows_; ++r)
        padded_row(d + (pad_top_ + r) * wi_, s + r * src_cols_, pad_left_, src_cols_, pad_right_);
      std::memset(d + (pad_top_ + src_rows_) * wi_, 0, static_cast<size_t>(pad_bottom_ * wi_) * sizeof(float));
    });
    std::memset(in + planes * plane, 0, static_cast<size_t>(slack()) * sizeof(float));
  }

  // per_rows_: padded rows [row0, row0 + block_rows_) of every channel of one (image, group) (`src` at its first
  // channel) into `d`, planes block_rows_ x wi_; rows past the padded input's end (the last block) and the slack
  // after the last plane zeroed, as the whole copy has them (pixel vectors read lanes past a row's end).
  void copy_rows(const float* src, int64_t row0, float* d) const {
    const int64_t rows = std::min(block_rows_, hi_ - row0);
    for (int64_t c = 0; c < ic_; ++c) {
      const float* s = src + c * src_rows_ * src_cols_;
      float* plane = d + c * block_rows_ * wi_;
      for (int64_t j = 0; j < block_rows_; ++j) {
        float* row = plane + j * wi_;
        const int64_t r = row0 + j - pad_top_;
        if (j >= rows || r < 0 || r >= src_rows_) {
          zero_run(row, wi_);
          continue;
        }
        padded_row(row, s + r * src_cols_, pad_left_, src_cols_, pad_right_);
      }
    }
    std::memset(d + ic_ * block_rows_ * wi_, 0, static_cast<size_t>(slack()) * sizeof(float));
  }

  // Work items: (image, group, phase, channel block, row block), channel blocks outside or inside row blocks.
  // LAYOUT 2: `in` holds one image's copy per thread, made from `src` when the thread's item is of another image
  // than its last (items of an image are consecutive, so each thread copies an image about once).
  void compute(const float* src, float* in, const float* packed, float* dst) const {
    const int64_t phases = static_cast<int64_t>(ph_h_.size() * ph_w_.size());
    const int64_t cb = pixel_vectors_ ? 1 : oc_blocks_;
    const int64_t items = pb_.n * groups_ * phases * cb * row_blocks_ * column_parts_;
    const ChannelBlocking layout = blocking();
    std::vector<int64_t> copied(threads_, -1);  // the image (n * groups + g) or row block in each thread's buffer
    struct Item {
      int64_t part, ocb, rb, phase, g, n;
    };
    const auto decode = [&](int64_t item) {
      Digits digits(item);
      Item it{};
      it.part = digits.next(column_parts_);
      if (per_rows_ && phases > 1) {
        // One row block's copy serves its phases: phases inside row blocks.
        it.ocb = digits.next(cb), it.phase = digits.next(phases), it.rb = digits.next(row_blocks_);
      } else if (choice_.order == 0) {
        it.rb = digits.next(row_blocks_), it.ocb = digits.next(cb), it.phase = digits.next(phases);
      } else {
        it.ocb = digits.next(cb), it.rb = digits.next(row_blocks_), it.phase = digits.next(phases);
      }
      it.g = digits.next(groups_), it.n = digits.rest();
      return it;
    };
    parallel_items(items, threads_, [&](int64_t item, unsigned thread) {
      const Item it = decode(item);
      const int64_t ocb = it.ocb, rb = it.rb, phase = it.phase, g = it.g, n = it.n;
      const AxisPhase& h = ph_h_[static_cast<size_t>(phase / static_cast<int64_t>(ph_w_.size()))];
      const AxisPhase& w = ph_w_[static_cast<size_t>(phase % static_cast<int64_t>(ph_w_.size()))];
      const int64_t y0 = rb * row_block_;
      const int64_t y1 = std::min(h.count, y0 + row_block_);
      if (y0 >= y1 || w.count == 0) return;
      const int64_t image = n * groups_ + g;
      const float* image_in = in + image * image_floats();
      RunsPrefetch ahead;
      if (per_image_) {
        float* mine = in + int64_t{thread} * image_floats();
        if (copied[thread] != image) {
          // The transposing interleave (KernelTable::interleave), as the per-tile copies of backward-filter; a
          // gather per pixel measured level here (fmnist2, one thread: 12.1 ms either way).
          for (int64_t b = 0; b < in_blocks_; ++b)
            copy_channel_block(layout, src, image * in_blocks_ + b, mine + b * hi_ * wi_ * in_block_, kt_);
          copied[thread] = image;
        }
        image_in = mine;
      }
      // Where the kernels read: channel planes `plane` floats apart, padded row r at row r - row0.
      int64_t plane = hi_ * wi_, row0 = 0;
      if (per_rows_) {
        float* mine = in + int64_t{thread} * rows_floats();
        row0 = y0 * h.ins + rows_off_;
        plane = block_rows_ * wi_;
        const int64_t key = image * row_blocks_ + rb;
        if (copied[thread] != key) {
          if (blocked_in_) {
            for (int64_t b = 0; b < in_blocks_; ++b)
              copy_channel_block(layout, src, image * in_blocks_ + b, mine + b * block_rows_ * wi_ * in_block_, kt_,
                                 row0, row0 + block_rows_);
          } else {
            copy_rows(src + image * ic_ * src_rows_ * src_cols_, row0, mine);
          }
          copied[thread] = key;
        }
        image_in = mine;
        // A thread's items come in runs of consecutive ones: the next item's rows are fetched into L2 while this one
        // computes. The copy otherwise waits on dozens of short runs from memory, which the hardware prefetchers do
        // not start in time (ResNeXt's 32 groups of 8 channels at 56x56, forward: the copies took 2.2 ms of 7.1).
        if (item + 1 < items) {
          const Item next = decode(item + 1);
          const int64_t next_image = next.n * groups_ + next.g;
          if (next_image * row_blocks_ + next.rb != key) {
            const int64_t first = std::max<int64_t>(0, next.rb * row_block_ * h.ins + rows_off_ - pad_top_);
            const int64_t end = std::min(src_rows_, next.rb * row_block_ * h.ins + rows_off_ - pad_top_ + block_rows_);
            // Only rows that fit an eighth of an L2 beside this item's copy: YOLO's 32 -> 64 stride-2 layer on
            // 208x208 (452 KB of rows an item) ran 2-5% slower with them prefetched, rx_g32 (18 KB) 10-12% faster.
            if (first < end && 4 * ic_ * (end - first) * src_cols_ <= l2_bytes() / 8) {
              ahead.base = src + (next_image * ic_ * src_rows_ + first) * src_cols_;
              ahead.runs = ic_, ahead.stride = src_rows_ * src_cols_, ahead.floats = (end - first) * src_cols_;
              const int64_t lines = ic_ * ceil_div(ahead.floats, 16);
              // At most 32 lines beside a call: longer bursts stall the kernel's own loads on the fill buffers.
              ahead.lines_per_call = std::min<int64_t>(32, ceil_div(lines, std::max<int64_t>(1, calls_per_item(y1 - y0, w))));
            }
          }
        }
      }
      float* image_out = dst + (n * groups_ + g) * oc_ * out_rows_ * out_cols_;
      const float* slab = packed + slab_offsets_[static_cast<size_t>((g * phases) + phase)];
      if (h.taps == 0 || w.taps == 0) {
        // One part writes the phase's zeros. A row phase without taps makes whole output rows zero: its first column
        // phase with columns clears them, a run per row (a scalar store every stride floats: 1x1 stride-2
        // backward-data, 8 x 256 <- 512 channels at 28x28, two threads, 2.31 -> 2.18 ms; 1.70 with no zeros written).
        if (it.part == 0 && h.taps == 0) {
          if (phase % static_cast<int64_t>(ph_w_.size()) == first_w_) zero_rows(image_out, h, y0, y1, ocb);
        } else if (it.part == 0) {
          zero_phase(image_out, h, w, y0, y1, ocb);
        }
        return;
      }
      if (pixel_vectors_) {
        pixel_rows(image_in, plane, row0, slab, image_out, h, w, y0, y1, ahead);
      } else {
        const auto [x0, x1] = column_part(w.count, it.part);
        if (x0 >= x1) return;
        channel_rows(image_in, plane, row0, slab + ocb * in_blocks_ * in_block_ * h.taps * w.taps * block_, image_out,
                     h, w, y0, y1, x0, x1, ocb, ahead);
      }
    });
  }

  // Column parts per row (channel vectors): 1, or where the items (image, group, phase, channel block, row block)
  // are too few to keep every thread busy, a split of each row's register blocks into up to as many parts as make
  // four items a thread. A batch-1 1x1 on a 7x7 map is one row of 49 pixels: 960 -> 160 channels made 5 items
  // (blocks of 32 channels) for two threads, one of them idle for a fifth of the run.
  int64_t column_parts() const {
    if (pixel_vectors_ || threads_ <= 1) return 1;
    const int64_t items = pb_.n * groups_ * static_cast<int64_t>(ph_h_.size() * ph_w_.size()) * oc_blocks_ * row_blocks_;
    const int64_t want = 4 * int64_t{threads_};
    if (items >= want) return 1;
    int64_t widest = 0;  // register blocks of the longest phase row
    for (const AxisPhase& w : ph_w_) widest = std::max(widest, ceil_div(w.count, int64_t{nj_}));
    return std::clamp<int64_t>(ceil_div(want, items), 1, std::max<int64_t>(widest, 1));
  }

  // Columns [x0, x1) of part `part` of a row of `count` columns: whole register blocks, split as evenly as they go.
  std::pair<int64_t, int64_t> column_part(int64_t count, int64_t part) const {
    if (column_parts_ == 1) return {0, count};
    const int64_t blocks = ceil_div(count, int64_t{nj_});
    const int64_t b0 = part * blocks / column_parts_, b1 = (part + 1) * blocks / column_parts_;
    return {std::min(count, b0 * nj_), std::min(count, b1 * nj_)};
  }

  // About how many kernel calls one item of rows [y0, y0 + rows) makes (a pass over all input channels), over which
  // the next item's rows are prefetched.
  int64_t calls_per_item(int64_t rows, const AxisPhase& w) const {
    return rows * (pixel_vectors_ ? ceil_div(oc_, nj_) * ceil_div(w.count, int64_t{nv_} * lanes_) : ceil_div(w.count, nj_));
  }

  // Output rows [y0, y1) of row phase h, every column, zero (a row phase no filter tap reaches).
  void zero_rows(float* out, const AxisPhase& h, int64_t y0, int64_t y1, int64_t ocb) const {
    const int64_t o0 = pixel_vectors_ ? 0 : ocb * block_;
    const int64_t o1 = pixel_vectors_ ? oc_ : std::min(oc_, o0 + block_);
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t yy = y0; yy < y1; ++yy)
        std::fill_n(out + o * out_rows_ * out_cols_ + (h.out_start + yy * h.out_step) * out_cols_, out_cols_, 0.0f);
  }

  // A phase no filter tap reaches (stride above the dilated filter): its outputs are zero.
  void zero_phase(float* out, const AxisPhase& h, const AxisPhase& w, int64_t y0, int64_t y1, int64_t ocb) const {
    const int64_t o0 = pixel_vectors_ ? 0 : ocb * block_;
    const int64_t o1 = pixel_vectors_ ? oc_ : std::min(oc_, o0 + block_);
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t yy = y0; yy < y1; ++yy) {
        float* row = out + o * out_rows_ * out_cols_ + (h.out_start + yy * h.out_step) * out_cols_ + w.out_start;
        for (int64_t xx = 0; xx < w.count; ++xx) row[xx * w.out_step] = 0.0f;
      }
  }

  // Input channels of one pass over a row block: all, or IC_CHUNK at a time so the pass's filter slab and input
  // rows stay in L2; later passes add to the outputs.
  // With channel-blocked input a chunk is a whole number of blocks (at least one).
  template <class Pass>
  void chunked(const Pass& pass) const {
    const int64_t all = in_blocks_ * in_block_;
    const int64_t chunk = chunk_ > 0 ? std::max(in_block_, chunk_ / in_block_ * in_block_) : all;
    for (int64_t c0 = 0; c0 < all; c0 += chunk) pass(c0, std::min(chunk, all - c0));
  }

  // Taps [t0, t1) of phase h whose input rows, for output row yy, are real rows of the padded copy.
  std::pair<int64_t, int64_t> real_row_taps(const AxisPhase& h, int64_t yy) const {
    return inside(0, h.taps, yy * h.ins + h.off, h.step, pad_top_, pad_top_ + src_rows_);
  }

  // ORIENT 0: acc[output-channel vector][pixel] += packed weights x broadcast input pixel. Planar input: steps
  // (channel, th, tw); channel-blocked input: (channel block, th, tw x channel in block), the last a contiguous
  // run of the input row and of the packed filter.
  // `in`: channel planes `plane` floats apart, holding padded rows from row0 on.
  void channel_rows(const float* in, int64_t plane, int64_t row0, const float* weights, float* out, const AxisPhase& h,
                    const AxisPhase& w, int64_t y0, int64_t y1, int64_t xa, int64_t xb, int64_t ocb,
                    RunsPrefetch& ahead) const {
    const int64_t plane_out = out_rows_ * out_cols_;
    const int64_t cb = in_block_;
    const auto widths = split_columns(xb - xa, nj_, [&](int n) { return kt_.bcast[nv_ - 1][n - 1] != nullptr; });
    chunked([&](int64_t c0, int64_t channels) {
      BcastArgs row;
      row.b_j = w.ins * cb;
      const int64_t blocks = (channels + cb - 1) / cb;
      // Channel-blocked input whose taps along a row are not adjacent (dilation_w > 1): a row's taps x channels are
      // no longer one contiguous run, so each filter row is a call of its own (accumulating after the first) over
      // (channel block, tap, channel in block). Planar input instead reads a channel plane per step: DeepLab's
      // rate-4 3x3 (512 channels, 33x33) ran at 59% of the FMA peak so, 1.4x oneDNN's time.
      const bool rows_apart = blocked_in_ && w.step != 1 && w.taps > 1;
      row.n0 = blocks, row.a0 = h.taps * w.taps * cb * block_, row.b0 = plane * cb;
      if (rows_apart) {
        row.a1 = cb * block_, row.b1 = w.step * cb;
        row.n2 = cb, row.a2 = block_, row.b2 = 1;
      } else {
        row.a1 = w.taps * cb * block_, row.b1 = h.step * wi_ * cb;
        if (blocked_in_) {
          row.n2 = w.taps * cb, row.a2 = block_, row.b2 = 1;  // adjacent taps: taps x channels contiguous
        } else {
          row.n2 = w.taps, row.a2 = block_, row.b2 = w.step;
        }
      }
      row.o_v = lanes_ * plane_out, row.o_lane = plane_out, row.o_j = w.out_step;
      row.valid = std::min(block_, oc_ - ocb * block_);
      row.accumulate = c0 > 0;
      const int64_t filter_row = w.taps * cb * block_;  // packed floats of one filter row of a channel block
      for (int64_t yy = y0; yy < y1; ++yy) {
        // Only the filter rows that read real input rows (none: the kernel writes zeros, or adds nothing).
        const auto [t0, t1] = real_row_taps(h, yy);
        float* out_row = out + ocb * block_ * plane_out + (h.out_start + yy * h.out_step) * out_cols_ + w.out_start;
        // One call per filter row (rows_apart), or one for all of them; at least one, so that a row with no real
        // filter row still writes its zeros.
        const int64_t calls = rows_apart ? std::max<int64_t>(t1 - t0, 1) : 1;
        for (int64_t call = 0; call < calls; ++call) {
          const int64_t th = t0 + call;
          BcastArgs a = row;
          a.n1 = rows_apart ? (t1 > t0 ? w.taps : 0) : t1 - t0;
          a.accumulate = row.accumulate || call > 0;
          a.a = weights + c0 * h.taps * w.taps * block_ + th * filter_row;
          normalize(a);
          const float* in_row = in + c0 * plane + ((yy * h.ins + h.off + th * h.step - row0) * wi_ + w.off) * cb;
          int64_t x0 = xa;
          for (int width : widths) {
            a.b = in_row + x0 * w.ins * cb;
            a.out = out_row + x0 * w.out_step;
            ahead.advance();
            kt_.bcast[nv_ - 1][width - 1](a);
            x0 += width;
          }
        }
      }
    });
  }

  // ORIENT 1: acc[pixel vector][output channel] += input row vectors x broadcast weight (unit input stride).
  // Loop order: column blocks (whose input rows, every channel of the pass, fit about a quarter of an L2), then
  // groups of output channels (one block's columns), then rows and spans of NV vectors. So each group's output
  // rows are written front to back, a few streams at a time, while the column block's input stays in L2; spans
  // outside groups wrote every output channel's plane at once, hundreds of streams (MobileNetV2's 24 -> 144 1x1
  // at 56x56, 16 images, two threads: 4.0 -> 1.8 ms; ResNet-50's 64 -> 256: 4.3 -> 3.4).
  void pixel_rows(const float* in, int64_t plane, int64_t row0, const float* weights, float* out, const AxisPhase& h,
                  const AxisPhase& w, int64_t y0, int64_t y1, RunsPrefetch& ahead) const {
    const int64_t plane_out = out_rows_ * out_cols_;
    const int64_t span = int64_t{nv_} * lanes_;
    const auto widths = [&](int nv) {
      return split_columns(oc_, nj_, [&](int n) { return kt_.bcast[nv - 1][n - 1] != nullptr; });
    };
    const auto full = widths(nv_);
    const int64_t last_nv = ((w.count - 1) % span) / lanes_ + 1;
    const auto last = widths(static_cast<int>(last_nv));
    chunked([&](int64_t c0, int64_t channels) {
      BcastArgs row;
      row.b_j = 1;
      row.n0 = channels, row.a0 = plane, row.b0 = h.taps * w.taps * oc_;
      row.a1 = h.step * wi_, row.b1 = w.taps * oc_;
      row.n2 = w.taps, row.a2 = w.step, row.b2 = oc_;
      row.o_v = lanes_ * w.out_step, row.o_lane = w.out_step, row.o_j = plane_out;
      row.accumulate = c0 > 0;
      const float* in_c = in + c0 * plane;
      const float* weights_c = weights + c0 * h.taps * w.taps * oc_;
      // One register block: the span of NV vectors from output column x0 of row yy, output channels [o0, o0 +
      // width).
      const auto block = [&](int64_t x0, int64_t yy, int64_t o0, int width, int nv) {
        // Only the filter rows that read real input rows, as channel_rows.
        const auto [t0, t1] = real_row_taps(h, yy);
        BcastArgs a = row;
        a.n1 = t1 - t0;
        normalize(a);
        a.valid = std::min<int64_t>(int64_t{nv} * lanes_, w.count - x0);
        a.a = in_c + (yy * h.ins + h.off + t0 * h.step - row0) * wi_ + w.off + x0;
        a.b = weights_c + t0 * row.b1 + o0;
        a.out = out + (h.out_start + yy * h.out_step) * out_cols_ + w.out_start + x0 * w.out_step + o0 * plane_out;
        ahead.advance();
        kt_.bcast[nv - 1][width - 1](a);
      };
      // Columns per block: whole spans whose input (the pass's channels, the rows of [y0, y1) and their taps)
      // fits a quarter of an L2 (512 KiB on the developer host).
      const int64_t rows_read = (y1 - y0 - 1) * h.ins + (h.taps - 1) * h.step + 1;
      const int64_t span_bytes = 4 * channels * rows_read * (span * w.ins + (w.taps - 1) * w.step);
      const int64_t cols = std::max<int64_t>(1, column_budget_ / std::max<int64_t>(span_bytes, 1)) * span;
      for (int64_t xb = 0; xb < w.count; xb += cols) {
        const int64_t xe = std::min(w.count, xb + cols);
        const bool tail = xe == w.count && (w.count - xb) % span != 0;
        const int64_t whole_end = tail ? xe - (w.count - xb) % span : xe;
        int64_t o0 = 0;
        for (int width : full) {
          for (int64_t yy = y0; yy < y1; ++yy)
            for (int64_t x0 = xb; x0 < whole_end; x0 += span) block(x0, yy, o0, width, nv_);
          o0 += width;
        }
        if (!tail) continue;
        // The row's last, partial span: its own split of the output channels (fewer vectors, wider blocks).
        for (int64_t yy = y0; yy < y1; ++yy) {
          int64_t t0 = 0;
          for (int width : last) {
            block(whole_end, yy, t0, width, static_cast<int>(last_nv));
            t0 += width;
          }
        }
      }
    });
  }

  ConvProblem pb_;
  Choice choice_;
  const KernelTable& kt_;
  int64_t lanes_;
  bool forward_ = true;
  bool pixel_vectors_ = false;
  bool copy_input_ = true;
  bool blocked_in_ = false;
  bool per_image_ = false;
  bool per_rows_ = false;     // input copied a row block at a time by each thread (LAYOUT 0 or 2, see the constructor)
  int64_t block_rows_ = 0;    // padded input rows one row block reads (per_rows_)
  int64_t rows_off_ = 0;      // the first of them, less y0 ins (the phases' least offset)
  int64_t in_block_ = 1, in_blocks_ = 1;
  int64_t groups_ = 1, ic_ = 1, oc_ = 1;
  int64_t src_rows_ = 0, src_cols_ = 0, out_rows_ = 0, out_cols_ = 0;
  std::vector<AxisPhase> ph_h_, ph_w_;
  std::vector<TapSlot> tap_h_, tap_w_;
  int64_t pad_top_ = 0, pad_bottom_ = 0, pad_left_ = 0, pad_right_ = 0, hi_ = 0, wi_ = 0;
  int nv_ = 1, nj_ = 1;
  int64_t block_ = 1, oc_blocks_ = 1;
  std::vector<int64_t> slab_offsets_;
  size_t packed_floats_ = 0;
  int64_t rows_max_ = 0, row_block_ = 1, row_blocks_ = 1;
  int64_t chunk_ = 0;
  size_t workspace_ = 0;
  unsigned threads_ = 1;
  int64_t column_parts_ = 1;  // column_parts()
  int64_t first_w_ = 0;       // the first column phase with columns (zero_rows)
  // Bytes of input a pixel-vector column block reads (a quarter of an L2), fixed when the plan is made: runs
  // never read the caches' sizes.
  int64_t column_budget_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_view_strategy(const ConvProblem& problem, const Choice& choice,
                                             const KernelTable& kernels) {
  return std::make_unique<ViewStrategy>(problem, choice, kernels);
}

bool copies_row_blocks(const ConvProblem& problem, const Choice& choice, const KernelTable& kernels) {
  return ViewStrategy(problem, choice, kernels).copies_row_blocks();
}

}  // namespace convtune::cpu_blocked::detail
