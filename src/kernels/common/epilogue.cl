// The fused-epilogue pass (src/families/fused_epilogue.cpp): the parts of a forward convolution's epilogue its family
// does not fuse, applied to y in place in one elementwise pass: y = act(y + bias[channel] + residual), arithmetic in
// FP32 and one rounding. Defines: ELEM (0 FP32, 1 BF16, 2 FP16), LAYOUT_NHWC, HAS_BIAS, HAS_RESIDUAL, HAS_RELU and
// HAS_RELU_MAX with RELU_MAX (a float literal: the ReLU's clamp). Sizes are arguments, so one compiled program serves every shape of a type and epilogue.
#include "common/compat.h"

#include "common/elements.h"

#if HAS_BIAS && HAS_RESIDUAL
#define EP_ARGS GLOBAL ct_elem* RESTRICT y, GLOBAL const float* RESTRICT bias, GLOBAL const ct_elem* RESTRICT residual
#elif HAS_BIAS
#define EP_ARGS GLOBAL ct_elem* RESTRICT y, GLOBAL const float* RESTRICT bias
#elif HAS_RESIDUAL
#define EP_ARGS GLOBAL ct_elem* RESTRICT y, GLOBAL const ct_elem* RESTRICT residual
#else
#define EP_ARGS GLOBAL ct_elem* RESTRICT y
#endif

// Element i of `count` has channel (i / pixels) % channels in NCHW and i % channels in NHWC. A grid-stride loop: any
// launch size covers every element.
KERNEL void conv_epilogue(EP_ARGS, const int count, const int channels, const int pixels) {
  for (long i = GLOBAL_ID(0); i < count; i += GLOBAL_SIZE(0)) {
    float v = ct_to_float(y[i]);
#if HAS_BIAS
#if LAYOUT_NHWC
    v += bias[i % channels];
#else
    v += bias[(i / pixels) % channels];
#endif
#endif
#if HAS_RESIDUAL
    v += ct_to_float(residual[i]);
#endif
#if HAS_RELU
    v = v > 0.0f ? v : 0.0f;
#if HAS_RELU_MAX
    v = v < RELU_MAX ? v : RELU_MAX;
#endif
#endif
    y[i] = ct_from_float(v);
  }
}
