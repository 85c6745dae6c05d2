// Shared by the depthwise kernels (groups == C, K = C * MULTIPLIER): the problem shape and helpers of
// direct_tiled_common.h, and the channel multiplier, so each kernel file also compiles alone.
#ifndef DEPTHWISE_COMMON_H
#define DEPTHWISE_COMMON_H

#include "direct_tiled/direct_tiled_common.h"

// Output channels per input channel: output channel k reads input channel k / MULTIPLIER only.
#define MULTIPLIER K_PER_GROUP
#define FILTER_SIZE (R * S)

#endif  // DEPTHWISE_COMMON_H
