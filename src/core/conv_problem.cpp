// ConvProblem validation, derived sizes, FLOP/byte counts and the text form used by --layer and suites.
#include "convtune/conv_problem.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <string>
#include <vector>

#include "convtune/error.h"
#include "src/core/checked_math.h"
#include "src/core/key_values.h"

namespace convtune {

std::string_view to_string(Direction d) {
  switch (d) {
    case Direction::Forward: return "fwd";
    case Direction::BackwardData: return "bwd-data";
    case Direction::BackwardFilter: return "bwd-filter";
  }
  return "?";
}

Direction parse_direction(std::string_view t) {
  if (t == "fwd" || t == "forward") return Direction::Forward;
  if (t == "bwd-data" || t == "backward-data" || t == "bwd_data") return Direction::BackwardData;
  if (t == "bwd-filter" || t == "backward-filter" || t == "bwd_filter") return Direction::BackwardFilter;
  throw InvalidArgument(fmt::format("unknown direction '{}': expected fwd, bwd-data or bwd-filter", t));
}

std::string_view to_string(Layout layout) { return layout == Layout::NHWC ? "nhwc" : "nchw"; }

Layout parse_layout(std::string_view t) {
  if (t == "nchw" || t == "NCHW") return Layout::NCHW;
  if (t == "nhwc" || t == "NHWC" || t == "channels_last") return Layout::NHWC;
  throw InvalidArgument(fmt::format("unknown layout '{}': expected nchw or nhwc", t));
}

bool operator==(const ConvProblem& a, const ConvProblem& b) {
  return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w && a.k == b.k && a.r == b.r && a.s == b.s &&
         a.stride == b.stride && a.pad == b.pad && a.dilation == b.dilation && a.groups == b.groups &&
         a.direction == b.direction && a.type == b.type && a.math == b.math && a.layout == b.layout;
}

namespace {

// Output extent of one axis; 0 when there is none. Checked arithmetic: a problem that was not validated (its
// fields straight from a file) may hold values whose sums and products do not fit in 64 bits.
int64_t output_extent(int64_t in, int64_t filter, int64_t stride, int64_t pad, int64_t dilation) {
  if (in <= 0 || filter <= 0 || stride <= 0 || pad < 0 || dilation <= 0) return 0;
  const auto dilated = checked_mul<int64_t>(filter - 1, dilation);
  const auto twice_pad = checked_mul<int64_t>(pad, 2);
  const auto padded = twice_pad ? checked_add<int64_t>(in, *twice_pad) : std::nullopt;
  if (!dilated || !padded) return 0;
  if (*dilated >= *padded) return 0;
  return (*padded - *dilated - 1) / stride + 1;  // both terms lie in [0, INT64_MAX]: no overflow
}

void require_positive(const char* field, int64_t value) {
  if (value <= 0) throw InvalidArgument(fmt::format("{}={} is invalid: expected a positive integer", field, value));
}

// Kernels compute indices (an input row, a padded coordinate, an offset) in 32-bit signed integers, so every
// extent and every sum of them they form must stay below 2^31; bounding each field first also keeps the 64-bit
// arithmetic below free of overflow.
void require_32bit(const char* field, int64_t value) {
  if (value > kMaxTensorElements) {
    throw InvalidArgument(fmt::format("{}={} is too large: expected at most {} (kernels index with 32-bit integers)",
                                      field, value, kMaxTensorElements));
  }
}

void require_tensor_fits(const char* tensor, double elements) {
  if (elements > static_cast<double>(kMaxTensorElements)) {
    throw InvalidArgument(fmt::format(
        "tensor {} would hold {:.0f} elements, more than the {} that backends index with 32-bit integers",
        tensor, elements, kMaxTensorElements));
  }
}

}  // namespace

void ConvProblem::validate() const {
  require_positive("N", n);
  require_positive("C", c);
  require_positive("H", h);
  require_positive("W", w);
  require_positive("K", k);
  require_positive("R", r);
  require_positive("S", s);
  require_positive("stride_h", stride.h);
  require_positive("stride_w", stride.w);
  require_positive("dilation_h", dilation.h);
  require_positive("dilation_w", dilation.w);
  require_positive("groups", groups);
  validate_precision(type, math);
  if (pad.h < 0) throw InvalidArgument(fmt::format("pad_h={} is invalid: expected 0 or more", pad.h));
  if (pad.w < 0) throw InvalidArgument(fmt::format("pad_w={} is invalid: expected 0 or more", pad.w));
  const std::pair<const char*, int64_t> fields[] = {
      {"N", n}, {"C", c}, {"H", h}, {"W", w}, {"K", k}, {"R", r}, {"S", s}, {"stride_h", stride.h},
      {"stride_w", stride.w}, {"pad_h", pad.h}, {"pad_w", pad.w}, {"dilation_h", dilation.h},
      {"dilation_w", dilation.w}, {"groups", groups}};
  for (const auto& [field, value] : fields) require_32bit(field, value);
  // Each term is below 2^31 now, so these sums and products fit in 64 bits.
  if (h + 2 * pad.h > kMaxTensorElements) {
    throw InvalidArgument(fmt::format("H={} with pad_h={} is too large: the padded height H+2*pad_h must be at most {} "
                                      "(kernels index with 32-bit integers)", h, pad.h, kMaxTensorElements));
  }
  if (w + 2 * pad.w > kMaxTensorElements) {
    throw InvalidArgument(fmt::format("W={} with pad_w={} is too large: the padded width W+2*pad_w must be at most {} "
                                      "(kernels index with 32-bit integers)", w, pad.w, kMaxTensorElements));
  }
  if (c % groups != 0) throw InvalidArgument(fmt::format("groups={} does not divide C={}", groups, c));
  if (k % groups != 0) throw InvalidArgument(fmt::format("groups={} does not divide K={}", groups, k));
  if (p() <= 0) {
    throw InvalidArgument(fmt::format(
        "no output rows: H={} with pad_h={} is smaller than the dilated filter height {} (R={}, dilation_h={})", h,
        pad.h, (r - 1) * dilation.h + 1, r, dilation.h));
  }
  if (q() <= 0) {
    throw InvalidArgument(fmt::format(
        "no output columns: W={} with pad_w={} is smaller than the dilated filter width {} (S={}, dilation_w={})", w,
        pad.w, (s - 1) * dilation.w + 1, s, dilation.w));
  }
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  require_tensor_fits("x (N*C*H*W)", d(n) * d(c) * d(h) * d(w));
  require_tensor_fits("w (K*C/groups*R*S)", d(k) * d(c / groups) * d(r) * d(s));
  require_tensor_fits("y (N*K*P*Q)", d(n) * d(k) * d(p()) * d(q()));
}

int64_t ConvProblem::p() const { return output_extent(h, r, stride.h, pad.h, dilation.h); }
int64_t ConvProblem::q() const { return output_extent(w, s, stride.w, pad.w, dilation.w); }

double ConvProblem::flops() const {
  return 2.0 * static_cast<double>(n) * k * p() * q() * c_per_group() * r * s;
}

double ConvProblem::bytes() const {
  return static_cast<double>(x_elements() + w_elements() + y_elements()) * bytes_per_element(type);
}

int64_t ConvProblem::written_elements() const {
  switch (direction) {
    case Direction::Forward: return y_elements();
    case Direction::BackwardData: return x_elements();
    case Direction::BackwardFilter: return w_elements();
  }
  return 0;
}

ConvProblem ConvProblem::with_direction(Direction d) const {
  ConvProblem copy = *this;
  copy.direction = d;
  return copy;
}

ConvProblem ConvProblem::with_layout(Layout l) const {
  ConvProblem copy = *this;
  copy.layout = l;
  return copy;
}

namespace {

std::string pair_text(const Pair& p) {
  return p.h == p.w ? fmt::format("{}", p.h) : fmt::format("{}x{}", p.h, p.w);
}

int64_t parse_int(std::string_view key, std::string_view value) {
  int64_t out = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec == std::errc::result_out_of_range) {
    throw InvalidArgument(fmt::format("layer field {}='{}' is out of range: expected at most {}", key, value,
                                      kMaxTensorElements));
  }
  if (ec != std::errc() || ptr != end) {
    throw InvalidArgument(fmt::format("layer field {}='{}' is not an integer", key, value));
  }
  return out;
}

Pair parse_pair(std::string_view key, std::string_view value) {
  const auto x = value.find('x');
  if (x == std::string_view::npos) {
    const int64_t v = parse_int(key, value);
    return {v, v};
  }
  return {parse_int(key, value.substr(0, x)), parse_int(key, value.substr(x + 1))};
}

}  // namespace

std::string ConvProblem::to_string() const {
  return fmt::format("N={},C={},H={},W={},K={},R={},S={},stride={},pad={},dilation={},groups={},dir={},type={},math={}{}",
                     n, c, h, w, k, r, s, pair_text(stride), pair_text(pad), pair_text(dilation), groups,
                     convtune::to_string(direction), convtune::to_string(type), convtune::to_string(math),
                     layout == Layout::NHWC ? ",layout=nhwc" : "");
}

ConvProblem parse_problem(std::string_view text) {
  ConvProblem p;
  bool has_h = false, has_w = false, has_s = false;
  if (text.empty()) throw InvalidArgument("empty layer description: expected N=..,C=..,H=..,K=..,R=..");
  for_each_field(text, "layer", [&](std::string_view key, std::string_view value) {
    if (key == "N" || key == "n") p.n = parse_int(key, value);
    else if (key == "C" || key == "c") p.c = parse_int(key, value);
    else if (key == "H" || key == "h") { p.h = parse_int(key, value); has_h = true; }
    else if (key == "W" || key == "w") { p.w = parse_int(key, value); has_w = true; }
    else if (key == "K" || key == "k") p.k = parse_int(key, value);
    else if (key == "R" || key == "r") p.r = parse_int(key, value);
    else if (key == "S" || key == "s") { p.s = parse_int(key, value); has_s = true; }
    else if (key == "stride") p.stride = parse_pair(key, value);
    else if (key == "stride_h") p.stride.h = parse_int(key, value);
    else if (key == "stride_w") p.stride.w = parse_int(key, value);
    else if (key == "pad") p.pad = parse_pair(key, value);
    else if (key == "pad_h") p.pad.h = parse_int(key, value);
    else if (key == "pad_w") p.pad.w = parse_int(key, value);
    else if (key == "dilation") p.dilation = parse_pair(key, value);
    else if (key == "dilation_h") p.dilation.h = parse_int(key, value);
    else if (key == "dilation_w") p.dilation.w = parse_int(key, value);
    else if (key == "groups" || key == "G") p.groups = parse_int(key, value);
    else if (key == "dir" || key == "direction") p.direction = parse_direction(value);
    else if (key == "type") p.type = parse_element_type(value);
    else if (key == "math") p.math = parse_math_mode(value);
    else if (key == "layout") p.layout = parse_layout(value);
    else if (key == "precision") {
      // The older single field: "tf32" meant FP32 tensors multiplied in TF32.
      if (value == "tf32") p.type = ElementType::F32, p.math = MathMode::TF32;
      else p.type = parse_element_type(value), p.math = MathMode::FP32;
    } else {
      throw InvalidArgument(fmt::format(
          "unknown layer field '{}': expected N, C, H, W, K, R, S, stride, pad, dilation, groups, dir, type, math, "
          "layout",
          key));
    }
  });
  if (!has_h) throw InvalidArgument("layer description has no H: expected H=<input height>");
  if (!has_w) p.w = p.h;
  if (!has_s) p.s = p.r;
  p.validate();
  return p;
}

}  // namespace convtune
