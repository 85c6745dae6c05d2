// The cpu_depthwise family: FP32 depthwise convolutions (one input channel per group, any channel multiplier) on
// the CPU backend, every direction, stride, padding and dilation, from the SIMD row kernels of row_kernels.h on the
// persistent thread pool. A general kernel's register block tiles C/groups or K/groups, which are 1 (or the small
// multiplier) here, so it idles or re-reads its input per tap; this family works a plane at a time instead: the
// input plane (or, backward-data, dy's plane) is copied padded and split into stride_w phases, so that every filter
// tap reads one contiguous run along an output row, vectors along that row. Unit-stride 3x3 and 5x5 layers read
// their planes in place instead (forward, and backward-data with one output per channel), borders masked. Layers
// without a channel multiplier also have the channel-blocked form (FORM 1, channel_form.h: vectors across channels),
// the untuned choice unless the plane form reads in place along rows of two vectors or more.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/families/cpu_depthwise/channel_form.h"
#include "src/families/cpu_depthwise/row_kernels.h"
#include "src/families/cpu_family.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"

namespace convtune {

namespace {

constexpr const char* kProgram = "cpu/depthwise";
constexpr const char* kName = "cpu_depthwise";

// A plane of `rows` rows whose `width` values sit `left` columns into a zero row of `padded` columns, split into
// `stride` phases: phase j of a row holds padded columns j, j + stride, j + 2 stride, ... (then kRowSlack floats),
// so that column u of row h lies at at(h, u). The source's rows start `top` rows down; the rows around are zeros.
struct PhasePlane {
  int64_t rows = 0, width = 0, left = 0, padded = 0, stride = 1, top = 0, src_rows = 0;
  int64_t phase_len = 0;

  static PhasePlane make(int64_t src_rows, int64_t top, int64_t rows, int64_t width, int64_t left, int64_t padded,
                         int64_t stride) {
    PhasePlane p;
    p.src_rows = src_rows, p.top = top, p.rows = std::max(rows, top + src_rows);
    p.width = width, p.left = left, p.padded = std::max(padded, left + width), p.stride = stride;
    // Phases a whole number of cache lines long: in a 64-byte aligned buffer every row and phase starts on a line,
    // so the taps of column offset 0 load whole lines (rows of 58 + 16 floats split three loads in four).
    p.phase_len = ((p.padded + stride - 1) / stride + cpu_depthwise::kRowSlack + 15) / 16 * 16;
    return p;
  }
  int64_t row_floats() const { return stride * phase_len; }
  int64_t floats() const { return rows * row_floats(); }
  int64_t at(int64_t h, int64_t u) const { return h * row_floats() + (u % stride) * phase_len + u / stride; }

  // `src` (src_rows x width, rows contiguous) into `dst`: zeros around each row's values, in the slack and in the
  // rows above and below, unless `zeroed` says that `dst` held this plane's layout before (the values only are
  // written then: the zeros are where they were). Stride 2's phases come from `deinterleave2`, a SIMD split of
  // each row.
  void fill(const float* src, float* dst, cpu_depthwise::Deinterleave deinterleave2, bool zeroed = false) const {
    if (!zeroed) std::fill(dst, dst + floats(), 0.0f);
    float* first_row = dst + top * row_floats();
    if (stride == 1) {
      for (int64_t h = 0; h < src_rows; ++h)
        std::memcpy(first_row + h * row_floats() + left, src + h * width, static_cast<size_t>(width) * sizeof(float));
      return;
    }
    if (stride == 2) {
      // Column x goes to padded column left + x: even x to phase left % 2 from index left / 2, odd x to the other
      // phase from index (left + 1) / 2.
      const int64_t even = (left % 2) * phase_len + left / 2, odd = ((left + 1) % 2) * phase_len + (left + 1) / 2;
      for (int64_t h = 0; h < src_rows; ++h) {
        float* row = first_row + h * row_floats();
        deinterleave2(src + h * width, width, row + even, row + odd);
      }
      return;
    }
    // Phase j's index t holds column t * stride + j: values where left <= that < left + width. The bounds are
    // worked out once, not per row (the divisions cost more than a short row's copy).
    std::vector<int64_t> first(static_cast<size_t>(stride)), last(static_cast<size_t>(stride));
    for (int64_t j = 0; j < stride; ++j) {
      first[j] = std::clamp<int64_t>((left - j + stride - 1) / stride, 0, phase_len);
      last[j] = std::clamp<int64_t>((left + width - j + stride - 1) / stride, first[j], phase_len);
    }
    for (int64_t h = 0; h < src_rows; ++h) {
      const float* in = src + h * width;
      float* row = first_row + h * row_floats();
      for (int64_t j = 0; j < stride; ++j) {
        float* out = row + j * phase_len;
        const float* from = in + (first[j] * stride + j - left);
        for (int64_t t = first[j]; t < last[j]; ++t, from += stride) out[t] = *from;
      }
    }
  }
};

// Per-thread scratch: planes, one output row, and the tap lists of a kernel call. `zeroed_for` names the layer
// (Depthwise::id_) whose plane layout `planes` holds, zeros included: the next plane of that layer writes only
// its values (MobileNetV2's stride-2 depthwise forward spent more time zeroing borders per row than summing).
struct Scratch {
  std::vector<float> planes, row;
  std::vector<const float*> a, b;
  std::vector<float> weights;
  uint64_t zeroed_for = 0;
  // The planes from their first 64-byte boundary (`planes` holds 16 floats more than asked).
  float* aligned_planes() {
    const auto at = reinterpret_cast<uintptr_t>(planes.data());
    return planes.data() + ((64 - at % 64) % 64) / sizeof(float);
  }
};

Scratch& scratch(size_t plane_floats, size_t row_floats, size_t pointers) {
  thread_local Scratch s;
  if (s.planes.size() < plane_floats + 16) s.planes.resize(plane_floats + 16);
  if (s.row.size() < row_floats) s.row.resize(row_floats);
  if (s.a.size() < pointers) s.a.resize(pointers), s.b.resize(pointers), s.weights.resize(pointers);
  return s;
}

class Depthwise {
 public:
  Depthwise(const ConvProblem& pb, int64_t vecs, int64_t form) : pb_(pb), vecs_(vecs), form_(form), id_(next_id()) {
    if (form_ == 1)
      channel_ = std::make_unique<cpu_depthwise::ChannelForm>(pb, cpu_depthwise::row_kernels(cpu::active_isa()).lanes);
    const int64_t sw = pb.stride.w, dw = pb.dilation.w;
    x_plane_ = x_plane_of(pb);
    dy_left_ = (pb.s - 1) * dw / sw;
    const int64_t sh = pb.stride.h, dh = pb.dilation.h;
    dy_top_ = ((pb.r - 1) * dh + sh - 1) / sh;
    dy_plane_ = dy_plane_of(pb);
    // The plane offsets the loops add, computed once here (their divisions by the strides cost more than a row's
    // work on small images): each tap's offset in x's plane, and backward-data's phases and groups.
    for (int64_t t = 0; t < pb.s; ++t) x_column_.push_back(x_plane_.at(0, t * dw));
    for (int64_t r = 0; r < pb.r; ++r)
      for (int64_t t = 0; t < pb.s; ++t)
        x_tap_.push_back(r * pb.dilation.h * x_plane_.row_floats() + x_column_[static_cast<size_t>(t)]);
    for (int64_t phase = 0; phase < sw; ++phase) {
      Phase ph;
      ph.x0 = ((phase - pb.pad.w) % sw + sw) % sw;
      if (ph.x0 >= pb.w) continue;
      ph.count = (pb.w - ph.x0 + sw - 1) / sw;
      const int64_t base = (ph.x0 + pb.pad.w - phase) / sw;
      for (int64_t t = 0; t < pb.s; ++t) {
        if ((t * dw) % sw != phase) continue;
        ph.taps.push_back(t);
        ph.columns.push_back(dy_plane_.at(0, dy_left_ + base - (t * dw - phase) / sw));
      }
      phases_.push_back(std::move(ph));
    }
    // Backward-data's groups: dx rows of one residue modulo stride_h times columns of one phase share their taps.
    int64_t buffer = 0;
    for (int64_t rho = 0; rho < std::min(sh, pb.h); ++rho) {
      for (const Phase& ph : phases_) {
        Group g;
        g.rho = rho, g.rows = (pb.h - rho + sh - 1) / sh, g.phase = &ph - phases_.data();
        g.buffer = buffer, buffer += g.rows * ph.count;
        for (int64_t j = 0; j < pb.k_per_group(); ++j)
          for (int64_t r = 0; r < pb.r; ++r) {
            const int64_t e = rho + pb.pad.h - r * dh;
            if ((e % sh + sh) % sh != 0) continue;
            for (size_t i = 0; i < ph.taps.size(); ++i) {
              g.offsets.push_back(j * dy_plane_.floats() + (e / sh + dy_top_) * dy_plane_.row_floats() + ph.columns[i]);
              g.weights.push_back((j * pb.r + r) * pb.s + ph.taps[i]);
            }
          }
        groups_.push_back(std::move(g));
      }
    }
  }

  // x padded by the layer's padding, rows too, in stride phases: tap (r, s) of output (p, q) reads row
  // p sh + r dh and column q sw + s dw, every one of them inside the plane.
  static PhasePlane x_plane_of(const ConvProblem& pb) {
    return PhasePlane::make(pb.h, pb.pad.h, (pb.p() - 1) * pb.stride.h + (pb.r - 1) * pb.dilation.h + 1, pb.w,
                            pb.pad.w, pb.w + 2 * pb.pad.w, pb.stride.w);
  }
  // dy padded for backward-data's gather (one phase): dx column x takes tap s from dy column
  // (x + pad - s dw) / sw where that divides; over a phase of x these run from -((S-1) dw) / sw to past Q. And zero
  // rows around: dx row h = rho + i sh (rho < sh) takes filter row r from dy row i + (rho + pad_h - r dil_h) / sh
  // where that divides, which runs from -((R-1) dil_h) / sh to past P.
  static PhasePlane dy_plane_of(const ConvProblem& pb) {
    const int64_t sw = pb.stride.w, sh = pb.stride.h;
    const int64_t left = (pb.s - 1) * pb.dilation.w / sw, top = ((pb.r - 1) * pb.dilation.h + sh - 1) / sh;
    const int64_t q_end = (pb.w + sw - 1) / sw + (sw - 1 + pb.pad.w) / sw + 1;
    return PhasePlane::make(pb.p(), top, top + (pb.h - 1 + pb.pad.h) / sh + 2, pb.q(), left,
                            left + std::max(pb.q(), q_end), 1);
  }
  // Floats of one thread's scratch at most for the form (FORM), from the geometry alone: what the plan counts as
  // host memory.
  static int64_t scratch_floats(const ConvProblem& pb, int64_t form) {
    if (form == 1) {
      // The channel form's copy, output plane and weights (its backward-filter sums are allocated per run).
      const int lanes = cpu_depthwise::row_kernels(cpu::active_isa()).lanes;
      return cpu_depthwise::ChannelForm(pb, lanes).scratch_floats();
    }
    const int64_t planes = std::max(x_plane_of(pb).floats(), pb.k_per_group() * dy_plane_of(pb).floats());
    const int64_t taps = pb.k_per_group() * pb.r * pb.s;
    return planes + 16 + (pb.stride.w > 1 ? pb.h * pb.w : 0) + 5 * taps;  // two pointers and a weight per tap
  }

  // The problem's operands x, w and y (dy); the direction says which one is written.
  void run(float* x, float* w, float* y) const {
    if (channel_) return channel_->run(cpu_depthwise::row_kernels(cpu::active_isa()), x, w, y);
    const cpu_depthwise::RowKernels& k = cpu_depthwise::row_kernels(cpu::active_isa());
    const int index = vecs_ == 4 ? 2 : vecs_ == 2 ? 1 : 0;
    const cpu_depthwise::PlaneDirect direct = direct_kernel(k);
    switch (pb_.direction) {
      case Direction::Forward:
        if (direct) return forward_direct(direct, x, w, y);
        return forward(k.plane_sum[index], k.deinterleave2, x, w, y);
      case Direction::BackwardData:
        if (direct && multiplier() == 1) return backward_data_direct(direct, y, w, x);
        return backward_data(k.plane_sum[index], k.deinterleave2, y, w, x);
      case Direction::BackwardFilter: return backward_filter(k.plane_dot, direct_dot_kernel(k), k.deinterleave2, x, y, w);
    }
  }

 private:
  int64_t multiplier() const { return pb_.k_per_group(); }

  // Each layer's id, never reused, so that a thread's scratch knows whose plane layout (zeros included) it holds.
  static uint64_t next_id() {
    static std::atomic<uint64_t> last{0};
    return ++last;
  }
  // True when this thread's scratch planes already hold this layer's layout; marks them as holding it from now on
  // (the caller's first fill zeroes them).
  bool claim(Scratch& s) const {
    if (s.zeroed_for == id_) return true;
    s.zeroed_for = id_;
    return false;
  }
  int64_t taps() const { return multiplier() * pb_.r * pb_.s; }

  // The in-place kernel where it applies: unit strides and a 3x3 or 5x5 filter (MobileNet's and EfficientNet's
  // depthwise layers). It reads each plane where it lies, borders masked, instead of copying it padded first: one
  // thread, MobileNetV2's 56x56 layer (16 images, 144 channels), the copy and its prefetches alone took 2.5 of the
  // 4.1 ms of a forward run. Two threads, alternated with the copying path: 3x3 layers 1.3-1.9x faster (56x56,
  // 14x14 with 576 channels, 112x112), 5x5 on 28x28 10-30%; 7x7 on 56x56 20% slower (its 49 weights and 28
  // border masks do not fit the registers), so 7x7 keeps the copy.
  bool reads_in_place() const {
    return pb_.stride.h == 1 && pb_.stride.w == 1 && pb_.r == pb_.s && (pb_.r == 3 || pb_.r == 5);
  }
  cpu_depthwise::PlaneDirect direct_kernel(const cpu_depthwise::RowKernels& k) const {
    return reads_in_place() ? k.plane_direct[pb_.r == 3 ? 0 : 1] : nullptr;
  }
  cpu_depthwise::PlaneDotDirect direct_dot_kernel(const cpu_depthwise::RowKernels& k) const {
    return reads_in_place() ? k.plane_dot_direct[pb_.r == 3 ? 0 : 1] : nullptr;
  }

  // Forward in place: y[n][c m + j] = the channel's plane summed under filter c m + j, planes in memory order.
  void forward_direct(cpu_depthwise::PlaneDirect direct, const float* x, const float* w, float* y) const {
    const int64_t P = pb_.p(), Q = pb_.q(), m = multiplier(), taps = pb_.r * pb_.s, planes = pb_.n * pb_.c;
    const cpu_depthwise::DirectGeometry g{pb_.h, pb_.w, P, Q, pb_.pad.h, pb_.pad.w, pb_.dilation.h, pb_.dilation.w};
    // Runs of consecutive planes per item, so that each thread reads a stretch of x front to back (the hardware
    // prefetches it; a software prefetch of the next plane measured no better).
    const int64_t run = std::max<int64_t>(1, std::min<int64_t>(8, planes / (8 * hardware_threads())));
    parallel_for((planes + run - 1) / run, hardware_threads(), [&](int64_t item) {
      const int64_t end = std::min(planes, (item + 1) * run);
      for (int64_t plane = item * run; plane < end; ++plane) {
        const int64_t n = plane / pb_.c, c = plane % pb_.c;
        for (int64_t j = 0; j < m; ++j) {
          const int64_t k = c * m + j;
          direct(x + plane * pb_.h * pb_.w, g, w + k * taps, y + (n * pb_.k + k) * P * Q);
        }
      }
    });
  }

  // Backward-data in place (one output per channel): with unit strides dx is dy's plane summed under the filter
  // turned by 180 degrees, padded by dil (R - 1) - pad on each axis.
  void backward_data_direct(cpu_depthwise::PlaneDirect direct, const float* dy, const float* w, float* dx) const {
    const int64_t P = pb_.p(), Q = pb_.q(), taps = pb_.r * pb_.s;
    const cpu_depthwise::DirectGeometry g{P, Q, pb_.h, pb_.w, pb_.dilation.h * (pb_.r - 1) - pb_.pad.h,
                                          pb_.dilation.w * (pb_.s - 1) - pb_.pad.w, pb_.dilation.h, pb_.dilation.w};
    parallel_for(pb_.n * pb_.c, hardware_threads(), [&](int64_t item) {
      const int64_t c = item % pb_.c;
      Scratch& s = scratch(0, 0, static_cast<size_t>(taps));
      for (int64_t t = 0; t < taps; ++t) s.weights[static_cast<size_t>(t)] = w[c * taps + taps - 1 - t];
      direct(dy + item * P * Q, g, s.weights.data(), dx + item * pb_.h * pb_.w);
    });
  }

  // y[n][c m + j] for every j: every tap of every output row inside the zero-bordered plane, one call a plane.
  // Work items are runs of consecutive planes, the next plane's input prefetched while one is computed.
  void forward(cpu_depthwise::PlaneSum plane_sum, cpu_depthwise::Deinterleave split, const float* x, const float* w, float* y) const {
    const int64_t P = pb_.p(), Q = pb_.q(), m = multiplier(), taps = pb_.r * pb_.s, planes = pb_.n * pb_.c;
    const int64_t run = std::max<int64_t>(1, std::min<int64_t>(8, planes / (8 * hardware_threads())));
    parallel_for((planes + run - 1) / run, hardware_threads(), [&](int64_t item) {
      Scratch& s = scratch(static_cast<size_t>(x_plane_.floats()), 0, 0);
      const bool zeroed = claim(s);
      float* planes_at = s.aligned_planes();
      const int64_t end = std::min(planes, (item + 1) * run);
      const int64_t in_rows = pb_.stride.h * x_plane_.row_floats();
      for (int64_t plane = item * run; plane < end; ++plane) {
        const int64_t n = plane / pb_.c, c = plane % pb_.c;
        x_plane_.fill(x + plane * pb_.h * pb_.w, planes_at, split, zeroed || plane > item * run);
        // The next plane's input (towards L2) and this plane's outputs (for writing) are prefetched a share before
        // each chunk of rows, so that the misses overlap the sums instead of stalling a burst of prefetches.
        const float* next = plane + 1 < planes ? x + (plane + 1) * pb_.h * pb_.w : nullptr;
        for (int64_t j = 0; j < m; ++j) {
          const int64_t k = c * m + j;
          float* out = y + (n * pb_.k + k) * P * Q;
          const int64_t chunks = std::min<int64_t>(P, 8);
          for (int64_t chunk = 0; chunk < chunks; ++chunk) {
            const int64_t r0 = P * chunk / chunks, r1 = P * (chunk + 1) / chunks;
            if (next && j == 0) prefetch_share(next, pb_.h * pb_.w, chunk, chunks, false);
            prefetch_share(out + r0 * Q, (r1 - r0) * Q, 0, 1, true);
            plane_sum(planes_at + r0 * in_rows, x_tap_.data(), w + k * taps, taps, r1 - r0, in_rows, Q,
                      out + r0 * Q, Q);
          }
        }
      }
    });
  }

  // Every cache line of `count` floats from `data`, towards L2: the next plane's input while this one is computed
  // (forward on MobileNetV2's 56x56 depthwise layer, two threads: 3.5 -> 2.8 ms).
  static void prefetch(const float* data, int64_t count) {
    const char* bytes = reinterpret_cast<const char*>(data);
    const int64_t size = count * static_cast<int64_t>(sizeof(float));
    for (int64_t at = 0; at < size; at += 64) __builtin_prefetch(bytes + at, 0, 2);
  }

  // Share `part` of `parts` of the cache lines of `count` floats from `data`: towards L2 for reading, or into the
  // cache for writing (the lines a plane's rows are about to store into, fetched ahead instead of on each store).
  static void prefetch_share(const float* data, int64_t count, int64_t part, int64_t parts, bool write) {
    const char* bytes = reinterpret_cast<const char*>(data);
    const int64_t lines = (count * static_cast<int64_t>(sizeof(float)) + 63) / 64;
    const int64_t l0 = lines * part / parts, l1 = lines * (part + 1) / parts;
    for (int64_t l = l0; l < l1; ++l) {
      if (write)
        __builtin_prefetch(bytes + l * 64, 1, 3);
      else
        __builtin_prefetch(bytes + l * 64, 0, 2);
    }
  }

  // dx[n][c] gathered: dx column x of row h sums, over the channel's outputs j and the taps (r, s) for which
  // h + pad_h - r dil_h and x + pad_w - s dil_w are multiples of the strides, w times dy there. Columns of one phase
  // (x + pad_w modulo stride_w) share their taps and read consecutive dy columns: one sum per phase and row.
  void backward_data(cpu_depthwise::PlaneSum plane_sum, cpu_depthwise::Deinterleave split, const float* dy, const float* w, float* dx) const {
    const int64_t P = pb_.p(), Q = pb_.q(), m = multiplier(), W = pb_.w;
    const int64_t sh = pb_.stride.h, sw = pb_.stride.w;
    parallel_for(pb_.n * pb_.c, hardware_threads(), [&](int64_t item) {
      const int64_t n = item / pb_.c, c = item % pb_.c;
      Scratch& s = scratch(static_cast<size_t>(m * dy_plane_.floats()), static_cast<size_t>(sw > 1 ? pb_.h * W : 0),
                           static_cast<size_t>(taps()));
      const bool zeroed = claim(s);
      float* planes_at = s.aligned_planes();
      // The next item's dy planes follow this item's in memory (channels c m .. c m + m - 1 of one image).
      if (item + 1 < pb_.n * pb_.c) prefetch(dy + (item + 1) * m * P * Q, m * P * Q);
      for (int64_t j = 0; j < m; ++j)
        dy_plane_.fill(dy + (n * pb_.k + c * m + j) * P * Q, planes_at + j * dy_plane_.floats(), split, zeroed);
      const float* wc = w + c * taps();
      float* out = dx + (n * pb_.c + c) * pb_.h * W;
      for (const Group& g : groups_) {
        const Phase& ph = phases_[static_cast<size_t>(g.phase)];
        const int64_t taps = static_cast<int64_t>(g.offsets.size());
        for (int64_t t = 0; t < taps; ++t) s.weights[static_cast<size_t>(t)] = wc[g.weights[static_cast<size_t>(t)]];
        if (sw == 1) {
          plane_sum(planes_at, g.offsets.data(), s.weights.data(), taps, g.rows, dy_plane_.row_floats(), W,
                    out + g.rho * W, sh * W);
        } else {
          plane_sum(planes_at, g.offsets.data(), s.weights.data(), taps, g.rows, dy_plane_.row_floats(),
                    ph.count, s.row.data() + g.buffer, ph.count);
        }
      }
      if (sw > 1) interleave_phases(s.row.data(), out);
    });
  }

  // Backward-data with stride_w > 1: dx's rows put together from the groups' phase rows in `buffer`, each row
  // written front to back (a strided store per element, a phase at a time, touched every line of dx twice and
  // stalled on its misses: MobileNetV2's stride-2 depthwise backward-data spent half its time there).
  void interleave_phases(const float* buffer, float* dx) const {
    const int64_t W = pb_.w, H = pb_.h, sh = pb_.stride.h, sw = pb_.stride.w;
    // from[rho * sw + r]: the rows of residue rho's group of phase x0 = r (output columns x = r modulo stride_w).
    std::vector<const float*> from(static_cast<size_t>(std::min(sh, H) * sw), nullptr);
    for (const Group& g : groups_)
      from[static_cast<size_t>(g.rho * sw + phases_[static_cast<size_t>(g.phase)].x0)] = buffer + g.buffer;
    // Rows in memory order (not a residue's rows, then the next's: rows share cache lines at their ends), each
    // written front to back, the next row's lines fetched for writing first.
    for (int64_t h = 0; h < H; ++h) {
      const int64_t rho = h % sh, i = h / sh;
      const float* const* f = from.data() + rho * sw;
      float* row = dx + h * W;
      if (h + 1 < H) {
        const char* next = reinterpret_cast<const char*>(row + W);
        for (int64_t at = 0; at < W * static_cast<int64_t>(sizeof(float)); at += 64) __builtin_prefetch(next + at, 1, 3);
      }
      if (sw == 2) {
        const float* even = f[0] + i * ((W + 1) / 2);
        const float* odd = f[1] + i * (W / 2);
        for (int64_t t = 0; t < W / 2; ++t) row[2 * t] = even[t], row[2 * t + 1] = odd[t];
        if (W % 2) row[W - 1] = even[W / 2];
        continue;
      }
      for (int64_t x = 0; x < W; ++x) {
        const int64_t r = x % sw;
        row[x] = f[r][i * ((W - r + sw - 1) / sw) + x / sw];
      }
    }
  }

  // dw[c m + j][r][s] = sum over images and output pixels of x at the tap times dy: one dot product per tap over
  // each whole zero-bordered plane. The planes are split into one contiguous run (in memory order: image, then
  // channel) per hardware thread, each summing into its own copy of dw, so that x and dy are read front to back
  // (a channel's planes an image apart, as before, restarted the hardware's prefetch on every plane); the copies
  // are added in a fixed order, so the result does not depend on the threads' timing.
  void backward_filter(cpu_depthwise::PlaneDot plane_dot, cpu_depthwise::PlaneDotDirect direct,
                       cpu_depthwise::Deinterleave split, const float* x, const float* dy, float* dw) const {
    const int64_t P = pb_.p(), Q = pb_.q(), m = multiplier(), all = taps(), taps = pb_.r * pb_.s;
    const int64_t planes = pb_.n * pb_.c, plane = pb_.h * pb_.w;
    const int64_t shares = std::clamp<int64_t>(static_cast<int64_t>(hardware_threads()), 1, planes);
    const int64_t in_rows = pb_.stride.h * x_plane_.row_floats();
    std::vector<double> partial(static_cast<size_t>(shares * pb_.c * all), 0.0);
    parallel_for(shares, hardware_threads(), [&](int64_t share) {
      const int64_t first = planes * share / shares, end = planes * (share + 1) / shares;
      if (direct) {
        // Unit strides, 3x3 or 5x5: x's planes read where they lie, front to back.
        const cpu_depthwise::DirectGeometry g{pb_.h, pb_.w, P, Q, pb_.pad.h, pb_.pad.w, pb_.dilation.h, pb_.dilation.w};
        for (int64_t at = first; at < end; ++at) {
          const int64_t n = at / pb_.c, c = at % pb_.c;
          double* sums = partial.data() + (share * pb_.c + c) * all;
          for (int64_t j = 0; j < m; ++j)
            direct(x + at * plane, g, dy + (n * pb_.k + c * m + j) * P * Q, sums + j * taps);
        }
        return;
      }
      // The copying path only: a plane buffer, and the claim that it holds this layer's zeros from the first fill.
      Scratch& s = scratch(static_cast<size_t>(x_plane_.floats()), 0, 0);
      const bool zeroed = claim(s);
      float* planes_at = s.aligned_planes();
      for (int64_t at = first; at < end; ++at) {
        const int64_t n = at / pb_.c, c = at % pb_.c;
        x_plane_.fill(x + at * plane, planes_at, split, zeroed || at > first);
        const float* next_x = at + 1 < end ? x + (at + 1) * plane : nullptr;
        double* sums = partial.data() + (share * pb_.c + c) * all;
        for (int64_t j = 0; j < m; ++j) {
          const float* b = dy + (n * pb_.k + c * m + j) * P * Q;
          // dy's planes (n, c m + j) lie in the order of (at, j), K being C m: the next one follows this one.
          const float* next_b = at + 1 < end || j + 1 < m ? b + P * Q : nullptr;
          const int64_t chunks = std::min<int64_t>(P, 8);
          for (int64_t chunk = 0; chunk < chunks; ++chunk) {
            const int64_t r0 = P * chunk / chunks, r1 = P * (chunk + 1) / chunks;
            if (next_x && j == 0) prefetch_share(next_x, plane, chunk, chunks, false);
            if (next_b) prefetch_share(next_b, P * Q, chunk, chunks, false);
            plane_dot(planes_at + r0 * in_rows, x_tap_.data(), taps, r1 - r0, in_rows, b + r0 * Q, Q, Q,
                      sums + j * taps);
          }
        }
      }
    });
    for (int64_t c = 0; c < pb_.c; ++c) {
      for (int64_t t = 0; t < all; ++t) {
        double total = 0;
        for (int64_t share = 0; share < shares; ++share)
          total += partial[static_cast<size_t>((share * pb_.c + c) * all + t)];
        dw[c * all + t] = static_cast<float>(total);
      }
    }
  }

  // Backward-data's output columns of one stride phase: the first, how many, and the taps (s) that reach them with
  // the column of dy's plane each starts at.
  struct Phase {
    int64_t x0 = 0, count = 0;
    std::vector<int64_t> taps, columns;
  };

  ConvProblem pb_;
  int64_t vecs_;
  int64_t form_;  // FORM: 0 planes, 1 channel-blocked (channel_form.h)
  std::unique_ptr<cpu_depthwise::ChannelForm> channel_;
  uint64_t id_;
  PhasePlane x_plane_, dy_plane_;
  int64_t dy_left_ = 0;
  std::vector<int64_t> x_column_;  // tap s's offset within a row of x's plane
  std::vector<int64_t> x_tap_;     // tap (r, s)'s offset from output row p's first plane row
  std::vector<Phase> phases_;
  // Backward-data's dx rows rho, rho + sh, ... (`rows` of them) in the columns of phases_[phase]: every tap's
  // offset in the dy planes from the group's first row, and its weight's index from the channel's first filter.
  struct Group {
    int64_t rho = 0, rows = 0, phase = 0;
    int64_t buffer = 0;  // stride_w > 1: where its rows (phase columns each) start in the per-thread row buffer
    std::vector<int64_t> offsets, weights;
  };
  std::vector<Group> groups_;
  int64_t dy_top_ = 0;
};

class CpuDepthwiseFamily final : public CpuFamily {
 public:
  CpuDepthwiseFamily() : CpuFamily(Problem::Kind::Convolution) {
    cpu::register_host_program(kProgram, [](const ProgramSource& source) {
      const ConvProblem pb = parse_problem(source.defines.at("PROBLEM"));
      const int64_t form = source.defines.count("FORM") ? cpu::define_int(source, "FORM") : 0;
      auto conv = std::make_shared<Depthwise>(pb, cpu::define_int(source, "VECS"), form);
      return std::map<std::string, cpu::HostKernel>{{"convolve", [conv](const std::vector<KernelArg>& args) {
                                                       conv->run(cpu::host_floats(args.at(0), "x"),
                                                                 cpu::host_floats(args.at(1), "w"),
                                                                 cpu::host_floats(args.at(2), "y"));
                                                     }}};
    });
  }
  std::string name() const override { return kName; }
  std::string description() const override {
    return "FP32 depthwise convolution (one input channel per group) on the CPU backend: each plane copied padded "
           "and split into stride phases, SIMD row kernels (Highway: AVX-512, AVX2, scalar) summing, scattering or "
           "dotting whole rows per filter tap, on the persistent thread pool";
  }
  int kernel_version() const override { return 2; }  // 2: the channel-blocked form (FORM)

  std::string unsupported_reason(const Problem& problem, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = CpuFamily::unsupported_reason(problem, epilogue, device); !why.empty()) return why;
    const ConvProblem& pb = problem.conv();
    if (!depthwise::one_channel_per_group(pb))
      return fmt::format("computes depthwise layers (one input channel per group), not C/groups = {}", pb.c_per_group());
    return {};
  }
  // A single group (one input channel, many outputs: Fashion-MNIST's first layer) is a plain convolution that
  // cpu_blocked's kernels fill.

  std::vector<Parameter> parameters(const Problem& problem) const override {
    std::vector<Parameter> list = {
        {"VECS", {4, 2, 1}, "vectors along an output row per register block (one broadcast weight per tap; FORM 0)"}};
    if (cpu_depthwise::channel_form_applies(problem.conv()))
      list.push_back({"FORM", {0, 1},
                      "0 = planes (vectors along rows), 1 = channel-blocked (vectors across channels, interleaved "
                      "per pixel in a padded copy)"});
    return list;
  }
  // VECS blocks the plane form's rows only: the channel form takes one value of it, so a search times it once.
  std::vector<Constraint> constraints(const Problem& problem) const override {
    if (!cpu_depthwise::channel_form_applies(problem.conv())) return {};
    return {{"the channel-blocked form (FORM 1) with VECS 4 (VECS blocks the plane form's rows)", {"FORM", "VECS"},
             [](const ConstraintContext& c) { return c.config.at("FORM") == 0 || c.config.at("VECS") == 4; }}};
  }
  Config default_config(const Problem& problem, const DeviceInfo&) const override {
    Config config = {{"VECS", 4}};
    if (cpu_depthwise::channel_form_applies(problem.conv())) config["FORM"] = default_form(problem.conv());
    return config;
  }
  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config, const DeviceInfo&) const override {
    KernelRecipe recipe = cpu_recipe(kProgram, "convolve", problem, config);
    recipe.host_bytes = scratch_bytes(problem.conv(), config.count("FORM") ? config.at("FORM") : 0);
    return recipe;
  }
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo& device) const override {
    if (problem.conv().groups == 1) return "one group: a plain convolution of one input channel";
    return memory_out_of_proportion(recipe(problem, {}, default_config(problem, device), device), problem);
  }

 private:
  // The channel-blocked form, but for unit-stride 3x3 and 5x5 layers whose rows fill two vectors or more: those
  // read their planes in place with every lane busy, and the channel form's interleaving moves cost more than they
  // save there (MobileNetV2's 56x56 depthwise: level or slower). On rows of 7 or 14, stride 2 and 7x7 filters the
  // channel form took 0.2-0.55x the plane form's time (one thread, Intel Xeon: ConvNeXt's 7x7 at 7x7 planes 1.95
  // -> 0.46 ms forward; EfficientNet's 5x5 stride 2 backward-data 0.22 -> 0.07; backward-filter 8.5 -> 0.67 ms on
  // the 7x7 planes, 0.17 -> 0.03 on MobileNetV2's 3x3 stride 2 at batch 1).
  static int64_t default_form(const ConvProblem& pb) {
    const bool in_place = pb.stride.h == 1 && pb.stride.w == 1 && pb.r == pb.s && (pb.r == 3 || pb.r == 5);
    const int64_t lanes = cpu_depthwise::row_kernels(cpu::active_isa()).lanes;
    return in_place && pb.w >= 2 * lanes ? 0 : 1;
  }
  // The per-thread scratch a run keeps (thread_local, kept after the run), every pool thread's. The plane form's:
  // the larger of x's padded plane in stride phases and dy's planes of one channel's outputs, and one output row;
  // planes in stride phases grow with the stride where it passes the padded width, part of what the workspace limit
  // bounds. The channel form's: a block's padded interleaved copy and output plane (channel_form.h).
  static size_t scratch_bytes(const ConvProblem& pb, int64_t form) {
    return static_cast<size_t>(Depthwise::scratch_floats(pb, form)) * sizeof(float) * hardware_threads();
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_cpu_depthwise() { return std::make_unique<CpuDepthwiseFamily>(); }

}  // namespace convtune
