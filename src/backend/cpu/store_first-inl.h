// StoreFirst: a vector's first lanes stored for the CPU backend's Highway kernels, without AVX2's masked store.
// Included once per Highway target by files that foreach_target re-includes (Highway's "-inl.h" convention: the
// guard toggles with HWY_TARGET_TOGGLE), after <hwy/highway.h>.
#if defined(CONVTUNE_STORE_FIRST_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONVTUNE_STORE_FIRST_INL_H_
#undef CONVTUNE_STORE_FIRST_INL_H_
#else
#define CONVTUNE_STORE_FIRST_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace convtune::cpu {
namespace HWY_NAMESPACE {

// Stores lanes [0, count) of x at out (count at least 1). A whole vector is one plain store. A partial one is one
// masked store except on AVX2, where vmaskmovps is microcoded on AMD: there the lanes go in pieces of 4, 2 and 1
// floats from a stack copy. cpu_blocked's pixel vectors (the last vector of each row of 28) with that masked
// store: fmnist1's forward 2.9-3.8 ms against 2.2-2.5 in pieces (two threads, alternated, AMD EPYC Zen 3).
template <class D>
HWY_INLINE void StoreFirst(hwy::HWY_NAMESPACE::Vec<D> x, D d, size_t count, float* HWY_RESTRICT out) {
  namespace hn = hwy::HWY_NAMESPACE;
  if (count >= hn::Lanes(d)) {
    hn::StoreU(x, d, out);
    return;
  }
#if HWY_TARGET == HWY_AVX2
  HWY_ALIGN float staged[hn::MaxLanes(D())];
  hn::Store(x, d, staged);
  size_t i = 0;
  if (count - i >= 4) std::memcpy(out + i, staged + i, 4 * sizeof(float)), i += 4;
  if (count - i >= 2) std::memcpy(out + i, staged + i, 2 * sizeof(float)), i += 2;
  if (count - i >= 1) out[i] = staged[i];
#else
  hn::BlendedStore(x, hn::FirstN(d, count), d, out);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace convtune::cpu
HWY_AFTER_NAMESPACE();

#endif  // CONVTUNE_STORE_FIRST_INL_H_
