// The fused work a forward convolution's plan may do after the convolution (PlanRequest::epilogue). User API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace convtune {

// Fused work after a forward convolution, in this order on each output element: + bias[k], + the residual's
// element (a tensor of y's shape, layout and type: a ResNet block's shortcut), ReLU (clamped at relu_max when that
// is positive: ReLU6), and pool 2, a 2x2 max-pool with stride 2 after ReLU, so the pre-pool tensor never reaches
// global memory (seed 000's layer). Arithmetic in FP32, y rounded once at the end.
struct Epilogue {
  bool bias = false;
  bool relu = false;
  int pool = 1;  // 1: none, 2: 2x2 max-pool
  bool residual = false;
  float relu_max = 0;  // > 0 (with relu): the ReLU's upper clamp
  bool any() const { return bias || relu || pool > 1 || residual; }
  friend bool operator==(const Epilogue& a, const Epilogue& b) {
    return a.bias == b.bias && a.relu == b.relu && a.pool == b.pool && a.residual == b.residual &&
           a.relu_max == b.relu_max;
  }
  friend bool operator!=(const Epilogue& a, const Epilogue& b) { return !(a == b); }
};
// "none", or the parts joined by '+': "bias+residual+relu", "relu6" (relu_max 6), "relu-max=2.5", "maxpool2".
std::string to_string(const Epilogue& e);
// The same text back; throws InvalidArgument naming the part it does not know.
Epilogue parse_epilogue(std::string_view text);

// Where the epilogue's tensors stand among a plan's operands, after the problem's own (Problem::operand order):
// Operands in convtune/plan.h holds them there.
inline constexpr int kBiasOperand = 3;
inline constexpr int kResidualOperand = 4;  // the epilogue's residual, y's shape

// Shape of y after the epilogue (pooling shrinks P and Q).
int64_t pooled_extent(int64_t extent, const Epilogue& e);

}  // namespace convtune
