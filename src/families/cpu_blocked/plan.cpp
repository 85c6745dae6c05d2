// The module's shared planning pieces: per-axis phase geometry of forward and backward-data, workspace carving,
// thread splits and column blocking.
#include "src/families/cpu_blocked/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <numeric>

#include "convtune/error.h"
#include "src/core/thread_pool.h"

namespace convtune::cpu_blocked {

namespace detail {

std::vector<AxisPhase> forward_axis(int64_t out, int64_t stride, int64_t pad, int64_t dilation, int64_t filter) {
  AxisPhase a;
  a.count = out;
  a.ins = stride;
  a.off = -pad;
  a.step = dilation;
  a.taps = filter;
  return {a};
}

std::vector<AxisPhase> backward_data_axis(int64_t out, int64_t stride, int64_t pad, int64_t dilation,
                                          int64_t filter) {
  // dx[i] = sum over (o, k) with o * stride - pad + k * dilation == i of dy[o] w[k]. For i = phase + stride * a
  // the taps k with (phase + pad - k * dilation) divisible by stride contribute, from dy row
  // a + (phase + pad - k * dilation) / stride: an arithmetic progression of taps whose dy rows advance by
  // period * dilation / stride, read in increasing row order (the filter flipped).
  const int64_t period = stride / std::gcd(stride, dilation);
  const int64_t row_step = period * dilation / stride;
  std::vector<AxisPhase> phases;
  // Phases from `out` on have no output to write: only the first min(stride, out) are made, so the plan's phases
  // (and the slabs and loops over their pairs) grow with the output, not with the stride. A one-pixel dx at
  // stride 16384 had 2^28 phase pairs: 4.2 GB and 18 s. The taps of the phases left out are never read.
  for (int64_t phase = 0; phase < std::min(stride, out); ++phase) {
    AxisPhase a;
    a.count = phase < out ? (out - phase + stride - 1) / stride : 0;
    a.out_start = phase;
    a.out_step = stride;
    a.ins = 1;
    a.step = row_step;
    a.reversed = true;
    a.kstep = period;
    int64_t first = -1;
    for (int64_t k = 0; k < filter && first < 0; ++k)
      if (((phase + pad - k * dilation) % stride + stride) % stride == 0) first = k;
    if (first >= 0) {
      a.k0 = first;
      a.taps = (filter - 1 - first) / period + 1;
      // Row of tap 0 (the last filter index of the progression) for output 0. Exact: divisible by construction.
      const int64_t numerator = phase + pad - first * dilation;
      const int64_t row_first = numerator >= 0 ? numerator / stride : -((-numerator) / stride);
      a.off = row_first - (a.taps - 1) * row_step;
    }
    phases.push_back(a);
  }
  return phases;
}

std::pair<int64_t, int64_t> pad_for(std::vector<AxisPhase>& phases, int64_t extent) {
  int64_t lo = 0, hi = extent - 1;
  for (const auto& a : phases) {
    if (a.count == 0 || a.taps == 0) continue;
    lo = std::min(lo, a.off);
    hi = std::max(hi, (a.count - 1) * a.ins + a.off + (a.taps - 1) * a.step);
  }
  const int64_t before = -lo, after = hi - (extent - 1);
  for (auto& a : phases) a.off += before;
  return {before, after};
}

float* Carver::floats(size_t count) {
  constexpr size_t kAlign = 64;
  const size_t start = (used_ + kAlign - 1) / kAlign * kAlign;
  used_ = start + count * sizeof(float);
  if (base_ == nullptr) return nullptr;
  // The caller's workspace may start anywhere: everything is placed from its first 64-byte boundary.
  auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(base_) + kAlign - 1) / kAlign * kAlign);
  return reinterpret_cast<float*>(aligned + start);
}

void parallel_items(int64_t count, unsigned threads, const std::function<void(int64_t, unsigned)>& body) {
  if (count <= 0) return;
  const unsigned use = static_cast<unsigned>(std::min<int64_t>(threads, count));
  if (use <= 1) {
    for (int64_t i = 0; i < count; ++i) body(i, 0);
    return;
  }
  // Items are claimed a batch at a time: a locked operation waits for the thread's pending stores to drain, and
  // with items whose stores miss the caches (Winograd's transforms stream 36 lines far apart per item) perf put
  // 19% of a profile of alex3's backward-filter on one locked add per item. Batches of a sixteenth of a thread's
  // share as before, but over the last quarter of the items they shrink (a quarter of each thread's share of what
  // is left, down to one item): fixed batches to the end left one thread idle for up to a batch
  // (alex1 forward, 128 items of about 0.12 ms on two threads: the threads ended 0.5 ms apart, 5% of the run;
  // alex1 backward-data 1.4 ms of 24). On two threads that adds about 8 x ln(items / 32) + 8 claims.
  const int64_t batch_max = std::max<int64_t>(1, count / (int64_t{use} * 16));
  const int64_t share = int64_t{use} * 4;
  std::atomic<int64_t> next{0};
  ThreadPool::instance().run(use, [&](unsigned t, unsigned) {
    int64_t begin = next.load(std::memory_order_relaxed);
    for (;;) {
      if (begin >= count) break;
      const int64_t batch = std::clamp<int64_t>((count - begin) / share, 1, batch_max);
      if (!next.compare_exchange_weak(begin, begin + batch, std::memory_order_relaxed)) continue;
      const int64_t end = std::min(count, begin + batch);
      for (int64_t i = begin; i < end; ++i) body(i, t);
      begin = next.load(std::memory_order_relaxed);
    }
  });
}

void parallel_shares(int64_t count, unsigned threads, const std::function<void(int64_t, unsigned)>& body) {
  if (count <= 0) return;
  const unsigned use = static_cast<unsigned>(std::min<int64_t>(threads, count));
  if (use <= 1 || count >= (int64_t{1} << 31)) {
    parallel_items(count, threads, body);
    return;
  }
  // Per share, [front, back) still unclaimed, packed in one word (front high, back low) so that the owner's
  // claims from the front and other threads' from the back are one compare-and-swap each. Claims are batches
  // (a locked operation waits for the thread's pending streaming stores to drain): a sixteenth of what the share
  // has left, at most a thirty-second of a share, so a thread that finds its share done waits on at most a
  // sixteenth of the rest.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  std::vector<Share> shares(use);
  const auto pack = [](int64_t front, int64_t back) { return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back); };
  for (unsigned s = 0; s < use; ++s)
    shares[s].range.store(pack(s * count / use, (s + 1) * count / use), std::memory_order_relaxed);
  const int64_t batch_max = std::max<int64_t>(1, count / (int64_t{use} * 32));
  // Claims up to items of share s, from its front or its back: [begin, end), empty when none are left.
  const auto claim = [&](unsigned s, bool front_end, int64_t& begin, int64_t& end) {
    uint64_t r = shares[s].range.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t f = static_cast<int64_t>(r >> 32), b = static_cast<int64_t>(r & 0xffffffffu);
      if (f >= b) return false;
      const int64_t n = std::clamp<int64_t>((b - f) / 16, 1, batch_max);
      const uint64_t next = front_end ? pack(f + n, b) : pack(f, b - n);
      if (shares[s].range.compare_exchange_weak(r, next, std::memory_order_relaxed)) {
        begin = front_end ? f : b - n;
        end = front_end ? f + n : b;
        return true;
      }
    }
  };
  ThreadPool::instance().run(use, [&](unsigned t, unsigned) {
    int64_t begin = 0, end = 0;
    while (claim(t, true, begin, end))
      for (int64_t i = begin; i < end; ++i) body(i, t);
    for (;;) {
      // The share with the most left, from its back.
      unsigned victim = use;
      int64_t most = 0;
      for (unsigned s = 0; s < use; ++s) {
        const uint64_t r = shares[s].range.load(std::memory_order_relaxed);
        const int64_t left = static_cast<int64_t>(r & 0xffffffffu) - static_cast<int64_t>(r >> 32);
        if (left > most) most = left, victim = s;
      }
      if (victim == use) break;
      if (claim(victim, false, begin, end))
        for (int64_t i = begin; i < end; ++i) body(i, t);
    }
  });
}

void parallel_threads(unsigned threads, const std::function<void(unsigned, unsigned)>& body) {
  ThreadPool::instance().run(threads, body);
}

void copy_channel_blocked(const ChannelBlocking& l, const float* src, float* dst, const KernelTable& kernels,
                          unsigned threads) {
  const int64_t plane = l.out_rows * l.out_cols * l.block;
  parallel_items(l.groups_of_images * l.blocks(), threads, [&](int64_t item, unsigned) {
    copy_channel_block(l, src, item, dst + item * plane, kernels);
  });
}

void copy_channel_block(const ChannelBlocking& l, const float* src, int64_t item, float* d, const KernelTable& kernels,
                        int64_t first, int64_t end) {
  if (end < 0) end = l.out_rows;
  const int64_t blocks = l.blocks();
  const int64_t src_plane = l.rows * l.cols;
  const int64_t cb = item % blocks;
  const int64_t ng = item / blocks;  // image * groups + group
  const int64_t c0 = cb * l.block;
  const int64_t count = std::min(l.block, l.per_group - c0);
  const float* planes = src + (ng * l.per_group + c0) * src_plane;
  // Each pixel's channels, a plane apart in the source, interleaved into one run (channels past the group's as
  // zeros); zeros elsewhere only where nothing is interleaved (border rows and columns), so no line is written twice.
  const int64_t row_floats = l.out_cols * l.block;
  // Padded rows [first, end): the zero rows above and below the source's, and the source's rows between.
  const int64_t real0 = std::clamp(l.top, first, end), real1 = std::clamp(l.top + l.rows, first, end);
  std::fill(d, d + (real0 - first) * row_floats, 0.0f);
  std::fill(d + (real1 - first) * row_floats, d + (end - first) * row_floats, 0.0f);
  for (int64_t pr = real0; pr < real1; ++pr) {
    const int64_t r = pr - l.top;
    float* out_row = d + (pr - first) * row_floats;
    std::fill(out_row, out_row + l.left * l.block, 0.0f);
    std::fill(out_row + (l.left + l.cols) * l.block, out_row + row_floats, 0.0f);
    float* row = out_row + l.left * l.block;
    const float* in = planes + r * l.cols;
    kernels.interleave(in, src_plane, count, l.cols, row, l.block);
  }
}

std::pair<int64_t, int64_t> inside(int64_t begin, int64_t end, int64_t first, int64_t step, int64_t lo, int64_t hi) {
  // Floor division for either sign: positions may start in the padding before the buffer's real rows.
  const auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const int64_t from = std::max(begin, -floor_div(first - lo, step));  // ceil((lo - first) / step)
  const int64_t to = std::min(end, floor_div(hi - 1 - first, step) + 1);
  return from < to ? std::pair{from, to} : std::pair{begin, begin};
}

unsigned threads_for(const ConvProblem& problem) {
  return problem.flops() < 4e6 ? 1u : ThreadPool::instance().size();
}

std::vector<int> split_columns(int64_t count, int width, const std::function<bool(int)>& has) {
  std::vector<int> out;
  while (count > 0) {
    int w = static_cast<int>(std::min<int64_t>(count, width));
    while (w > 1 && !has(w)) --w;
    out.push_back(w);
    count -= w;
  }
  return out;
}

}  // namespace detail
}  // namespace convtune::cpu_blocked
