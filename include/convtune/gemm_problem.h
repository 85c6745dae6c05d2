// GemmProblem: a (batched, strided) matrix product C = op(A) * op(B), and the figures derived from it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "convtune/types.h"

namespace convtune {

// Row-major, as C and the dense layers store matrices: for every batch item b,
//   C_b (M x N) = op(A_b) (M x K) * op(B_b) (K x N)     (accumulate: C_b += ...)
// A is stored M x K, or K x M when trans_a; B is stored K x N, or N x K when trans_b. A stored matrix's rows are
// `ld` elements apart and batch items `stride` elements apart. kPacked asks for the dense value (ld = the
// stored row length, stride = rows * ld); a stride of 0 shares one matrix across the batch.
struct GemmProblem {
  static constexpr int64_t kPacked = -1;

  int64_t m = 1;
  int64_t n = 1;
  int64_t k = 1;
  bool trans_a = false;
  bool trans_b = false;
  int64_t batch = 1;
  int64_t lda = kPacked, ldb = kPacked, ldc = kPacked;
  int64_t stride_a = kPacked, stride_b = kPacked, stride_c = kPacked;
  bool accumulate = false;  // C += op(A) op(B): C is read, so it must hold numbers
  ElementType type = ElementType::F32;
  MathMode math = MathMode::FP32;

  friend bool operator==(const GemmProblem& a, const GemmProblem& b);
  friend bool operator!=(const GemmProblem& a, const GemmProblem& b) { return !(a == b); }

  // Throws InvalidArgument naming the field and value when the problem cannot be computed.
  void validate() const;

  // Effective leading dimensions and batch strides (kPacked resolved).
  int64_t a_rows() const { return trans_a ? k : m; }  // as stored
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
  int64_t ld_a() const { return lda == kPacked ? a_cols() : lda; }
  int64_t ld_b() const { return ldb == kPacked ? b_cols() : ldb; }
  int64_t ld_c() const { return ldc == kPacked ? n : ldc; }
  int64_t batch_stride_a() const { return stride_a == kPacked ? a_rows() * ld_a() : stride_a; }
  int64_t batch_stride_b() const { return stride_b == kPacked ? b_rows() * ld_b() : stride_b; }
  int64_t batch_stride_c() const { return stride_c == kPacked ? m * ld_c() : stride_c; }

  // Elements each operand's buffer must hold: the last batch item's last row ends there.
  int64_t a_elements() const { return (batch - 1) * batch_stride_a() + (a_rows() - 1) * ld_a() + a_cols(); }
  int64_t b_elements() const { return (batch - 1) * batch_stride_b() + (b_rows() - 1) * ld_b() + b_cols(); }
  int64_t c_elements() const { return (batch - 1) * batch_stride_c() + (m - 1) * ld_c() + n; }

  double flops() const;  // 2 * batch * M * N * K
  double bytes() const;  // A, B and C once each (C twice when accumulating)

  // "M=100,N=256,K=3136,trans_a=0,trans_b=1,batch=1,type=fp32,math=fp32" (+ ld/stride/accumulate when not
  // the default), the syntax parse_gemm() reads.
  std::string to_string() const;
};

// Parses "M=..,N=..,K=..[,trans_a=0|1][,trans_b=0|1][,batch=..][,lda=..][,ldb=..][,ldc=..][,stride_a=..]
// [,stride_b=..][,stride_c=..][,accumulate=0|1][,type=..][,math=..]". Throws InvalidArgument naming the bad key
// or value.
GemmProblem parse_gemm(std::string_view text);

}  // namespace convtune
