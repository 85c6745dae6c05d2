// GemmProblem validation, FLOP/byte counts and its text form (bench --gemm, suites, the tuning database).
#include "convtune/gemm_problem.h"

#include <fmt/format.h>

#include <charconv>
#include <string>

#include "convtune/conv_problem.h"
#include "convtune/error.h"
#include "src/core/key_values.h"

namespace convtune {

bool operator==(const GemmProblem& a, const GemmProblem& b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.trans_a == b.trans_a && a.trans_b == b.trans_b &&
         a.batch == b.batch && a.lda == b.lda && a.ldb == b.ldb && a.ldc == b.ldc && a.stride_a == b.stride_a &&
         a.stride_b == b.stride_b && a.stride_c == b.stride_c && a.accumulate == b.accumulate && a.type == b.type &&
         a.math == b.math;
}

namespace {

void require_positive(const char* field, int64_t value) {
  if (value <= 0) throw InvalidArgument(fmt::format("GEMM {}={} is invalid: expected a positive integer", field, value));
  // Bounded before any product of two fields (the packed strides M*K, K*N, M*N) is formed: at most 2^62, no overflow.
  if (value > kMaxTensorElements) {
    throw InvalidArgument(fmt::format("GEMM {}={} is too large: expected at most {} (backends index with 32-bit "
                                      "integers)", field, value, kMaxTensorElements));
  }
}

// (batch - 1) * stride + (rows - 1) * ld + cols without overflow; throws naming the operand when it cannot be
// indexed with 32-bit integers, as every backend's kernels do.
void require_extent(const char* operand, int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols) {
  int64_t a = 0, b = 0, total = 0;
  const bool overflow = __builtin_mul_overflow(batch - 1, stride, &a) || __builtin_mul_overflow(rows - 1, ld, &b) ||
                        __builtin_add_overflow(a, b, &total) || __builtin_add_overflow(total, cols, &total);
  if (overflow || total > kMaxTensorElements) {
    throw InvalidArgument(fmt::format("GEMM operand {} spans more than the {} elements backends index with 32-bit "
                                      "integers",
                                      operand, kMaxTensorElements));
  }
}

}  // namespace

void GemmProblem::validate() const {
  require_positive("M", m);
  require_positive("N", n);
  require_positive("K", k);
  require_positive("batch", batch);
  validate_precision(type, math);
  auto check_ld = [](const char* field, int64_t value, int64_t cols) {
    if (value != kPacked && value < cols)
      throw InvalidArgument(fmt::format("GEMM {}={} is invalid: expected at least the stored row length {}", field,
                                        value, cols));
    if (value != kPacked && value > kMaxTensorElements)  // a packed stride multiplies it by a row count
      throw InvalidArgument(fmt::format("GEMM {}={} is too large: expected at most {}", field, value,
                                        kMaxTensorElements));
  };
  check_ld("lda", lda, a_cols());
  check_ld("ldb", ldb, b_cols());
  check_ld("ldc", ldc, n);
  auto check_stride = [](const char* field, int64_t value) {
    if (value != kPacked && value < 0)
      throw InvalidArgument(fmt::format("GEMM {}={} is invalid: expected 0 (shared) or more", field, value));
  };
  check_stride("stride_a", stride_a);
  check_stride("stride_b", stride_b);
  check_stride("stride_c", stride_c);
  require_extent("A", batch, batch_stride_a(), a_rows(), ld_a(), a_cols());
  require_extent("B", batch, batch_stride_b(), b_rows(), ld_b(), b_cols());
  require_extent("C", batch, batch_stride_c(), m, ld_c(), n);
  // Batch items writing into one another would make the result depend on the order they run in.
  if (batch > 1 && batch_stride_c() < (m - 1) * ld_c() + n) {
    throw InvalidArgument(fmt::format("GEMM stride_c={} is invalid: batch items of C overlap (expected at least {})",
                                      stride_c, (m - 1) * ld_c() + n));
  }
}

double GemmProblem::flops() const { return 2.0 * static_cast<double>(batch) * m * n * k; }

double GemmProblem::bytes() const {
  const double c = static_cast<double>(batch) * m * n * (accumulate ? 2 : 1);
  const double a = static_cast<double>(stride_a == 0 ? 1 : batch) * m * k;
  const double b = static_cast<double>(stride_b == 0 ? 1 : batch) * k * n;
  return (a + b + c) * bytes_per_element(type);
}

std::string GemmProblem::to_string() const {
  std::string text = fmt::format("M={},N={},K={},trans_a={},trans_b={},batch={}", m, n, k, trans_a ? 1 : 0,
                                 trans_b ? 1 : 0, batch);
  const std::pair<const char*, int64_t> optional[] = {{"lda", lda},           {"ldb", ldb},
                                                       {"ldc", ldc},           {"stride_a", stride_a},
                                                       {"stride_b", stride_b}, {"stride_c", stride_c}};
  for (const auto& [name, value] : optional)
    if (value != kPacked) text += fmt::format(",{}={}", name, value);
  if (accumulate) text += ",accumulate=1";
  text += fmt::format(",type={},math={}", convtune::to_string(type), convtune::to_string(math));
  return text;
}

GemmProblem parse_gemm(std::string_view text) {
  GemmProblem g;
  if (text.empty()) throw InvalidArgument("empty GEMM description: expected M=..,N=..,K=..");
  bool has_m = false, has_n = false, has_k = false;
  auto parse_int = [](std::string_view key, std::string_view value) {
    int64_t out = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, out);
    if (ec != std::errc() || ptr != end)
      throw InvalidArgument(fmt::format("GEMM field {}='{}' is not an integer", key, value));
    return out;
  };
  auto parse_flag = [&](std::string_view key, std::string_view value) {
    const int64_t v = parse_int(key, value);
    if (v != 0 && v != 1) throw InvalidArgument(fmt::format("GEMM field {}={} is invalid: expected 0 or 1", key, v));
    return v == 1;
  };
  for_each_field(text, "GEMM", [&](std::string_view key, std::string_view value) {
    if (key == "M" || key == "m") g.m = parse_int(key, value), has_m = true;
    else if (key == "N" || key == "n") g.n = parse_int(key, value), has_n = true;
    else if (key == "K" || key == "k") g.k = parse_int(key, value), has_k = true;
    else if (key == "trans_a" || key == "transA") g.trans_a = parse_flag(key, value);
    else if (key == "trans_b" || key == "transB") g.trans_b = parse_flag(key, value);
    else if (key == "batch") g.batch = parse_int(key, value);
    else if (key == "lda") g.lda = parse_int(key, value);
    else if (key == "ldb") g.ldb = parse_int(key, value);
    else if (key == "ldc") g.ldc = parse_int(key, value);
    else if (key == "stride_a") g.stride_a = parse_int(key, value);
    else if (key == "stride_b") g.stride_b = parse_int(key, value);
    else if (key == "stride_c") g.stride_c = parse_int(key, value);
    else if (key == "accumulate") g.accumulate = parse_flag(key, value);
    else if (key == "type") g.type = parse_element_type(value);
    else if (key == "math") g.math = parse_math_mode(value);
    else
      throw InvalidArgument(fmt::format("unknown GEMM field '{}': expected M, N, K, trans_a, trans_b, batch, lda, ldb, "
                                        "ldc, stride_a, stride_b, stride_c, accumulate, type, math",
                                        key));
  });
  if (!has_m || !has_n || !has_k) throw InvalidArgument(fmt::format("GEMM '{}' lacks M, N or K", text));
  g.validate();
  return g;
}

}  // namespace convtune
