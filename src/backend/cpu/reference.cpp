// The float64 reference: for every output element, the obvious gather sum (convolutions, all three directions and
// every ConvProblem field) or dot product (GEMMs) with one float64 accumulator. Every other implementation in
// convtune is checked against it, in full (conformance) or at sampled elements of full-size problems (bench, tuner).
#include "src/backend/cpu/reference.h"

#include <algorithm>

#include "src/core/parallel_for.h"

namespace convtune::cpu {

namespace {

// Operands are read through ConvProblem's offsets, so either layout (NCHW or NHWC) is computed by the same sums; the
// logical output index runs in NCHW order (n, k, p, q / n, c, h, w / k, c, r, s) whatever the layout.

// y[n,k,p,q] = sum over (c in k's group, r, s) of x[n, c, p*stride - pad + r*dilation, ...] * w[k,c,r,s].
double forward_element(const ConvProblem& pb, const float* x, const float* w, int64_t index) {
  const int64_t cg = pb.c_per_group(), P = pb.p(), Q = pb.q();
  const int64_t q = index % Q, p = (index / Q) % P, k = (index / (P * Q)) % pb.k, n = index / (P * Q * pb.k);
  const int64_t g = k / pb.k_per_group();
  double acc = 0.0;
  for (int64_t cl = 0; cl < cg; ++cl) {
    const int64_t c = g * cg + cl;
    for (int64_t r = 0; r < pb.r; ++r) {
      const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
      if (ih < 0 || ih >= pb.h) continue;
      for (int64_t s = 0; s < pb.s; ++s) {
        const int64_t iw = q * pb.stride.w - pb.pad.w + s * pb.dilation.w;
        if (iw < 0 || iw >= pb.w) continue;
        acc += static_cast<double>(x[pb.x_offset(n, c, ih, iw)]) * static_cast<double>(w[pb.w_offset(k, cl, r, s)]);
      }
    }
  }
  return acc;
}

// dx[n,c,h,w] = sum over (k in c's group, r, s) with h = p*stride - pad + r*dilation of w[k,c,r,s] * dy[n,k,p,q].
double backward_data_element(const ConvProblem& pb, const float* w, const float* dy, int64_t index) {
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group(), P = pb.p(), Q = pb.q();
  const int64_t iw = index % pb.w, ih = (index / pb.w) % pb.h, c = (index / (pb.h * pb.w)) % pb.c,
                n = index / (pb.h * pb.w * pb.c);
  const int64_t g = c / cg, cl = c % cg;
  double acc = 0.0;
  for (int64_t kl = 0; kl < kg; ++kl) {
    const int64_t k = g * kg + kl;
    for (int64_t r = 0; r < pb.r; ++r) {
      const int64_t ph = ih + pb.pad.h - r * pb.dilation.h;
      if (ph < 0 || ph % pb.stride.h != 0 || ph / pb.stride.h >= P) continue;
      const int64_t p = ph / pb.stride.h;
      for (int64_t s = 0; s < pb.s; ++s) {
        const int64_t qw = iw + pb.pad.w - s * pb.dilation.w;
        if (qw < 0 || qw % pb.stride.w != 0 || qw / pb.stride.w >= Q) continue;
        const int64_t q = qw / pb.stride.w;
        acc += static_cast<double>(w[pb.w_offset(k, cl, r, s)]) * static_cast<double>(dy[pb.y_offset(n, k, p, q)]);
      }
    }
  }
  return acc;
}

// dw[k,c,r,s] = sum over (n, p, q) of x[n, c, p*stride - pad + r*dilation, ...] * dy[n,k,p,q].
double backward_filter_element(const ConvProblem& pb, const float* x, const float* dy, int64_t index) {
  const int64_t cg = pb.c_per_group(), P = pb.p(), Q = pb.q();
  const int64_t s = index % pb.s, r = (index / pb.s) % pb.r, cl = (index / (pb.s * pb.r)) % cg,
                k = index / (pb.s * pb.r * cg);
  const int64_t c = (k / pb.k_per_group()) * cg + cl;
  double acc = 0.0;
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
      if (ih < 0 || ih >= pb.h) continue;
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t iw = q * pb.stride.w - pb.pad.w + s * pb.dilation.w;
        if (iw < 0 || iw >= pb.w) continue;
        acc += static_cast<double>(x[pb.x_offset(n, c, ih, iw)]) * static_cast<double>(dy[pb.y_offset(n, k, p, q)]);
      }
    }
  return acc;
}

// C_b[m][n] (+ old value) = sum over k of op(A_b)[m][k] * op(B_b)[k][n].
double gemm_element(const GemmProblem& g, const HostOperands& op, int64_t i) {
  const int64_t n = i % g.n, m = (i / g.n) % g.m, b = i / (g.n * g.m);
  const float* a = op[0] + b * g.batch_stride_a();
  const float* bm = op[1] + b * g.batch_stride_b();
  double acc = g.accumulate ? static_cast<double>(op[2][output_offset(Problem(g), i)]) : 0.0;
  for (int64_t k = 0; k < g.k; ++k) {
    const double av = g.trans_a ? a[k * g.ld_a() + m] : a[m * g.ld_a() + k];
    const double bv = g.trans_b ? bm[n * g.ld_b() + k] : bm[k * g.ld_b() + n];
    acc += av * bv;
  }
  return acc;
}

}  // namespace

int64_t output_count(const Problem& problem) {
  if (problem.is_gemm()) {
    const GemmProblem& g = problem.gemm();
    return g.batch * g.m * g.n;
  }
  return problem.written_elements();
}

int64_t output_offset(const Problem& problem, int64_t i) {
  if (problem.is_conv()) {
    const ConvProblem& c = problem.conv();
    if (c.layout == Layout::NCHW) return i;
    switch (c.direction) {
      case Direction::Forward: {
        const int64_t P = c.p(), Q = c.q();
        return c.y_offset(i / (c.k * P * Q), (i / (P * Q)) % c.k, (i / Q) % P, i % Q);
      }
      case Direction::BackwardData:
        return c.x_offset(i / (c.c * c.h * c.w), (i / (c.h * c.w)) % c.c, (i / c.w) % c.h, i % c.w);
      case Direction::BackwardFilter:
        return c.w_offset(i / (c.c_per_group() * c.r * c.s), (i / (c.r * c.s)) % c.c_per_group(), (i / c.s) % c.r,
                          i % c.s);
    }
  }
  const GemmProblem& g = problem.gemm();
  const int64_t n = i % g.n, m = (i / g.n) % g.m, b = i / (g.n * g.m);
  return b * g.batch_stride_c() + m * g.ld_c() + n;
}

double reference_element(const Problem& problem, const HostOperands& op, int64_t i) {
  if (problem.is_gemm()) return gemm_element(problem.gemm(), op, i);
  const ConvProblem& pb = problem.conv();
  switch (pb.direction) {
    case Direction::Forward: return forward_element(pb, op[0], op[1], i);
    case Direction::BackwardData: return backward_data_element(pb, op[1], op[2], i);
    case Direction::BackwardFilter: return backward_filter_element(pb, op[0], op[2], i);
  }
  return 0.0;
}

void compute_reference(const Problem& problem, const HostOperands& op) {
  problem.validate();
  float* out = op[problem.written_operand()];
  const int64_t count = output_count(problem);
  // Elements are independent: spread blocks of them over threads so checking a large problem stays quick. A GEMM
  // that accumulates reads each element before writing it, and every element is read and written by one thread.
  const int64_t chunk = 256;
  parallel_for((count + chunk - 1) / chunk, hardware_threads(), [&](int64_t block) {
    for (int64_t i = block * chunk; i < std::min(count, (block + 1) * chunk); ++i)
      out[output_offset(problem, i)] = static_cast<float>(reference_element(problem, op, i));
  });
}

}  // namespace convtune::cpu
