// The Highway targets the CPU backend's SIMD code compiles: AVX-512, AVX2 and scalar (SSE4/SSSE3 left out to
// keep the build short; a CPU without AVX2 runs the scalar kernels). Include before any Highway header.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
