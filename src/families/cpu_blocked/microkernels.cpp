// The CPU module's micro-kernels, compiled once per Highway target (AVX-512, AVX2, scalar) by foreach_target:
// register-blocked broadcast and dot kernels for every block shape that fits the ISA's vector registers, strided
// gathers, and the Winograd F(4x4, 3x3) tile transforms.
#include "src/backend/cpu/hwy_targets.h"
// Highway re-includes this file once per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/families/cpu_blocked/microkernels.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <algorithm>

#include "src/backend/cpu/store_first-inl.h"
#include "src/backend/cpu/transpose-inl.h"
#include "src/families/cpu_blocked/microkernels.h"

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu_blocked::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
#ifdef CONVTUNE_HAVE_TRANSPOSE
using cpu::HWY_NAMESPACE::TransposeSquare;  // src/backend/cpu/transpose-inl.h
#endif

// Keeps a loaded vector in a register. GCC otherwise folds the load into every FMA that uses it (measured on the
// dot kernel: each A or B vector loaded once per use, so a 4x3 block ran load-bound at 27% of the FMA peak).
HWY_INLINE void KeepInRegister(V& v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  asm("" : "+v"(v.raw));
#else
  (void)v;
#endif
}

// Writes x's first `valid` lanes (at least one) to out, adding out's floats first when `accumulate`: whole vectors
// with plain loads and stores, a partial one through StoreFirst (no masked store on AVX2). AVX2's masked moves are
// microcoded on AMD: a masked store per vector made StoreBlock 12% of alex2's forward on a Zen 3, 72% of its
// samples on the masked store; the masked load is cheap.
HWY_INLINE void StoreValid(V x, int64_t valid, bool accumulate, float* HWY_RESTRICT out) {
  const D d;
  const size_t count = static_cast<size_t>(std::min<int64_t>(valid, static_cast<int64_t>(hn::Lanes(d))));
  if (accumulate) {
    x = hn::Add(x, count == hn::Lanes(d) ? hn::LoadU(d, out) : hn::MaskedLoad(hn::FirstN(d, count), d, out));
  }
  cpu::HWY_NAMESPACE::StoreFirst(x, d, count, out);
}

#if HWY_TARGET <= HWY_AVX3
// Even lanes [0, 2 min(count, 8)): where `count` values of a half vector land once spread to every other float.
inline __mmask16 EvenLanes(int64_t count) {
  return static_cast<__mmask16>(0x5555u & ((1u << (2 * std::clamp<int64_t>(count, 0, 8))) - 1u));
}

// out[2 i] (+)= x[i]: the low and high halves of x spread to the even lanes of two vectors (expand), stored under
// the masks of EvenLanes; the odd floats between are left alone.
inline void StoreEveryOther(__m512 x, __mmask16 m_lo, __mmask16 m_hi, bool accumulate, float* out) {
  __m512 lo = _mm512_maskz_expand_ps(0x5555, x);
  __m512 hi = _mm512_maskz_expand_ps(0x5555, _mm512_shuffle_f32x4(x, x, 0xEE));
  if (accumulate) {
    lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(m_lo, out));
    hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(m_hi, out + 16));
  }
  _mm512_mask_storeu_ps(out, m_lo, lo);
  if (m_hi) _mm512_mask_storeu_ps(out + 16, m_hi, hi);
}
#endif

// Writes a finished block from `tile` (the accumulators stored as tile[(v * nj + j) * lanes + lane]): whole vectors
// where lanes are adjacent in memory, else transposed (channel-blocked accumulators written to channel-major
// tensors), leaving out lanes beyond `valid`. Not inlined: one copy serves every block shape, which keeps the
// kernels' code (and the build) small; it runs once per block, after the whole reduction.
HWY_NOINLINE void StoreBlock(const float* HWY_RESTRICT tile, int nv, int nj, const BcastArgs& p) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  // Channel vectors written to channel-major rows of adjacent pixels. AVX2: four pixels at a time, the 4 x 4 blocks of
  // four tile rows (pixels) transposed in registers by 32- and 64-bit interleaves, which leave 128-bit block b of
  // u[k] holding channel 4 b + k at those four pixels, each stored as one 128-bit run (a gather and a masked store
  // per channel ran StoreBlock at 12% of alex2's forward on a Zen 3, where both are microcoded).
#if HWY_TARGET <= HWY_AVX3
  // AVX-512: up to 16 pixels' channel vectors transposed in registers (TransposeSquare), then one masked store of
  // each channel's pixels. A gather per channel (16 loads each) before made StoreBlock 40% of a 3-channel stem's
  // forward (3x3 stride 2, 32 output channels: 27 reduction steps a block; one thread, 512x512, Intel Xeon); a
  // scalar store per element before that was 4.5% of alex3's forward.
  // Pixels every other float apart (backward-data's stride-2 phases: o_j 2) are spread to the even lanes of two
  // vectors (expand) and stored masked, two stores a channel where a scatter of each pixel's channels took most of
  // a 16-channel-group stride-2 backward-data's time (the reduction of a block there is only 16 x 2.25 taps long).
  if (p.o_lane != 1 && (p.o_j == 1 || p.o_j == 2) && nj >= 4) {
    constexpr int64_t kLanes = static_cast<int64_t>(hn::MaxLanes(D()));
    for (int v = 0; v < nv; ++v) {
      const int64_t valid = std::min<int64_t>(p.valid - v * lanes, lanes);
      if (valid <= 0) return;
      const float* rows = tile + v * nj * lanes;
      float* out = p.out + v * p.o_v;
      for (int64_t j0 = 0; j0 < nj; j0 += kLanes) {
        const int64_t n = std::min<int64_t>(kLanes, nj - j0);
        V r[kLanes];
        for (int64_t j = 0; j < kLanes; ++j) r[j] = j < n ? hn::Load(d, rows + (j0 + j) * lanes) : hn::Zero(d);
        TransposeSquare(r);
        const auto m = hn::FirstN(d, static_cast<size_t>(n));
        if (p.o_j == 2) {
          const __mmask16 m_lo = EvenLanes(n), m_hi = EvenLanes(n - 8);
#pragma GCC unroll 16
          for (int64_t l = 0; l < kLanes; ++l) {
            if (l >= valid) break;
            StoreEveryOther(r[l].raw, m_lo, m_hi, p.accumulate, out + l * p.o_lane + j0 * 2);
          }
          continue;
        }
        // Unrolled, so that r[l] is a register (a runtime index compiled to a chain of compares).
#pragma GCC unroll 16
        for (int64_t l = 0; l < kLanes; ++l) {
          if (l >= valid) break;
          float* o = out + l * p.o_lane + j0;
          V x = r[l];
          if (p.accumulate) x = hn::Add(x, hn::MaskedLoad(m, d, o));
          hn::BlendedStore(x, m, d, o);
        }
      }
    }
    return;
  }
  // Pixel vectors whose lanes lie o_lane apart (backward-data's stride phases: every other column): one scatter
  // per vector instead of a scalar store per lane (a 16-channel-group stride-2 backward-data spent a quarter of its
  // time storing lane by lane).
  if (p.o_lane == 2) {
    // Every other float (stride 2): the two halves spread to even lanes and stored masked, as above.
    for (int v = 0; v < nv; ++v) {
      const int64_t valid = std::min<int64_t>(p.valid - v * lanes, lanes);
      if (valid <= 0) return;
      const __mmask16 m_lo = EvenLanes(valid), m_hi = EvenLanes(valid - 8);
      for (int j = 0; j < nj; ++j) {
        float* out = p.out + v * p.o_v + j * p.o_j;
        const __m512 x = _mm512_load_ps(tile + (v * nj + j) * lanes);
        StoreEveryOther(x, m_lo, m_hi, p.accumulate, out);
      }
    }
    return;
  }
  if (p.o_lane > 1 && p.o_lane * lanes < (int64_t{1} << 31)) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int32_t>(p.o_lane)));
    for (int v = 0; v < nv; ++v) {
      const int64_t valid = std::min<int64_t>(p.valid - v * lanes, lanes);
      if (valid <= 0) return;
      const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << valid) - 1);
      for (int j = 0; j < nj; ++j) {
        float* out = p.out + v * p.o_v + j * p.o_j;
        __m512 x = _mm512_load_ps(tile + (v * nj + j) * lanes);
        if (p.accumulate) x = _mm512_add_ps(x, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, out, 4));
        _mm512_mask_i32scatter_ps(out, m, idx, x, 4);
      }
    }
    return;
  }
#elif HWY_TARGET != HWY_SCALAR  // (no 128-bit blocks there)
  if (p.o_lane != 1 && p.o_j == 1 && lanes >= 4) {
    const hn::Full128<float> d4;
    const hn::Repartition<double, D> dd;
    HWY_ALIGN float u[4][hn::MaxLanes(d)];
    for (int v = 0; v < nv; ++v) {
      const int64_t valid = std::min<int64_t>(p.valid - v * lanes, lanes);
      if (valid <= 0) return;
      const float* rows = tile + v * nj * lanes;
      float* out = p.out + v * p.o_v;
      int j0 = 0;
      for (; j0 + 4 <= nj; j0 += 4) {
        const V r0 = hn::Load(d, rows + j0 * lanes), r1 = hn::Load(d, rows + (j0 + 1) * lanes);
        const V r2 = hn::Load(d, rows + (j0 + 2) * lanes), r3 = hn::Load(d, rows + (j0 + 3) * lanes);
        const auto t0 = hn::BitCast(dd, hn::InterleaveLower(d, r0, r1));
        const auto t1 = hn::BitCast(dd, hn::InterleaveLower(d, r2, r3));
        const auto t2 = hn::BitCast(dd, hn::InterleaveUpper(d, r0, r1));
        const auto t3 = hn::BitCast(dd, hn::InterleaveUpper(d, r2, r3));
        hn::Store(hn::BitCast(d, hn::InterleaveLower(dd, t0, t1)), d, u[0]);
        hn::Store(hn::BitCast(d, hn::InterleaveUpper(dd, t0, t1)), d, u[1]);
        hn::Store(hn::BitCast(d, hn::InterleaveLower(dd, t2, t3)), d, u[2]);
        hn::Store(hn::BitCast(d, hn::InterleaveUpper(dd, t2, t3)), d, u[3]);
        for (int64_t l = 0; l < valid; ++l) {
          float* o = out + l * p.o_lane + j0;
          auto x = hn::Load(d4, &u[l % 4][(l / 4) * 4]);
          if (p.accumulate) x = hn::Add(x, hn::LoadU(d4, o));
          hn::StoreU(x, d4, o);
        }
      }
      for (; j0 < nj; ++j0) {
        for (int64_t l = 0; l < valid; ++l) {
          float& o = out[l * p.o_lane + j0];
          o = p.accumulate ? o + rows[j0 * lanes + l] : rows[j0 * lanes + l];
        }
      }
    }
    return;
  }
#endif
  for (int v = 0; v < nv; ++v) {
    const int64_t valid = std::min<int64_t>(p.valid - v * lanes, lanes);
    if (valid <= 0) return;
    for (int j = 0; j < nj; ++j) {
      const float* t = tile + (v * nj + j) * lanes;
      float* out = p.out + v * p.o_v + j * p.o_j;
      if (p.o_lane == 1) {
        StoreValid(hn::LoadU(d, t), valid, p.accumulate, out);
      } else if (p.accumulate) {
        for (int64_t l = 0; l < valid; ++l) out[l * p.o_lane] += t[l];
      } else {
        for (int64_t l = 0; l < valid; ++l) out[l * p.o_lane] = t[l];
      }
    }
  }
}

// Address of broadcast column j (a compile-time constant after unrolling) from `b`, columns `s1` bytes apart.
// With a runtime stride, GCC kept one precomputed offset per column and spilled them (2x14 blocks ran at 60% with
// extra loads per step); instead columns come in groups of 8 from one base, offsets {0, 1, 2, 3, 4, 5, 6, 7} x s1
// formed by x86's scaled-index addressing from three registers (s1, 3 s1, 5 s1, 7 s1) at no extra instruction.
HWY_INLINE const float* Column(const char* b, int j, int64_t s1, int64_t s3, int64_t s5, int64_t s7) {
  const char* g = b + (j / 8) * 8 * s1;
  switch (j % 8) {
    case 0: return reinterpret_cast<const float*>(g);
    case 1: return reinterpret_cast<const float*>(g + s1);
    case 2: return reinterpret_cast<const float*>(g + 2 * s1);
    case 3: return reinterpret_cast<const float*>(g + s3);
    case 4: return reinterpret_cast<const float*>(g + 4 * s1);
    case 5: return reinterpret_cast<const float*>(g + s5);
    case 6: return reinterpret_cast<const float*>(g + 2 * s3);
    default: return reinterpret_cast<const float*>(g + s7);
  }
}

// The reduction of the broadcast kernel. kB: the column stride b_j when known at compile time (1: adjacent pixels
// or packed channels; the vector width: channel-blocked pixels), so broadcasts address constant offsets; 0: a
// runtime stride.
// One reduction step: NV vectors of A times NJ broadcasts of B into acc.
template <int NV, int NJ, int kB>
HWY_INLINE void BcastStep(const float* a, const float* b, int64_t s1, int64_t s3, int64_t s5, int64_t s7,
                          V (&acc)[NV][NJ]) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V av[NV];
#pragma GCC unroll 32
  for (int v = 0; v < NV; ++v) av[v] = hn::LoadU(d, a + v * lanes);
#pragma GCC unroll 32
  for (int j = 0; j < NJ; ++j) {
    const float* column = kB > 0 ? b + j * kB : Column(reinterpret_cast<const char*>(b), j, s1, s3, s5, s7);
    const V bv = hn::Set(d, *column);
#pragma GCC unroll 32
    for (int v = 0; v < NV; ++v) acc[v][j] = hn::MulAdd(av[v], bv, acc[v][j]);
  }
}

template <int NV, int NJ, int kB, bool kPrefetch = false>
HWY_INLINE void BcastReduce(const BcastArgs& p, V (&acc)[NV][NJ]) {
  const D d;
  // Blocks of 6 accumulators or fewer alternate steps between two sets, added at the end: with one set each
  // accumulator's chain of multiply-adds (4 cycles each, 2 a cycle) left the FMA units a quarter idle or more. The
  // 2 x 3 block of backward-filter's vectors over 32 output channels (stems of 3 input channels, 3x3 stride 2):
  // one thread, a 512x512 image, 1.95 -> 1.6 ms.
  constexpr bool kSplit = NV * NJ <= 6 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128;
  V acc2[kSplit ? NV : 1][kSplit ? NJ : 1];
  if constexpr (kSplit) {
#pragma GCC unroll 32
    for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 32
      for (int j = 0; j < NJ; ++j) acc2[v][j] = hn::Zero(d);
    }
  }
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t s1 = static_cast<int64_t>(sizeof(float)) * (kB > 0 ? kB : p.b_j);
  const int64_t s3 = 3 * s1, s5 = 5 * s1, s7 = 7 * s1;
  const float* a0 = p.a;
  const float* b0 = p.b;
  // The prefetch address runs on by prefetch_step every reduction step, across all three levels.
  const float* ahead = p.prefetch;
  // A read as one contiguous stream (its NV vectors a step, step after step: packed weights, Winograd's U and Z
  // panels) is prefetched into L1 kAheadA floats (12 lines) ahead, a line at a time: the hardware's own L1
  // prefetch falls behind where A comes from L2 (weight slabs of a few hundred KB, U panels beyond L1). Two
  // threads, alternated in one process: alex2 forward and backward-data 6-8% faster, fmnist2 6-8%, ucla5x5 7%,
  // Winograd 0-5%; 64 and 128 floats ahead measured alike, a stand-alone loop with A in L1 level.
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  constexpr bool kPrefetchA = true;
#else
  constexpr bool kPrefetchA = false;
#endif
  constexpr int64_t kAheadA = 192;
  const bool stream_a = p.a2 == NV * lanes;
  // A read a vector run per step from places at least a line apart (pixel vectors of a 1x1 filter: one channel
  // plane per step, 784-3136 floats apart) misses L1 at every step, and the hardware's stride prefetcher does
  // not follow strides above 2 KB: those runs are prefetched kStepsAhead steps ahead. MobileNetV2's 144 -> 32
  // projection (28x28 planes, 16 images) stalled on those loads for half its time: one thread, alternated in one
  // process, 1.17-1.52 -> 0.88-1.15 ms (oneDNN 0.74-0.99); no change where the stride stays under a line.
  constexpr int64_t kStepsAhead = 6;
  const bool strided_a = !stream_a && (p.a2 >= 16 || p.a2 <= -16);
  const int64_t ahead_a = kStepsAhead * p.a2;
  const int64_t last_ahead = p.n2 - kStepsAhead;  // no prefetch past the level's last step
  for (int64_t i0 = 0; i0 < p.n0; ++i0, a0 += p.a0, b0 += p.b0) {
    const float* a1 = a0;
    const float* b1 = b0;
    for (int64_t i1 = 0; i1 < p.n1; ++i1, a1 += p.a1, b1 += p.b1) {
      const float* a = a1;
      const float* b = b1;
      for (int64_t i2 = 0; i2 < p.n2; ++i2, a += p.a2, b += p.b2) {
        if (kPrefetchA && stream_a) {
#pragma GCC unroll 8
          for (int64_t i = 0; i < NV * lanes; i += 16) __builtin_prefetch(a + kAheadA + i, 0, 3);
        } else if (kPrefetchA && strided_a && i2 < last_ahead) {
#pragma GCC unroll 8
          for (int64_t i = 0; i < NV * lanes; i += 16) __builtin_prefetch(a + ahead_a + i, 0, 3);
        }
        if constexpr (kPrefetch) {
          __builtin_prefetch(ahead, 0, 2);
          ahead += p.prefetch_step;
        }
        if constexpr (kSplit) {
          // Odd steps into the second set.
          if (i2 & 1) {
            BcastStep<NV, NJ, kB>(a, b, s1, s3, s5, s7, acc2);
            continue;
          }
        }
        BcastStep<NV, NJ, kB>(a, b, s1, s3, s5, s7, acc);
      }
    }
  }
  if constexpr (kSplit) {
#pragma GCC unroll 32
    for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 32
      for (int j = 0; j < NJ; ++j) acc[v][j] = hn::Add(acc[v][j], acc2[v][j]);
    }
  }
}

// acc[v][j] += A[v] * broadcast(B[j]) over three reduction levels; see BcastArgs. Column strides of 1 and of the
// vector width (the common cases: adjacent pixels or packed channels, channel-blocked pixels) get their own copy of
// the loop with constant offsets, and so do stride 2's (planar and channel-blocked pixels two apart): with a
// runtime stride each broadcast took an address add besides its multiply-add (a 1x1 stride-2 layer, 256 -> 512
// channels at 28x28, forward on channel-blocked input: 69% of its time in the 2 x 14 block, at 3/4 of the rate of
// the same block at stride 1).
template <int NV, int NJ>
void Bcast(const BcastArgs& p) {
  const D d;
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(D()));
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[NV][NJ];
#pragma GCC unroll 32
  for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 32
    for (int j = 0; j < NJ; ++j) acc[v][j] = hn::Zero(d);
  }
  if (p.b_j == 1 && p.prefetch != nullptr) {
    BcastReduce<NV, NJ, 1, true>(p, acc);
  } else if (p.b_j == 1) {
    BcastReduce<NV, NJ, 1>(p, acc);
  } else if (kLanes > 1 && p.b_j == kLanes && p.prefetch != nullptr) {
    BcastReduce<NV, NJ, kLanes, true>(p, acc);
  } else if (kLanes > 1 && p.b_j == kLanes) {
    BcastReduce<NV, NJ, kLanes>(p, acc);
  } else if (kLanes > 1 && p.b_j == 2 * kLanes) {
    BcastReduce<NV, NJ, 2 * kLanes>(p, acc);
  } else if (kLanes > 1 && p.b_j == 2) {
    BcastReduce<NV, NJ, 2>(p, acc);
  } else {
    BcastReduce<NV, NJ, 0>(p, acc);
  }
  if (p.o_lane == 1) {
    // Lanes adjacent in memory (pixel vectors, channel-blocked results): straight from the registers, masked past
    // `valid`. Short reductions (a 5x5 filter over one channel: 25 steps) made the round trip through a tile
    // buffer a third of the call.
    if (p.stream && !p.accumulate && p.valid == NV * lanes) {
#pragma GCC unroll 32
      for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 32
        for (int j = 0; j < NJ; ++j) hn::Stream(acc[v][j], d, p.out + v * p.o_v + j * p.o_j);
      }
      return;
    }
#pragma GCC unroll 32
    for (int v = 0; v < NV; ++v) {
      const int64_t valid = p.valid - v * lanes;
      if (valid <= 0) break;
#pragma GCC unroll 32
      for (int j = 0; j < NJ; ++j) StoreValid(acc[v][j], valid, p.accumulate, p.out + v * p.o_v + j * p.o_j);
    }
    return;
  }
  // AVX-512's StoreBlock gathers whole vectors down a column: a vector's worth of rows of slack.
  HWY_ALIGN float tile[(NV * NJ + (HWY_TARGET <= HWY_AVX3 ? hn::MaxLanes(d) : 0)) * hn::MaxLanes(d)];
#pragma GCC unroll 32
  for (int v = 0; v < NV; ++v) {
#pragma GCC unroll 32
    for (int j = 0; j < NJ; ++j) hn::Store(acc[v][j], d, tile + (v * NJ + j) * lanes);
  }
  StoreBlock(tile, NV, NJ, p);
}

// acc[i][j] += A_i[x] * B_j[x] along runs of `len` floats, then a horizontal sum per accumulator; see DotArgs.
template <int NI, int NJ>
void Dot(const DotArgs& p) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[NI][NJ];
#pragma GCC unroll 32
  for (int i = 0; i < NI; ++i) {
#pragma GCC unroll 32
    for (int j = 0; j < NJ; ++j) acc[i][j] = hn::Zero(d);
  }
  const float* a0 = p.a;
  const float* b0 = p.b;
  for (int64_t i0 = 0; i0 < p.n0; ++i0, a0 += p.a0, b0 += p.b0) {
    const float* a = a0;
    const float* b = b0;
    for (int64_t i1 = 0; i1 < p.n1; ++i1, a += p.a1, b += p.b1) {
      int64_t x = 0;
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
      // A head of lanes below the next vector boundary of A's row 0, loaded masked from that boundary's
      // vector (x86's masked loads do not touch the masked lanes), so the run's other loads of A are aligned
      // when the rows are a whole number of vectors apart.
      const int64_t skew = static_cast<int64_t>(reinterpret_cast<uintptr_t>(a) / sizeof(float)) % lanes;
      if (p.align && skew > 0 && p.len > 0) {
        const int64_t head = std::min(lanes - skew, p.len);
        const auto m = hn::AndNot(hn::FirstN(d, static_cast<size_t>(skew)),
                                  hn::FirstN(d, static_cast<size_t>(skew + head)));
        V bv[NJ];
#pragma GCC unroll 32
        for (int j = 0; j < NJ; ++j) bv[j] = hn::MaskedLoad(m, d, b + j * p.b_j - skew);
#pragma GCC unroll 32
        for (int i = 0; i < NI; ++i) {
          const V av = hn::MaskedLoad(m, d, a + i * p.a_i - skew);
#pragma GCC unroll 32
          for (int j = 0; j < NJ; ++j) acc[i][j] = hn::MulAdd(av, bv[j], acc[i][j]);
        }
        x = head;
      }
#endif
      const int64_t full = x + (p.len - x) / lanes * lanes;
      const auto tail = hn::FirstN(d, static_cast<size_t>(p.len - full));
      for (; x < full; x += lanes) {
        if (p.prefetch) __builtin_prefetch(p.prefetch + x, 0, 2);
        V bv[NJ];
#pragma GCC unroll 32
        for (int j = 0; j < NJ; ++j) {
          bv[j] = hn::LoadU(d, b + j * p.b_j + x);
          KeepInRegister(bv[j]);
        }
#pragma GCC unroll 32
        for (int i = 0; i < NI; ++i) {
          V av = hn::LoadU(d, a + i * p.a_i + x);
          KeepInRegister(av);
#pragma GCC unroll 32
          for (int j = 0; j < NJ; ++j) acc[i][j] = hn::MulAdd(av, bv[j], acc[i][j]);
        }
      }
      if (x < p.len) {
        // Both operands masked: lanes past the run read as zero, whatever memory holds there.
        V bv[NJ];
#pragma GCC unroll 32
        for (int j = 0; j < NJ; ++j) bv[j] = hn::MaskedLoad(tail, d, b + j * p.b_j + x);
#pragma GCC unroll 32
        for (int i = 0; i < NI; ++i) {
          const V av = hn::MaskedLoad(tail, d, a + i * p.a_i + x);
#pragma GCC unroll 32
          for (int j = 0; j < NJ; ++j) acc[i][j] = hn::MulAdd(av, bv[j], acc[i][j]);
        }
      }
    }
  }
  if (p.vectors) {
#pragma GCC unroll 32
    for (int i = 0; i < NI; ++i) {
#pragma GCC unroll 32
      for (int j = 0; j < NJ; ++j) {
        float* out = p.out + i * p.o_i + j * p.o_j;
        hn::StoreU(p.accumulate ? hn::Add(acc[i][j], hn::LoadU(d, out)) : acc[i][j], d, out);
      }
    }
    return;
  }
#pragma GCC unroll 32
  for (int i = 0; i < NI; ++i) {
#pragma GCC unroll 32
    for (int j = 0; j < NJ; ++j) {
      const float sum = hn::GetLane(hn::SumOfLanes(d, acc[i][j]));
      float* out = p.out + i * p.o_i + j * p.o_j;
      *out = p.accumulate ? *out + sum : sum;
    }
  }
}

// Winograd F(4x4, 3x3) tile transforms, a vector of channels at a time.
// The points 0, 1, -1, 2, -2 and infinity (Lavin and Gray's F(4, 3)).
// B^T x: 6 -> 6 (input tiles).
HWY_INLINE void InputTransform(D d, const V* x, V* y) {
  const V c4 = hn::Set(d, 4.0f), c5 = hn::Set(d, 5.0f), c2 = hn::Set(d, 2.0f);
  y[0] = hn::Add(hn::NegMulAdd(c5, x[2], hn::Mul(c4, x[0])), x[4]);
  const V a = hn::Sub(x[4], hn::Mul(c4, x[2]));  // x4 - 4 x2
  const V b = hn::Sub(x[3], hn::Mul(c4, x[1]));  // x3 - 4 x1
  y[1] = hn::Add(a, b);
  y[2] = hn::Sub(a, b);
  const V e = hn::Sub(x[4], x[2]);               // x4 - x2
  const V f = hn::Mul(c2, hn::Sub(x[3], x[1]));  // 2 (x3 - x1)
  y[3] = hn::Add(e, f);
  y[4] = hn::Sub(e, f);
  y[5] = hn::Add(hn::NegMulAdd(c5, x[3], hn::Mul(c4, x[1])), x[5]);
}

// A^T m: 6 -> 4 (output tiles).
HWY_INLINE void OutputTransform(D d, const V* m, V* o) {
  const V c2 = hn::Set(d, 2.0f), c4 = hn::Set(d, 4.0f), c8 = hn::Set(d, 8.0f);
  const V s12 = hn::Add(m[1], m[2]), d12 = hn::Sub(m[1], m[2]);
  const V s34 = hn::Add(m[3], m[4]), d34 = hn::Sub(m[3], m[4]);
  o[0] = hn::Add(hn::Add(m[0], s12), s34);
  o[1] = hn::MulAdd(c2, d34, d12);
  o[2] = hn::MulAdd(c4, s34, s12);
  o[3] = hn::Add(hn::MulAdd(c8, d34, d12), m[5]);
}

// A v: 4 -> 6 (gradient tiles, backward-filter).
HWY_INLINE void GradientTransform(D d, const V* v, V* z) {
  const V c2 = hn::Set(d, 2.0f), c4 = hn::Set(d, 4.0f), c8 = hn::Set(d, 8.0f);
  const V s02 = hn::Add(v[0], v[2]), s13 = hn::Add(v[1], v[3]);
  z[0] = v[0];
  z[1] = hn::Add(s02, s13);
  z[2] = hn::Sub(s02, s13);
  const V e = hn::MulAdd(c4, v[2], v[0]);   // v0 + 4 v2
  const V f = hn::MulAdd(c8, v[3], hn::Mul(c2, v[1]));  // 2 v1 + 8 v3
  z[3] = hn::Add(e, f);
  z[4] = hn::Sub(e, f);
  z[5] = v[3];
}

// G^T m: 6 -> 3 (filter gradients, backward-filter).
HWY_INLINE void FilterTransform(D d, const V* m, V* r) {
  const V q = hn::Set(d, 0.25f), s = hn::Set(d, 1.0f / 6.0f), t = hn::Set(d, 1.0f / 12.0f),
          u = hn::Set(d, 1.0f / 24.0f);
  const V s12 = hn::Add(m[1], m[2]), d12 = hn::Sub(m[2], m[1]);
  const V s34 = hn::Add(m[3], m[4]), d34 = hn::Sub(m[3], m[4]);
  r[0] = hn::MulAdd(u, s34, hn::NegMulAdd(s, s12, hn::Mul(q, m[0])));
  r[1] = hn::MulAdd(t, d34, hn::Mul(s, d12));
  r[2] = hn::Add(hn::Mul(s, hn::Sub(s34, s12)), m[5]);
}

// G g: 3 -> 6 (filters).
HWY_INLINE void WeightTransform(D d, const V* g, V* u) {
  const V q = hn::Set(d, 0.25f), s = hn::Set(d, 1.0f / 6.0f), t = hn::Set(d, 1.0f / 12.0f),
          w = hn::Set(d, 1.0f / 24.0f);
  const V s02 = hn::Add(g[0], g[2]);
  u[0] = hn::Mul(q, g[0]);
  u[1] = hn::Neg(hn::Mul(s, hn::Add(s02, g[1])));
  u[2] = hn::Mul(s, hn::Sub(g[1], s02));
  const V e = hn::MulAdd(w, g[0], hn::Mul(s, g[2]));  // g0 / 24 + g2 / 6
  u[3] = hn::MulAdd(t, g[1], e);
  u[4] = hn::NegMulAdd(t, g[1], e);
  u[5] = g[2];
}

// A 2-D transform of an In x In grid of vectors to Out x Out: the 1-D transform T over each row, then over each
// column of the result. load(i, j) gives input element (i, j); store(i, j, v) takes output element (i, j).
template <int In, int Out, class T, class Load, class Store>
HWY_INLINE void Transform2D(D d, T transform, Load load, Store store) {
  V t[In * Out], x[In], y[Out];
  for (int i = 0; i < In; ++i) {
    for (int j = 0; j < In; ++j) x[j] = load(i, j);
    transform(d, x, y);
    for (int j = 0; j < Out; ++j) t[i * Out + j] = y[j];
  }
  for (int j = 0; j < Out; ++j) {
    for (int i = 0; i < In; ++i) x[i] = t[i * Out + j];
    transform(d, x, y);
    for (int i = 0; i < Out; ++i) store(i, j, y[i]);
  }
}

// The WinogradFns entry points (see microkernels.h). The input and dy transforms write to a small staging buffer
// with ordinary stores; the caller streams it out (StreamRun) a few lines per destination at a time.
void WinogradWeights(const float* src, float* dst, int64_t stride) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  Transform2D<3, 6>(
      d, WeightTransform, [&](int i, int j) { return hn::LoadU(d, src + (i * 3 + j) * lanes); },
      [&](int i, int j, V v) { hn::StoreU(v, d, dst + (i * 6 + j) * stride); });
}

void WinogradInput(const float* src, int64_t row, int64_t col, float* dst, int64_t stride) {
  const D d;
  Transform2D<6, 6>(
      d, InputTransform, [&](int i, int j) { return hn::LoadU(d, src + i * row + j * col); },
      [&](int i, int j, V v) { hn::StoreU(v, d, dst + (i * 6 + j) * stride); });
}

void WinogradOutput(const float* src, int64_t stride, float* out) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  Transform2D<6, 4>(
      d, OutputTransform, [&](int i, int j) { return hn::LoadU(d, src + (i * 6 + j) * stride); },
      [&](int i, int j, V v) { hn::StoreU(v, d, out + (i * 4 + j) * lanes); });
}

void WinogradDy(const float* src, int64_t row, int64_t col, float* dst, int64_t stride) {
  const D d;
  Transform2D<4, 6>(
      d, GradientTransform, [&](int i, int j) { return hn::LoadU(d, src + i * row + j * col); },
      [&](int i, int j, V v) { hn::StoreU(v, d, dst + (i * 6 + j) * stride); });
}

void WinogradFilter(const float* src, int64_t stride, float* out) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  Transform2D<6, 3>(
      d, FilterTransform, [&](int i, int j) { return hn::LoadU(d, src + (i * 6 + j) * stride); },
      [&](int i, int j, V v) { hn::StoreU(v, d, out + (i * 3 + j) * lanes); });
}

// Runs of `left` zeros, n floats from the source and zeros to `width`, in whole vectors; see KernelTable.
void PaddedRuns(const float* HWY_RESTRICT src, int64_t src_step, const float* src_end, int64_t left, int64_t n,
                float* HWY_RESTRICT dst, int64_t dst_step, int64_t width, int64_t runs) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V zero = hn::Zero(d);
  for (int64_t k = 0; k < runs; ++k, src += src_step, dst += dst_step) {
    // Zeros, then the floats (their last vector's overshoot lands on the zeros after them, written next), then zeros.
    for (int64_t i = 0; i < left; i += lanes) hn::StoreU(zero, d, dst + i);
    float* mid = dst + left;
    int64_t i = 0;
    for (; i < n && src + i + lanes <= src_end; i += lanes) {
      // Through a register as written: GCC otherwise turns the loop into a memcpy call per run (glibc's memmove
      // took 23% of Fashion-MNIST's first layer for runs of 28 floats).
      V v = hn::LoadU(d, src + i);
      KeepInRegister(v);
      hn::StoreU(v, d, mid + i);
    }
    for (; i < n; ++i) mid[i] = src[i];  // the tensor's last floats
    for (int64_t j = left + n; j < width; j += lanes) hn::StoreU(zero, d, dst + j);
  }
}

// dst[i] = src[i] for i in [0, count) (count a whole number of vectors, dst vector-aligned), with streaming stores.
void StreamRun(const float* HWY_RESTRICT src, float* HWY_RESTRICT dst, int64_t count) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < count; i += lanes) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
}

// Column counts compiled: every count up to 8, then the widths that cover common rows (13, 14, 27 = 14 + 13,
// 28, 56 = 2 x 28...). The planner splits other widths into compiled ones.
constexpr int kColumns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 16, 20, 24, 28};

// Registers a block shape when its accumulators, the NV A vectors and one broadcast fit the register file.
template <int NV, size_t I = 0>
void AddBcast(KernelTable& t) {
  if constexpr (I < sizeof(kColumns) / sizeof(kColumns[0])) {
    constexpr int NJ = kColumns[I];
    if constexpr (NV * NJ + NV + 1 <= 32) {
      if (NV * NJ + NV + 1 <= t.registers) t.bcast[NV - 1][NJ - 1] = &Bcast<NV, NJ>;
      AddBcast<NV, I + 1>(t);
    }
  }
}

// Dot blocks keep the NJ B vectors live beside the accumulators; rows i come in these counts.
constexpr int kDotRows[] = {1, 2, 3, 4, 6, 8};

template <int NI, int NJ>
void AddDot(KernelTable& t) {
  if constexpr (NJ <= kMaxDotColumns && NI * NJ + NJ + 1 <= 32) {
    if (NI * NJ + NJ + 1 <= t.registers) t.dot[NI - 1][NJ - 1] = &Dot<NI, NJ>;
    AddDot<NI, NJ + 1>(t);
  }
}

template <size_t I = 0>
void AddDots(KernelTable& t) {
  if constexpr (I < sizeof(kDotRows) / sizeof(kDotRows[0])) {
    AddDot<kDotRows[I], 1>(t);
    AddDots<I + 1>(t);
  }
}

// dst[i] = src[i * stride]: whole vectors gathered (32-bit indices: the stride times a vector's lanes stays far
// below 2^31 for any tensor the module indexes), the rest one by one.
void Gather(const float* HWY_RESTRICT src, int64_t stride, int64_t count, float* HWY_RESTRICT dst) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (lanes > 1 && stride * lanes < (int64_t{1} << 31)) {
    const hn::RebindToSigned<D> di;
    const auto idx = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
    for (; i + lanes <= count; i += lanes) hn::StoreU(hn::GatherIndex(d, src + i * stride, idx), d, dst + i);
  }
  for (; i < count; ++i) dst[i] = src[i * stride];
}


// See InterleaveFn. With a transpose: tiles of lanes channels x lanes pixels (missing channels read as zero,
// missing pixels masked), else element by element.
void Interleave(const float* HWY_RESTRICT src, int64_t plane, int64_t channels, int64_t pixels,
                float* HWY_RESTRICT dst, int64_t block) {
#ifdef CONVTUNE_HAVE_TRANSPOSE
  const D d;
  constexpr int64_t kLanes = static_cast<int64_t>(hn::MaxLanes(D()));
  if (block % kLanes == 0) {
    for (int64_t c0 = 0; c0 < block; c0 += kLanes) {
      const int64_t rows = std::clamp<int64_t>(channels - c0, 0, kLanes);
      for (int64_t p0 = 0; p0 < pixels; p0 += kLanes) {
        const int64_t n = std::min(kLanes, pixels - p0);
        V r[kLanes];
        if (rows == 0) {
          for (int64_t p = 0; p < n; ++p) hn::StoreU(hn::Zero(d), d, dst + (p0 + p) * block + c0);
          continue;
        }
        if (rows == kLanes && n == kLanes) {
          // Whole tiles, fully unrolled so the tile stays in registers.
#pragma GCC unroll 16
          for (int64_t i = 0; i < kLanes; ++i) r[i] = hn::LoadU(d, src + (c0 + i) * plane + p0);
          TransposeSquare(r);
#pragma GCC unroll 16
          for (int64_t p = 0; p < kLanes; ++p) hn::StoreU(r[p], d, dst + (p0 + p) * block + c0);
          continue;
        }
        const auto m = hn::FirstN(d, static_cast<size_t>(n));
        for (int64_t i = 0; i < kLanes; ++i)
          r[i] = i < rows ? hn::MaskedLoad(m, d, src + (c0 + i) * plane + p0) : hn::Zero(d);
        TransposeSquare(r);
        for (int64_t p = 0; p < n; ++p) hn::StoreU(r[p], d, dst + (p0 + p) * block + c0);
      }
    }
    return;
  }
#endif
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t c = 0; c < block; ++c) dst[p * block + c] = c < channels ? src[c * plane + p] : 0.0f;
}

void FillTable(KernelTable& t) {
  t.gather = &Gather;
  t.interleave = &Interleave;
  t.stream_run = &StreamRun;
  t.padded_runs = &PaddedRuns;
  t.winograd = {&WinogradWeights, &WinogradInput, &WinogradOutput, &WinogradDy, &WinogradFilter};
  t.lanes = static_cast<int>(hn::Lanes(D()));
  AddBcast<1>(t);
  AddBcast<2>(t);
  AddBcast<3>(t);
  AddBcast<4>(t);
  AddDots(t);
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu_blocked::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <fmt/format.h>

#include <mutex>

#include "convtune/error.h"

namespace convtune::cpu_blocked::detail {

void fill_kernel_table(Isa isa, KernelTable& table) {
  table.isa = isa;
  table.registers = vector_registers(isa);
  switch (isa) {
#if HWY_TARGETS & HWY_AVX3
    case Isa::Avx512: N_AVX3::FillTable(table); return;
#endif
#if HWY_TARGETS & HWY_AVX2
    case Isa::Avx2: N_AVX2::FillTable(table); return;
#endif
#if HWY_TARGETS & HWY_SCALAR
    case Isa::Scalar: N_SCALAR::FillTable(table); return;
#elif HWY_TARGETS & HWY_EMU128
    // Newer compilers' portable fallback (4 lanes emulated in plain C++) stands in for scalar.
    case Isa::Scalar: N_EMU128::FillTable(table); return;
#endif
    default: break;
  }
  throw Unsupported(fmt::format("this binary has no {} kernels (Highway target not compiled)", to_string(isa)));
}

const KernelTable& kernel_table(Isa isa) {
  static KernelTable tables[3];
  static std::once_flag once[3];
  const int index = static_cast<int>(isa);
  std::call_once(once[index], [&] { fill_kernel_table(isa, tables[index]); });
  return tables[index];
}

}  // namespace convtune::cpu_blocked::detail
#endif  // HWY_ONCE
