// Shared by the direct_tiled kernels: the problem shape's defaults (the host passes the real shape as -D defines,
// see problem_defines) and small helpers, so each kernel file also compiles alone.
#ifndef DIRECT_TILED_COMMON_H
#define DIRECT_TILED_COMMON_H

#include "common/compat.h"

// Defaults: a miniature of seed 000's layer (C=8 -> K=16, 20x20 input, 5x5 filter, 16x16 output).
#ifndef N
#define N 1
#endif
#ifndef C
#define C 8
#endif
#ifndef H
#define H 20
#endif
#ifndef W
#define W 20
#endif
#ifndef K
#define K 16
#endif
#ifndef R
#define R 5
#endif
#ifndef S
#define S 5
#endif
#ifndef STRIDE_H
#define STRIDE_H 1
#endif
#ifndef STRIDE_W
#define STRIDE_W 1
#endif
#ifndef PAD_H
#define PAD_H 0
#endif
#ifndef PAD_W
#define PAD_W 0
#endif
#ifndef DILATION_H
#define DILATION_H 1
#endif
#ifndef DILATION_W
#define DILATION_W 1
#endif
#ifndef P
#define P ((H + 2 * PAD_H - (R - 1) * DILATION_H - 1) / STRIDE_H + 1)
#endif
#ifndef Q
#define Q ((W + 2 * PAD_W - (S - 1) * DILATION_W - 1) / STRIDE_W + 1)
#endif
#ifndef GROUPS
#define GROUPS 1
#endif
#ifndef C_PER_GROUP
#define C_PER_GROUP (C / GROUPS)
#endif
#ifndef K_PER_GROUP
#define K_PER_GROUP (K / GROUPS)
#endif

#ifndef UNROLL
#define UNROLL 2  // 0: filter loops stay loops; 1: unroll the loop over s; 2: unroll r and s
#endif
// Unrolling is a request: a filter too large to unroll fully stays a loop, which is no reason to warn.
#if defined(__OPENCL_VERSION__) && defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
#if UNROLL >= 2
#define FILTER_ROW_UNROLL PRAGMA_UNROLL
#else
#define FILTER_ROW_UNROLL PRAGMA_NO_UNROLL
#endif
#if UNROLL >= 1
#define FILTER_COL_UNROLL PRAGMA_UNROLL
#else
#define FILTER_COL_UNROLL PRAGMA_NO_UNROLL
#endif

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define ROUND_UP(a, b) (CEIL_DIV(a, b) * (b))
// Division rounding up for a possibly negative numerator (C division truncates toward zero).
#define CEIL_DIV_SIGNED(a, b) ((a) >= 0 ? ((a) + (b) - 1) / (b) : (a) / (b))
// Largest multiple of a power of two `m` not above a (two's complement, so negative a rounds down too).
#define ALIGN_DOWN(a, m) ((a) & ~((m) - 1))
#define MIN_INT(a, b) ((a) < (b) ? (a) : (b))

#endif  // DIRECT_TILED_COMMON_H
