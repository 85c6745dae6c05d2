// The cpu_depthwise family's row kernels (row_kernels.h), compiled once per Highway target by foreach_target:
// weighted sums of rows over whole planes in register blocks of 1, 2 or 4 vectors along a row (one broadcast weight
// per filter tap), the same sums read in place for 3x3 and 5x5 filters, dot products of rows, and stride 2's split.
#include "src/backend/cpu/hwy_targets.h"
// Highway re-includes this file once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/families/cpu_depthwise/row_kernels.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>

#include "src/backend/cpu/store_first-inl.h"
#include "src/backend/cpu/transpose-inl.h"
#include "src/families/cpu_depthwise/row_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu_depthwise {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
#ifdef CONVTUNE_HAVE_TRANSPOSE
using cpu::HWY_NAMESPACE::TransposeSquare;  // src/backend/cpu/transpose-inl.h
#endif

// Lanes [lo, hi) from p, zero elsewhere (`m` is that range as a mask). x86's masked loads never touch the other
// lanes, so p may point before a buffer or its vector run past the end; Highway's emulated and scalar targets load
// the whole vector (AddressSanitizer caught it), so there the lanes go through a zeroed buffer.
HWY_INLINE V LoadRange(const D d, const float* p, hn::Mask<D> m, int64_t lo, int64_t hi) {
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
  (void)lo, (void)hi;
  return hn::MaskedLoad(m, d, p);
#else
  (void)m;
  HWY_ALIGN float lanes[hn::MaxLanes(D())] = {};
  for (int64_t i = lo; i < hi; ++i) lanes[i] = p[i];
  return hn::Load(d, lanes);
#endif
}

// One register block of NB vectors at out + i of every tap's weighted row: the first NB - 1 vectors whole, the last
// stored under `last` (whole vectors or a row's tail). Loads may run past count into the rows' slack. The taps
// alternate between K sets of accumulators, added at the end: with one set, each vector's sum was a chain of
// dependent multiply-adds (four cycles each), and four vectors kept the FMA units half idle.
template <int NB>
HWY_INLINE void SumBlock(const D d, const float* in, const int64_t* offsets, const float* weights, int64_t taps,
                         int64_t i, hn::Mask<D> last, float* o) {
  constexpr int K = NB >= 4 ? 2 : 8 / NB;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[K][NB];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) acc[k][v] = hn::Zero(d);
  }
  int64_t t = 0;
  for (; t + K <= taps; t += K) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const V w = hn::Set(d, weights[t + k]);
      const float* row = in + offsets[t + k] + i;
#pragma GCC unroll 8
      for (int v = 0; v < NB; ++v) acc[k][v] = hn::MulAdd(w, hn::LoadU(d, row + v * lanes), acc[k][v]);
    }
  }
  for (int k = 0; t < taps; ++t, ++k) {
    const V w = hn::Set(d, weights[t]);
    const float* row = in + offsets[t] + i;
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) acc[k][v] = hn::MulAdd(w, hn::LoadU(d, row + v * lanes), acc[k][v]);
  }
#pragma GCC unroll 8
  for (int k = 1; k < K; ++k) {
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) acc[0][v] = hn::Add(acc[0][v], acc[k][v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v + 1 < NB; ++v) hn::StoreU(acc[0][v], d, o + i + v * lanes);
  hn::BlendedStore(acc[0][NB - 1], last, d, o + i + (NB - 1) * lanes);
}

// Blocks of NV vectors along each row, then one block of the 1..NV vectors left, its last vector masked: a row of
// 56 floats is one block of four AVX-512 vectors (each tap's weight broadcast once per four loads), not four
// blocks of one (MobileNetV2's 56x56 depthwise forward, one thread: the one-vector loop was load-bound on the
// weight and offset of every tap).
template <int NV>
void PlaneSumRows(const float* base, const int64_t* offsets, const float* weights, int64_t taps, int64_t rows,
                  int64_t in_stride, int64_t count, float* out, int64_t out_stride) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t whole = count / (NV * lanes) * (NV * lanes);
  const int64_t rest = count - whole, rest_vectors = (rest + lanes - 1) / lanes;
  const auto all = hn::FirstN(d, static_cast<size_t>(lanes));
  const auto tail = hn::FirstN(d, static_cast<size_t>(rest - (rest_vectors - 1) * lanes));
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = base + r * in_stride;
    float* o = out + r * out_stride;
    for (int64_t i = 0; i < whole; i += NV * lanes) SumBlock<NV>(d, in, offsets, weights, taps, i, all, o);
    switch (rest_vectors) {
      case 0: break;
      case 1: SumBlock<1>(d, in, offsets, weights, taps, whole, tail, o); break;
      case 2: if constexpr (NV >= 2) SumBlock<2>(d, in, offsets, weights, taps, whole, tail, o); break;
      case 3: if constexpr (NV >= 3) SumBlock<3>(d, in, offsets, weights, taps, whole, tail, o); break;
      default: if constexpr (NV >= 4) SumBlock<4>(d, in, offsets, weights, taps, whole, tail, o); break;
    }
  }
}

void Deinterleave2(const float* in, int64_t count, float* even, float* odd) {
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (; 2 * (i + lanes) <= count; i += lanes) {
    const V lo = hn::LoadU(d, in + 2 * i), hi = hn::LoadU(d, in + 2 * i + lanes);
    hn::StoreU(hn::ConcatEven(d, hi, lo), d, even + i);
    hn::StoreU(hn::ConcatOdd(d, hi, lo), d, odd + i);
  }
  // The rest (under two vectors: 24 of a row of 56) masked, not a float at a time.
  const int64_t rest = count - 2 * i;
  if (rest > 0) {
    const auto first = hn::FirstN(d, static_cast<size_t>(std::min(rest, lanes)));
    const auto second = hn::FirstN(d, static_cast<size_t>(std::max<int64_t>(rest - lanes, 0)));
    const V lo = LoadRange(d, in + 2 * i, first, 0, std::min(rest, lanes));
    const V hi = LoadRange(d, in + 2 * i + lanes, second, 0, std::max<int64_t>(rest - lanes, 0));
    hn::BlendedStore(hn::ConcatEven(d, hi, lo), hn::FirstN(d, static_cast<size_t>((rest + 1) / 2)), d, even + i);
    hn::BlendedStore(hn::ConcatOdd(d, hi, lo), hn::FirstN(d, static_cast<size_t>(rest / 2)), d, odd + i);
    return;
  }
#endif
  for (; 2 * i < count; ++i) {
    even[i] = in[2 * i];
    if (2 * i + 1 < count) odd[i] = in[2 * i + 1];
  }
}

// NT taps (compile-time, so that the accumulators stay in registers) share each load of b; every tap's products
// stay in one vector over the whole plane.
template <int NT>
HWY_INLINE void DotTaps(const D d, const float* base, const int64_t* offsets, int64_t rows, int64_t in_stride,
                        const float* b, int64_t b_stride, int64_t count, double* sums) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t full = count / lanes * lanes;
  const auto tail = hn::FirstN(d, static_cast<size_t>(count - full));
  V acc[NT];
  int64_t off[NT];
#pragma GCC unroll 16
  for (int j = 0; j < NT; ++j) acc[j] = hn::Zero(d), off[j] = offsets[j];
  for (int64_t i = 0; i < rows; ++i) {
    const float* in = b + i * b_stride;
    const float* row = base + i * in_stride;
    for (int64_t x = 0; x < full; x += lanes) {
      const V v = hn::LoadU(d, in + x);
#pragma GCC unroll 16
      for (int j = 0; j < NT; ++j) acc[j] = hn::MulAdd(hn::LoadU(d, row + off[j] + x), v, acc[j]);
    }
    if (full < count) {
      const V v = LoadRange(d, in + full, tail, 0, count - full);
#pragma GCC unroll 16
      for (int j = 0; j < NT; ++j) acc[j] = hn::MulAdd(hn::LoadU(d, row + off[j] + full), v, acc[j]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NT; ++j) sums[j] += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, acc[j])));
}

// Passes of up to 9 taps, as even as the tap count allows (3x3: one pass; 5x5: 9 + 8 + 8), each reading b once:
// with a run-time count the accumulators lived in memory (a load and a store per product).
void PlaneDotRows(const float* base, const int64_t* offsets, int64_t taps, int64_t rows, int64_t in_stride,
                  const float* b, int64_t b_stride, int64_t count, double* sums) {
  const D d;
  constexpr int64_t kMaxTaps = 9;
  const int64_t passes = (taps + kMaxTaps - 1) / kMaxTaps;
  for (int64_t pass = 0, t0 = 0; pass < passes; ++pass) {
    const int64_t t1 = taps * (pass + 1) / passes;
    const int64_t* o = offsets + t0;
    double* s = sums + t0;
    switch (t1 - t0) {
      case 1: DotTaps<1>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 2: DotTaps<2>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 3: DotTaps<3>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 4: DotTaps<4>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 5: DotTaps<5>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 6: DotTaps<6>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 7: DotTaps<7>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      case 8: DotTaps<8>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
      default: DotTaps<9>(d, base, o, rows, in_stride, b, b_stride, count, s); break;
    }
    t0 = t1;
  }
}

// The in-place kernels' block of up to NB vectors starting at output column q0: how many vectors it has (nb), the
// lanes of its last one that lie inside the output row (tail), and the lanes [lo, hi) of vector v's load for filter
// column s that lie inside the input row, as a mask and as bounds (for LoadRange).
template <int NB, int R>
struct BorderMasks {
  int64_t nb = 0;
  hn::Mask<D> tail;
  hn::Mask<D> mask[NB][R];
  int64_t lo[NB][R], hi[NB][R];

  // Returns whether every load of the block's nb vectors lies inside the row (no masks needed).
  bool set(const D d, const DirectGeometry& g, int64_t q0) {
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    nb = std::min<int64_t>(NB, (g.out_w - q0 + lanes - 1) / lanes);
    tail = hn::FirstN(d, static_cast<size_t>(g.out_w - q0 - (nb - 1) * lanes));
    bool whole = true;
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) {
#pragma GCC unroll 5
      for (int s = 0; s < R; ++s) {
        const int64_t col = q0 + v * lanes + s * g.dil_w - g.pad_w;
        lo[v][s] = std::clamp<int64_t>(-col, 0, lanes);
        hi[v][s] = std::clamp<int64_t>(g.in_w - col, lo[v][s], lanes);
        mask[v][s] = hn::AndNot(hn::FirstN(d, static_cast<size_t>(lo[v][s])),
                                hn::FirstN(d, static_cast<size_t>(hi[v][s])));
        if (v < nb && (lo[v][s] != 0 || hi[v][s] != lanes)) whole = false;
      }
    }
    return whole;
  }
  HWY_INLINE V load(const D d, const float* p, int v, int s) const {
    return LoadRange(d, p, mask[v][s], lo[v][s], hi[v][s]);
  }
};

// The in-place unit-stride sum (row_kernels.h, DirectGeometry) for an R x R filter: blocks of up to four vectors
// along an output row, every row of the plane per block (a block's loads are the same per row, so its border masks
// are worked out once per block), taps alternating between two accumulator sets. Loads that would reach outside a
// row are masked (a masked-off lane is never read), so the plane needs neither a padded copy nor slack.
template <int R>
void PlaneDirectR(const float* in, const DirectGeometry& g, const float* weights, float* out) {
  const D d;
  constexpr int NB = 4;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V w[R * R];
#pragma GCC unroll 25
  for (int t = 0; t < R * R; ++t) w[t] = hn::Set(d, weights[t]);
  for (int64_t q0 = 0; q0 < g.out_w; q0 += NB * lanes) {
    BorderMasks<NB, R> m;
    const bool whole = m.set(d, g, q0);
    const int64_t nb = m.nb;
    const auto tail = m.tail;
    for (int64_t p = 0; p < g.out_h; ++p) {
      V acc[2][NB];
#pragma GCC unroll 8
      for (int v = 0; v < NB; ++v) acc[0][v] = hn::Zero(d), acc[1][v] = hn::Zero(d);
#pragma GCC unroll 5
      for (int r = 0; r < R; ++r) {
        const int64_t row = p + r * g.dil_h - g.pad_h;
        if (row < 0 || row >= g.in_h) continue;
        const float* x = in + row * g.in_w + q0 - g.pad_w;
#pragma GCC unroll 5
        for (int s = 0; s < R; ++s) {
          const float* at = x + s * g.dil_w;
#pragma GCC unroll 8
          for (int v = 0; v < NB; ++v) {
            if (v >= nb) break;
            const V xv = whole ? hn::LoadU(d, at + v * lanes)
                               : m.load(d, at + v * lanes, v, s);
            acc[(r * R + s) & 1][v] = hn::MulAdd(w[r * R + s], xv, acc[(r * R + s) & 1][v]);
          }
        }
      }
      float* o = out + p * g.out_w + q0;
#pragma GCC unroll 8
      for (int v = 0; v < NB; ++v) {
        if (v >= nb) break;
        const V sum = hn::Add(acc[0][v], acc[1][v]);
        if (v + 1 < nb) {
          hn::StoreU(sum, d, o + v * lanes);
        } else {
          hn::BlendedStore(sum, tail, d, o + v * lanes);
        }
      }
    }
  }
}

// Backward-filter's dots read in place (row_kernels.h): one accumulator per tap over the whole plane, blocks of up to
// four vectors along a dy row with every row per block, loads outside a row of x masked as in PlaneDirectR.
template <int R>
void PlaneDotDirectR(const float* in, const DirectGeometry& g, const float* b, double* sums) {
  const D d;
  constexpr int NB = 4;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[R * R];
#pragma GCC unroll 25
  for (int t = 0; t < R * R; ++t) acc[t] = hn::Zero(d);
  for (int64_t q0 = 0; q0 < g.out_w; q0 += NB * lanes) {
    BorderMasks<NB, R> m;
    m.set(d, g, q0);
    const int64_t nb = m.nb;
    const auto tail = m.tail;
    for (int64_t p = 0; p < g.out_h; ++p) {
      const float* dy = b + p * g.out_w + q0;
#pragma GCC unroll 8
      for (int v = 0; v < NB; ++v) {
        if (v >= nb) break;
        // dy's lanes past the row read as zero, so the x lanes they meet add nothing.
        const V dv = v + 1 < nb ? hn::LoadU(d, dy + v * lanes)
                                : LoadRange(d, dy + v * lanes, tail, 0, std::min(lanes, g.out_w - q0 - v * lanes));
#pragma GCC unroll 5
        for (int r = 0; r < R; ++r) {
          const int64_t row = p + r * g.dil_h - g.pad_h;
          if (row < 0 || row >= g.in_h) continue;
          const float* x = in + row * g.in_w + q0 - g.pad_w + v * lanes;
#pragma GCC unroll 5
          for (int s = 0; s < R; ++s)
            acc[r * R + s] = hn::MulAdd(m.load(d, x + s * g.dil_w, v, s), dv, acc[r * R + s]);
        }
      }
    }
  }
#pragma GCC unroll 25
  for (int t = 0; t < R * R; ++t) sums[t] += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, acc[t])));
}

// B outputs of the channel-blocked sum, each an accumulator across lanes channels: per tap one weight vector, then
// B multiply-adds reading the input where it lies. STEP: the outputs' input step in vectors when known at compile
// time (1, 2), else 0 and `in_step` (a constant step lets each load carry its displacement instead of an add a load:
// 7x7 taps over rows of 7 outputs were issue-bound on those adds).
template <int B, int STEP>
HWY_INLINE void ChannelBlockSum(const float* in, const int64_t* in_offsets, const float* weights,
                                const int64_t* w_offsets, int64_t taps, int64_t in_step, float* out,
                                int64_t out_step) {
  const D d;
  const int64_t step = STEP > 0 ? STEP * static_cast<int64_t>(hn::Lanes(d)) : in_step;
  V acc[B];
#pragma GCC unroll 16
  for (int b = 0; b < B; ++b) acc[b] = hn::Zero(d);
  for (int64_t t = 0; t < taps; ++t) {
    const V w = hn::LoadU(d, weights + w_offsets[t]);
    const float* row = in + in_offsets[t];
#pragma GCC unroll 16
    for (int b = 0; b < B; ++b) acc[b] = hn::MulAdd(w, hn::LoadU(d, row + b * step), acc[b]);
  }
#pragma GCC unroll 16
  for (int b = 0; b < B; ++b) hn::StoreU(acc[b], d, out + b * out_step);
}

template <int STEP>
void ChannelSumSteps(const float* in, const int64_t* in_offsets, const float* weights, const int64_t* w_offsets,
                     int64_t taps, int64_t count, int64_t in_step, float* out, int64_t out_step) {
  const int64_t blocks = (count + kChannelBlock - 1) / kChannelBlock;
  for (int64_t i = 0, j = 0; i < blocks; ++i) {
    const int64_t end = count * (i + 1) / blocks;
    const float* at = in + j * in_step;
    float* o = out + j * out_step;
    switch (end - j) {
#define CONVTUNE_CHANNEL_BLOCK(n) \
  case n: ChannelBlockSum<n, STEP>(at, in_offsets, weights, w_offsets, taps, in_step, o, out_step); break;
      CONVTUNE_CHANNEL_BLOCK(1) CONVTUNE_CHANNEL_BLOCK(2) CONVTUNE_CHANNEL_BLOCK(3) CONVTUNE_CHANNEL_BLOCK(4)
      CONVTUNE_CHANNEL_BLOCK(5) CONVTUNE_CHANNEL_BLOCK(6) CONVTUNE_CHANNEL_BLOCK(7) CONVTUNE_CHANNEL_BLOCK(8)
      CONVTUNE_CHANNEL_BLOCK(9) CONVTUNE_CHANNEL_BLOCK(10) CONVTUNE_CHANNEL_BLOCK(11) CONVTUNE_CHANNEL_BLOCK(12)
      CONVTUNE_CHANNEL_BLOCK(13) CONVTUNE_CHANNEL_BLOCK(14)
#undef CONVTUNE_CHANNEL_BLOCK
      default: break;
    }
    j = end;
  }
}

// `count` outputs in blocks of equal size (a row of 28 is two blocks of 14, not 14 + 14 + 0; one of 16 is two of
// 8, not 14 + 2, whose block of 2 would leave the FMA units waiting on each accumulator's chain).
void ChannelSumRow(const float* in, const int64_t* in_offsets, const float* weights, const int64_t* w_offsets,
                   int64_t taps, int64_t count, int64_t in_step, float* out, int64_t out_step) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(D()));
  if (in_step == lanes)
    ChannelSumSteps<1>(in, in_offsets, weights, w_offsets, taps, count, in_step, out, out_step);
  else if (in_step == 2 * lanes)
    ChannelSumSteps<2>(in, in_offsets, weights, w_offsets, taps, count, in_step, out, out_step);
  else
    ChannelSumSteps<0>(in, in_offsets, weights, w_offsets, taps, count, in_step, out, out_step);
}
static_assert(kChannelBlock == 14, "ChannelSumRow's switch names every block size up to kChannelBlock");

// Up to kDotTaps taps at a time, each an accumulator across channels: per output pixel one dy vector, then a
// multiply-add per tap reading x where it lies.
constexpr int64_t kDotTaps = 12;
template <int T>
HWY_INLINE void ChannelDotTaps(const float* in, const int64_t* row_offsets, int64_t rows, int64_t count,
                               int64_t in_step, const int64_t* tap_offsets, const float* dy, double* sums) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[T];
  int64_t off[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = hn::Zero(d), off[t] = tap_offsets[t];
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = in + row_offsets[i];
    const float* b = dy + i * count * lanes;
    for (int64_t x = 0; x < count; ++x, row += in_step, b += lanes) {
      const V g = hn::LoadU(d, b);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t] = hn::MulAdd(hn::LoadU(d, row + off[t]), g, acc[t]);
    }
  }
  HWY_ALIGN float lane[hn::MaxLanes(D())];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    hn::Store(acc[t], d, lane);
    for (int64_t l = 0; l < lanes; ++l) sums[t * lanes + l] += static_cast<double>(lane[l]);
  }
}

void ChannelDotRows(const float* in, const int64_t* row_offsets, int64_t rows, int64_t count, int64_t in_step,
                    const int64_t* tap_offsets, int64_t taps, const float* dy, double* sums) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(D()));
  // Groups of equal size (25 taps: 9 + 8 + 8, not 12 + 12 + 1).
  const int64_t groups = (taps + kDotTaps - 1) / kDotTaps;
  for (int64_t g = 0, t = 0; g < groups; ++g) {
    const int64_t end = taps * (g + 1) / groups;
    switch (end - t) {
#define CONVTUNE_DOT_TAPS(n)                                                                                   \
  case n:                                                                                                      \
    ChannelDotTaps<n>(in, row_offsets, rows, count, in_step, tap_offsets + t, dy, sums + t * lanes); \
    break;
      CONVTUNE_DOT_TAPS(1) CONVTUNE_DOT_TAPS(2) CONVTUNE_DOT_TAPS(3) CONVTUNE_DOT_TAPS(4) CONVTUNE_DOT_TAPS(5)
      CONVTUNE_DOT_TAPS(6) CONVTUNE_DOT_TAPS(7) CONVTUNE_DOT_TAPS(8) CONVTUNE_DOT_TAPS(9) CONVTUNE_DOT_TAPS(10)
      CONVTUNE_DOT_TAPS(11) CONVTUNE_DOT_TAPS(12)
#undef CONVTUNE_DOT_TAPS
      default: break;
    }
    t = end;
  }
}
static_assert(kDotTaps == 12, "ChannelDotRows' switch names every group size up to kDotTaps");

// See ToChannels: tiles of lanes channels x lanes pixels of the run transposed in registers where the target has
// it, each pixel stored at its row and column of the destination.
void ToChannelsPlane(const float* HWY_RESTRICT src, int64_t plane, int64_t channels, int64_t rows, int64_t cols,
                     float* HWY_RESTRICT dst, int64_t dst_row) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t count = rows * cols;
#ifdef CONVTUNE_HAVE_TRANSPOSE
  constexpr int64_t kLanes = static_cast<int64_t>(hn::MaxLanes(D()));
  int64_t i = 0, x = 0;  // the destination row and column of the next pixel
  for (int64_t x0 = 0; x0 < count; x0 += kLanes) {
    const int64_t n = std::min(kLanes, count - x0);
    V r[kLanes];
    if (n == kLanes && channels == kLanes) {
#pragma GCC unroll 16
      for (int64_t l = 0; l < kLanes; ++l) r[l] = hn::LoadU(d, src + l * plane + x0);
    } else {
      const auto m = hn::FirstN(d, static_cast<size_t>(n));
      for (int64_t l = 0; l < kLanes; ++l)
        r[l] = l < channels ? LoadRange(d, src + l * plane + x0, m, 0, n) : hn::Zero(d);
    }
    TransposeSquare(r);
    if (n == kLanes) {
#pragma GCC unroll 16
      for (int64_t p = 0; p < kLanes; ++p) {
        hn::StoreU(r[p], d, dst + i * dst_row + x * kLanes);
        if (++x == cols) x = 0, ++i;
      }
      continue;
    }
    for (int64_t p = 0; p < n; ++p) {
      hn::StoreU(r[p], d, dst + i * dst_row + x * kLanes);
      if (++x == cols) x = 0, ++i;
    }
  }
#else
  for (int64_t at = 0; at < count; ++at)
    for (int64_t l = 0; l < lanes; ++l)
      dst[(at / cols) * dst_row + (at % cols) * lanes + l] = l < channels ? src[l * plane + at] : 0.0f;
#endif
  (void)lanes;
}

// See FromChannels.
void FromChannelsRow(const float* HWY_RESTRICT src, int64_t count, int64_t channels, float* HWY_RESTRICT dst,
                     int64_t plane) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
#ifdef CONVTUNE_HAVE_TRANSPOSE
  constexpr int64_t kLanes = static_cast<int64_t>(hn::MaxLanes(D()));
  for (int64_t x0 = 0; x0 < count; x0 += kLanes) {
    const int64_t n = std::min(kLanes, count - x0);
    V r[kLanes];
    if (n == kLanes) {
#pragma GCC unroll 16
      for (int64_t x = 0; x < kLanes; ++x) r[x] = hn::LoadU(d, src + (x0 + x) * kLanes);
    } else {
      for (int64_t x = 0; x < kLanes; ++x) r[x] = x < n ? hn::LoadU(d, src + (x0 + x) * kLanes) : hn::Zero(d);
    }
    TransposeSquare(r);
    if (n == kLanes && channels == kLanes) {
#pragma GCC unroll 16
      for (int64_t l = 0; l < kLanes; ++l) hn::StoreU(r[l], d, dst + l * plane + x0);
    } else if (n == kLanes) {
      for (int64_t l = 0; l < channels; ++l) hn::StoreU(r[l], d, dst + l * plane + x0);
    } else {
      for (int64_t l = 0; l < channels; ++l) cpu::HWY_NAMESPACE::StoreFirst(r[l], d, static_cast<size_t>(n),
                                                                    dst + l * plane + x0);
    }
  }
#else
  for (int64_t x = 0; x < count; ++x)
    for (int64_t l = 0; l < channels; ++l) dst[l * plane + x] = src[x * lanes + l];
#endif
  (void)lanes;
}

void FillTable(RowKernels& k) {
  k.lanes = static_cast<int>(hn::Lanes(D()));
  k.plane_sum[0] = &PlaneSumRows<1>, k.plane_sum[1] = &PlaneSumRows<2>, k.plane_sum[2] = &PlaneSumRows<4>;
  k.plane_dot = &PlaneDotRows;
  k.deinterleave2 = &Deinterleave2;
  k.plane_direct[0] = &PlaneDirectR<3>, k.plane_direct[1] = &PlaneDirectR<5>;
  k.plane_dot_direct[0] = &PlaneDotDirectR<3>, k.plane_dot_direct[1] = &PlaneDotDirectR<5>;
  k.channel_sum = &ChannelSumRow;
  k.channel_dot = &ChannelDotRows;
  k.to_channels = &ToChannelsPlane;
  k.from_channels = &FromChannelsRow;
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu_depthwise
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <fmt/format.h>

#include <mutex>

#include "convtune/error.h"

namespace convtune::cpu_depthwise {

const RowKernels& row_kernels(cpu::Isa isa) {
  static RowKernels tables[3];
  static std::once_flag once[3];
  const int index = static_cast<int>(isa);
  std::call_once(once[index], [&] {
    switch (isa) {
#if HWY_TARGETS & HWY_AVX3
      case cpu::Isa::Avx512: N_AVX3::FillTable(tables[index]); return;
#endif
#if HWY_TARGETS & HWY_AVX2
      case cpu::Isa::Avx2: N_AVX2::FillTable(tables[index]); return;
#endif
#if HWY_TARGETS & HWY_SCALAR
      case cpu::Isa::Scalar: N_SCALAR::FillTable(tables[index]); return;
#elif HWY_TARGETS & HWY_EMU128
      case cpu::Isa::Scalar: N_EMU128::FillTable(tables[index]); return;
#endif
      default: break;
    }
    throw Unsupported(fmt::format("this binary has no {} kernels (Highway target not compiled)", cpu::to_string(isa)));
  });
  return tables[index];
}

}  // namespace convtune::cpu_depthwise
#endif  // HWY_ONCE
