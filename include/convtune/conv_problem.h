// ConvProblem: one convolution (shapes, stride, padding, dilation, groups, direction, element type, math) and the
// figures derived from it (output size, FLOP and byte counts), computed in this one place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "convtune/types.h"

namespace convtune {

// Which tensor a convolution computes. Operands are always named after the forward pass:
// x (N,C,H,W), w (K,C/groups,R,S), y (N,K,P,Q); the direction says which of them is written.
enum class Direction { Forward, BackwardData, BackwardFilter };

std::string_view to_string(Direction d);
Direction parse_direction(std::string_view text);  // "fwd"/"forward", "bwd-data", "bwd-filter"

// How the three tensors lie in memory. NCHW: x (N,C,H,W), w (K,C/groups,R,S), y (N,K,P,Q), row-major. NHWC
// (channels-last, PyTorch's torch.channels_last): x as (N,H,W,C), w as (K,R,S,C/groups), y as (N,P,Q,K). The shapes
// and the operands' names stay the logical ones (N, C, H, W...) whatever the layout.
enum class Layout { NCHW, NHWC };

std::string_view to_string(Layout layout);
Layout parse_layout(std::string_view text);  // "nchw", "nhwc" (also "channels_last")

// Two-axis parameter (height, width).
struct Pair {
  int64_t h = 1;
  int64_t w = 1;
  friend bool operator==(const Pair& a, const Pair& b) { return a.h == b.h && a.w == b.w; }
  friend bool operator!=(const Pair& a, const Pair& b) { return !(a == b); }
};

struct ConvProblem {
  int64_t n = 1;  // batch
  int64_t c = 1;  // input channels
  int64_t h = 1;  // input height
  int64_t w = 1;  // input width
  int64_t k = 1;  // output channels
  int64_t r = 1;  // filter height
  int64_t s = 1;  // filter width
  Pair stride{1, 1};
  Pair pad{0, 0};
  Pair dilation{1, 1};
  int64_t groups = 1;
  Direction direction = Direction::Forward;
  ElementType type = ElementType::F32;  // of x, w and y
  MathMode math = MathMode::FP32;
  Layout layout = Layout::NCHW;

  friend bool operator==(const ConvProblem& a, const ConvProblem& b);
  friend bool operator!=(const ConvProblem& a, const ConvProblem& b) { return !(a == b); }

  // Throws InvalidArgument naming the field and value when the problem cannot be computed.
  void validate() const;

  int64_t p() const;  // output height
  int64_t q() const;  // output width
  int64_t c_per_group() const { return c / groups; }
  int64_t k_per_group() const { return k / groups; }

  int64_t x_elements() const { return n * c * h * w; }
  int64_t w_elements() const { return k * c_per_group() * r * s; }
  int64_t y_elements() const { return n * k * p() * q(); }
  // Elements of the operand this direction writes: y (forward), x (backward-data) or w (backward-filter).
  int64_t written_elements() const;

  // Direct-convolution work, 2*N*K*P*Q*(C/groups)*R*S, whatever algorithm runs and whatever direction.
  double flops() const;
  // Fewest bytes a direction must move: each operand read or written once.
  double bytes() const;

  // Same problem, other direction.
  ConvProblem with_direction(Direction d) const;
  // Same problem, other layout.
  ConvProblem with_layout(Layout l) const;

  // Where logical element (n, c, h, w) of x, (k, c in the group, r, s) of w and (n, k, p, q) of y lie in memory,
  // in this problem's layout.
  int64_t x_offset(int64_t n_, int64_t c_, int64_t h_, int64_t w_) const {
    return layout == Layout::NCHW ? ((n_ * c + c_) * h + h_) * w + w_ : ((n_ * h + h_) * w + w_) * c + c_;
  }
  int64_t w_offset(int64_t k_, int64_t c_, int64_t r_, int64_t s_) const {
    return layout == Layout::NCHW ? ((k_ * c_per_group() + c_) * r + r_) * s + s_
                                  : ((k_ * r + r_) * s + s_) * c_per_group() + c_;
  }
  int64_t y_offset(int64_t n_, int64_t k_, int64_t p_, int64_t q_) const {
    return layout == Layout::NCHW ? ((n_ * k + k_) * p() + p_) * q() + q_ : ((n_ * p() + p_) * q() + q_) * k + k_;
  }

  // Compact one-line description, the same syntax parse_problem() reads:
  // "N=1,C=3,H=224,W=224,K=64,R=11,S=11,stride=4,pad=2,dilation=1,groups=1,dir=fwd,type=fp32,math=fp32", with
  // ",layout=nhwc" after it for a channels-last problem (NCHW, the default, is not written: older text reads the same).
  std::string to_string() const;
};

// Parses "N=..,C=..,H=..,W=..,K=..,R=..,S=..[,stride=..][,pad=..][,dilation=..][,groups=..][,dir=..]
// [,type=fp32|fp16|bf16][,math=fp32|tf32|3xtf32|fp32-fast][,layout=nchw|nhwc]". Two-axis fields take "2" or "2x1" (height x width); also
// stride_h=, pad_w= etc. Missing N, C, K default to 1, R and S default to 1, W defaults to H. The older
// "precision=fp32|tf32|fp16|bf16" is read too (tf32 meaning FP32 tensors with TF32 math). Throws
// InvalidArgument naming the bad key or value.
ConvProblem parse_problem(std::string_view text);

// Largest element count of one tensor that every backend can index with 32-bit signed integers.
inline constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

}  // namespace convtune
