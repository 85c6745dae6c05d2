// Element types of the portable (OpenCL and CUDA) kernels that store FP32, BF16 or FP16 and compute in FP32: ELEM
// selects the type (0 FP32, 1 BF16, 2 FP16); widening is exact, narrowing rounds to nearest, ties to even, as the
// host does (src/core/rounding.cpp), NaN staying NaN. Include after common/compat.h.
#ifndef CONVTUNE_ELEMENTS_H
#define CONVTUNE_ELEMENTS_H

#ifdef __OPENCL_VERSION__
#define CT_AS_FLOAT(u) as_float(u)
#define CT_AS_UINT(f) as_uint(f)
#define CT_LOAD4(p) vload4(0, (const GLOBAL unsigned int*)(p))
#define CT_STORE4(v, p) vstore4((v), 0, (GLOBAL unsigned int*)(p))
typedef uint4 ct_u4;
#else
#define CT_AS_FLOAT(u) __uint_as_float(u)
#define CT_AS_UINT(f) __float_as_uint(f)
#define CT_LOAD4(p) (*(const uint4*)(p))
#define CT_STORE4(v, p) (*(uint4*)(p) = (v))
typedef uint4 ct_u4;
#endif

#if ELEM == 0
typedef float ct_elem;
#else
typedef unsigned short ct_elem;
#endif

DEVICE_FN float ct_to_float(ct_elem e) {
#if ELEM == 0
  return e;
#elif ELEM == 1
  return CT_AS_FLOAT((unsigned int)e << 16);
#else
  const unsigned int sign = (unsigned int)(e & 0x8000u) << 16, exponent = (e >> 10) & 0x1Fu, mantissa = e & 0x3FFu;
  if (exponent == 0x1Fu) return CT_AS_FLOAT(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0u) {
    const float magnitude = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return CT_AS_FLOAT(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}

DEVICE_FN unsigned int ct_round_bits(unsigned int u, int dropped) {
  const unsigned int below_half = (1u << (dropped - 1)) - 1u, lsb = (u >> dropped) & 1u;
  return (u + below_half + lsb) & ~((1u << dropped) - 1u);
}

DEVICE_FN ct_elem ct_from_float(float x) {
#if ELEM == 0
  return x;
#elif ELEM == 1
  const unsigned int u = CT_AS_UINT(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (ct_elem)((u >> 16) | 0x40u);  // NaN stays NaN
  return (ct_elem)(ct_round_bits(u, 16) >> 16);
#else
  const unsigned int u = CT_AS_UINT(x), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (ct_elem)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return (ct_elem)(sign | 0x7C00u);
  if (a >= 0x38800000u) return (ct_elem)(sign | (ct_round_bits(a - 0x38000000u, 13) >> 13));
  if (a <= 0x33000000u) return (ct_elem)sign;
  const unsigned int exponent = a >> 23, mantissa = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = (int)(126u - exponent);
  unsigned int q = mantissa >> shift;
  const unsigned int rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
  return (ct_elem)(sign | q);
#endif
}

#ifdef VEC
// VEC consecutive elements at p, widened into v[] (and back, rounded): one 16-byte access where VEC fills 16 bytes
// (4 FP32 or 8 16-bit elements; p then 16-byte aligned), else VEC scalar ones. Kernels that move whole vectors define
// VEC before including this header.
DEVICE_FN void ct_load_vec(const GLOBAL ct_elem* p, float* v) {
#if VEC * (ELEM == 0 ? 4 : 2) == 16
  const ct_u4 u = CT_LOAD4(p);
  const unsigned int words[4] = {u.x, u.y, u.z, u.w};
#if ELEM == 0
  PRAGMA_UNROLL for (int i = 0; i < 4; ++i) v[i] = CT_AS_FLOAT(words[i]);
#else
  PRAGMA_UNROLL for (int i = 0; i < 4; ++i) {
    v[2 * i] = ct_to_float((ct_elem)(words[i] & 0xFFFFu));
    v[2 * i + 1] = ct_to_float((ct_elem)(words[i] >> 16));
  }
#endif
#else
  PRAGMA_UNROLL for (int i = 0; i < VEC; ++i) v[i] = ct_to_float(p[i]);
#endif
}

DEVICE_FN void ct_store_vec(GLOBAL ct_elem* p, const float* v) {
#if VEC * (ELEM == 0 ? 4 : 2) == 16
  unsigned int words[4];
#if ELEM == 0
  PRAGMA_UNROLL for (int i = 0; i < 4; ++i) words[i] = CT_AS_UINT(v[i]);
#else
  PRAGMA_UNROLL for (int i = 0; i < 4; ++i)
    words[i] = (unsigned int)ct_from_float(v[2 * i]) | ((unsigned int)ct_from_float(v[2 * i + 1]) << 16);
#endif
  ct_u4 u;
  u.x = words[0], u.y = words[1], u.z = words[2], u.w = words[3];
  CT_STORE4(u, p);
#else
  PRAGMA_UNROLL for (int i = 0; i < VEC; ++i) p[i] = ct_from_float(v[i]);
#endif
}
#endif  // VEC

#endif  // CONVTUNE_ELEMENTS_H
