// Internal to the CPU convolution module: per-axis phase geometry shared by forward and backward-data, the
// prepared plans of the strategies, and small helpers (workspace carving, threads).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/extension/kernel_family.h"
#include "src/backend/cpu/caches.h"
#include "src/families/cpu_blocked/cpu_blocked.h"
#include "src/families/cpu_blocked/microkernels.h"

namespace convtune::cpu_blocked {

namespace detail {

// One axis (rows or columns) of one phase of a forward or backward-data problem in "output-stationary" form:
// output position i (of `count`) sits at out_start + i * out_step of the written tensor and reads the
// input buffer at i * ins + off + t * step for taps t in [0, taps), tap t being filter index
// k0 + t * kstep (reversed: k0 + (taps - 1 - t) * kstep). Forward has one phase per axis; backward-data with
// stride s has s (output positions congruent modulo s see the same taps).
struct AxisPhase {
  int64_t count = 0;
  int64_t out_start = 0, out_step = 1;
  int64_t ins = 1, off = 0, step = 1;
  int64_t taps = 0;
  int64_t k0 = 0, kstep = 1;
  bool reversed = false;
  int64_t filter_index(int64_t t) const { return reversed ? k0 + (taps - 1 - t) * kstep : k0 + t * kstep; }
};

// The phases of one axis. Forward: input extent `in`, output `out`, stride, pad, dilation, filter size.
// Backward-data: the roles swapped (input = dy's extent, output = dx's), and one phase per residue modulo stride
// that some output has (min(stride, out) of them): a filter tap of a residue no output has belongs to no phase.
std::vector<AxisPhase> forward_axis(int64_t out, int64_t stride, int64_t pad, int64_t dilation, int64_t filter);
std::vector<AxisPhase> backward_data_axis(int64_t out, int64_t stride, int64_t pad, int64_t dilation,
                                          int64_t filter);
// Padding (before, after) of an input extent `extent` that every phase's reads need; shifts each phase's `off`
// into the padded buffer's coordinates.
std::pair<int64_t, int64_t> pad_for(std::vector<AxisPhase>& phases, int64_t extent);

// Carves aligned pieces out of a caller's workspace; the same calls with a null base compute its size.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<std::byte*>(base)) {}
  float* floats(size_t count);
  size_t used() const { return used_; }

 private:
  std::byte* base_;
  size_t used_ = 0;
};

// Runs body(item, thread) for items [0, count) on up to `threads` pool threads, handing items out dynamically.
void parallel_items(int64_t count, unsigned threads, const std::function<void(int64_t, unsigned)>& body);
// As parallel_items, but each thread starts on a contiguous share of the items (thread t: [t count / n, (t + 1)
// count / n)) and walks it in order; a thread whose share is done takes batches from the back of the share with
// the most left. For items whose neighbours read the same operands (Winograd's GEMMs: the items of one xi read
// that xi's whole V slice), so each core reads its own part of the operands where parallel_items interleaved the
// threads' items and every core read all of them.
void parallel_shares(int64_t count, unsigned threads, const std::function<void(int64_t, unsigned)>& body);
// Runs body(thread, threads) once per pool thread (static splits).
void parallel_threads(unsigned threads, const std::function<void(unsigned, unsigned)>& body);

// [images][groups * per_group][rows][cols] -> [images * groups][blocks][rows + pads][cols + pads][block]: `block`
// channels interleaved per pixel, `top`/`left` zero rows/columns before (and the rest of out_rows/out_cols after),
// channels past the group's zero. `groups_of_images` = images * groups; `blocks` = ceil(per_group / block).
struct ChannelBlocking {
  int64_t groups_of_images = 1, per_group = 1, rows = 1, cols = 1;
  int64_t top = 0, left = 0, out_rows = 1, out_cols = 1, block = 1;
  int64_t blocks() const { return (per_group + block - 1) / block; }
  int64_t floats() const { return groups_of_images * blocks() * out_rows * out_cols * block; }
};
void copy_channel_blocked(const ChannelBlocking& layout, const float* src, float* dst, const KernelTable& kernels,
                          unsigned threads);
// One (image x group, channel block) of that copy into dst (out_rows x out_cols x block floats), on the calling
// thread; item = (image * groups + group) * blocks + block. Each row's pixels are interleaved by the in-register
// transpose (KernelTable::interleave), not a vector gather per pixel (KernelTable's InterleaveFn says why).
// With a row range [first, end) of the padded layout, only those rows, dst's row 0 being padded row `first` (a row
// block's input rows, copied by the thread about to compute on them); rows from out_rows on are written as zeros.
void copy_channel_block(const ChannelBlocking& layout, const float* src, int64_t item, float* dst,
                        const KernelTable& kernels, int64_t first = 0, int64_t end = -1);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Runs of `floats` floats, `stride` apart, prefetched into L2 a few lines per advance(): data the next work item
// reads from memory (the next image's planes before Winograd's per-image copies, the next row block's rows before
// the direct form's per-row copies), fetched while this item computes, a few lines beside each kernel call so the
// stream stays steady instead of a burst of misses when that item starts. Default: nothing to prefetch.
struct RunsPrefetch {
  const float* base = nullptr;
  int64_t runs = 0, stride = 0, floats = 0;
  int64_t lines_per_call = 0;
  int64_t run = 0, at = 0;  // the next line: float `at` of run `run`
  void advance() {
    for (int64_t l = 0; l < lines_per_call && run < runs; ++l) {
      // The last step lands on the run's last float, so a run that ends past a line boundary is covered.
      __builtin_prefetch(base + run * stride + std::min(at, floats - 1), 0, 2);
      at += 16;
      if (at >= floats + 15) at = 0, ++run;
    }
  }
};

// Peels mixed-radix digits off a work item's index, least significant first (Digits d(item); kw = d.next(S);
// kh = d.next(R); ...; rest = d.rest()): how every strategy maps a flat item number to its loop coordinates.
class Digits {
 public:
  explicit Digits(int64_t value) : value_(value) {}
  int64_t next(int64_t radix) {
    const int64_t digit = value_ % radix;
    value_ /= radix;
    return digit;
  }
  int64_t rest() const { return value_; }

 private:
  int64_t value_;
};

// The indices i in [begin, end) whose position first + i * step (step > 0) lies in [lo, hi), as [from, to) (from
// == to when none): the taps or output rows of a reduction that read real input rather than the zero padding of
// a padded copy. Skipping the rest is work oneDNN's kernels skip too (a 5x5 filter with padding 2 over 14 rows
// reads padding in 9% of its row taps).
std::pair<int64_t, int64_t> inside(int64_t begin, int64_t end, int64_t first, int64_t step, int64_t lo, int64_t hi);

// Short runs (a row of a few dozen floats) copied and zeroed in fixed-size pieces the compiler inlines as vector
// moves, not library calls: three calls per padded row (zeros, the row, zeros) cost as much as the row (17% of
// fmnist1's one-thread backward-filter samples; 18% of a ResNeXt 8-channel group layer's forward).
inline void copy_run(float* dst, const float* src, int64_t n) {
  for (; n >= 16; n -= 16, dst += 16, src += 16) std::memcpy(dst, src, 16 * sizeof(float));
  if (n >= 8) std::memcpy(dst, src, 8 * sizeof(float)), n -= 8, dst += 8, src += 8;
  if (n >= 4) std::memcpy(dst, src, 4 * sizeof(float)), n -= 4, dst += 4, src += 4;
  for (; n > 0; --n) *dst++ = *src++;
}
inline void zero_run(float* dst, int64_t n) {
  static constexpr float kZeros[16] = {};
  for (; n >= 16; n -= 16, dst += 16) std::memcpy(dst, kZeros, sizeof(kZeros));
  if (n >= 8) std::memcpy(dst, kZeros, 8 * sizeof(float)), n -= 8, dst += 8;
  for (; n > 0; --n) *dst++ = 0.0f;
}
// A padded row: `left` zeros, `n` floats from `src`, `right` zeros.
inline void padded_row(float* dst, const float* src, int64_t left, int64_t n, int64_t right) {
  zero_run(dst, left);
  copy_run(dst + left, src, n);
  zero_run(dst + left + n, right);
}

// Threads worth waking for a problem: one below a few MFLOP, where a pool job's wake-up (microseconds) would
// cost more than it saves.
unsigned threads_for(const ConvProblem& problem);

// Splits `count` columns into compiled block widths: `width` while it fits, then the widest compiled width not
// above the remainder. has(n) says whether width n is compiled.
std::vector<int> split_columns(int64_t count, int width, const std::function<bool(int)>& has);

// A strategy: forward/backward-data ("view") or backward-filter.
class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual size_t workspace_bytes() const = 0;
  virtual size_t packed_weight_floats() const { return 0; }
  virtual void pack_weights(const float* w, float* packed) const { (void)w, (void)packed; }
  // x, w, y as Convolution::run; `packed` holds packed weights (packed by the caller beforehand).
  virtual void run(float* x, const float* packed, float* w, float* y, void* workspace, StageTimes& times) = 0;
  virtual std::string describe() const = 0;
  // Floating-point operations a run performs (Convolution::performed_flops); the direct sum unless overridden.
  virtual double performed_flops(const ConvProblem& problem) const { return problem.flops(); }
};

std::unique_ptr<Strategy> make_view_strategy(const ConvProblem& problem, const Choice& choice,
                                             const KernelTable& kernels);
// Cache budgets the planners and strategies size their blocks by, from the caches the CPU reports
// (cpu::cache_sizes(); CONVTUNE_CPU_CACHES overrides). Most thresholds were measured on the developer host (L1d
// 48 KiB, L2 2 MiB per core), where half_l2() is 1 MiB: what one thread re-reads for every block of a pass stays
// in L2 beside what streams through.
inline int64_t l1d_bytes() { return cpu::cache_sizes().l1d; }
inline int64_t l2_bytes() { return cpu::cache_sizes().l2; }
inline int64_t half_l2() { return cpu::cache_sizes().l2 / 2; }
// A threshold of `bytes` measured on the developer host's 2 MiB L2, scaled to this CPU's L2.
inline double l2_scaled(double bytes) { return bytes * static_cast<double>(l2_bytes()) / static_cast<double>(2 << 20); }
// An image's channel-blocked copy (LAYOUT 2) above this (half an L2) stays out of L2: such inputs are copied a row
// block at a time instead where the row blocks allow it.
inline int64_t image_copy_bytes() { return half_l2(); }
// Whether the view strategy for (problem, choice) copies its input a row block at a time per thread.
bool copies_row_blocks(const ConvProblem& problem, const Choice& choice, const KernelTable& kernels);
// Forward at stride 1 along whole output planes (ALGO 2): per work item, copies of its input rows shifted by each
// filter column and cut to the output width, pixel-vector blocks over them (im2col_strategy.cpp). im2col_rows: the
// output rows per item for ROW_BLOCK 0, as many as keep the copies within half an L2 (one at least).
std::unique_ptr<Strategy> make_im2col_strategy(const ConvProblem& problem, const Choice& choice,
                                               const KernelTable& kernels);
int64_t im2col_rows(const ConvProblem& problem);
std::unique_ptr<Strategy> make_winograd_strategy(const ConvProblem& problem, const Choice& choice,
                                                 const KernelTable& kernels);
// Backward-filter of a 1x1 filter at stride 1 without padding, as computed_problem gives it (planes of one row):
// dW = dy x^T, both operands' rows contiguous whole planes. Its dot blocks (ORIENT 1) then take output channels x
// input channels, reading x and dy where they lie, instead of output channels x filter taps.
bool channel_dots(const ConvProblem& computed);

std::unique_ptr<Strategy> make_filter_strategy(const ConvProblem& problem, const Choice& choice,
                                               const KernelTable& kernels);

}  // namespace detail
}  // namespace convtune::cpu_blocked
