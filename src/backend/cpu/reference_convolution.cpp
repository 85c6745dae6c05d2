// The CPU reference convolution: obvious gather loops with float64 accumulation for all three directions and
// every ConvProblem field. Every other kernel in convtune is checked against it.
#include "src/backend/cpu/cpu_convolutions.h"

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::cpu {

namespace {

void forward(const ConvProblem& pb, const float* x, const float* w, float* y) {
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group(), P = pb.p(), Q = pb.q();
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t k = 0; k < pb.k; ++k) {
      const int64_t g = k / kg;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          double acc = 0.0;
          for (int64_t cl = 0; cl < cg; ++cl) {
            const int64_t c = g * cg + cl;
            for (int64_t r = 0; r < pb.r; ++r) {
              const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
              if (ih < 0 || ih >= pb.h) continue;
              for (int64_t s = 0; s < pb.s; ++s) {
                const int64_t iw = q * pb.stride.w - pb.pad.w + s * pb.dilation.w;
                if (iw < 0 || iw >= pb.w) continue;
                acc += static_cast<double>(x[((n * pb.c + c) * pb.h + ih) * pb.w + iw]) *
                       static_cast<double>(w[((k * cg + cl) * pb.r + r) * pb.s + s]);
              }
            }
          }
          y[((n * pb.k + k) * P + p) * Q + q] = static_cast<float>(acc);
        }
    }
}

// dx[n,c,h,w] = sum over (k in c's group, r, s) with h = p*stride - pad + r*dilation of w[k,c,r,s]*dy[n,k,p,q].
void backward_data(const ConvProblem& pb, float* dx, const float* w, const float* dy) {
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group(), P = pb.p(), Q = pb.q();
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t c = 0; c < pb.c; ++c) {
      const int64_t g = c / cg, cl = c % cg;
      for (int64_t ih = 0; ih < pb.h; ++ih)
        for (int64_t iw = 0; iw < pb.w; ++iw) {
          double acc = 0.0;
          for (int64_t kl = 0; kl < kg; ++kl) {
            const int64_t k = g * kg + kl;
            for (int64_t r = 0; r < pb.r; ++r) {
              const int64_t ph = ih + pb.pad.h - r * pb.dilation.h;
              if (ph < 0 || ph % pb.stride.h != 0) continue;
              const int64_t p = ph / pb.stride.h;
              if (p >= P) continue;
              for (int64_t s = 0; s < pb.s; ++s) {
                const int64_t qw = iw + pb.pad.w - s * pb.dilation.w;
                if (qw < 0 || qw % pb.stride.w != 0) continue;
                const int64_t q = qw / pb.stride.w;
                if (q >= Q) continue;
                acc += static_cast<double>(w[((k * cg + cl) * pb.r + r) * pb.s + s]) *
                       static_cast<double>(dy[((n * pb.k + k) * P + p) * Q + q]);
              }
            }
          }
          dx[((n * pb.c + c) * pb.h + ih) * pb.w + iw] = static_cast<float>(acc);
        }
    }
}

// dw[k,c,r,s] = sum over (n, p, q) of x[n, c, p*stride - pad + r*dilation, ...] * dy[n,k,p,q].
void backward_filter(const ConvProblem& pb, const float* x, float* dw, const float* dy) {
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group(), P = pb.p(), Q = pb.q();
  for (int64_t k = 0; k < pb.k; ++k) {
    const int64_t g = k / kg;
    for (int64_t cl = 0; cl < cg; ++cl) {
      const int64_t c = g * cg + cl;
      for (int64_t r = 0; r < pb.r; ++r)
        for (int64_t s = 0; s < pb.s; ++s) {
          double acc = 0.0;
          for (int64_t n = 0; n < pb.n; ++n)
            for (int64_t p = 0; p < P; ++p) {
              const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
              if (ih < 0 || ih >= pb.h) continue;
              for (int64_t q = 0; q < Q; ++q) {
                const int64_t iw = q * pb.stride.w - pb.pad.w + s * pb.dilation.w;
                if (iw < 0 || iw >= pb.w) continue;
                acc += static_cast<double>(x[((n * pb.c + c) * pb.h + ih) * pb.w + iw]) *
                       static_cast<double>(dy[((n * pb.k + k) * P + p) * Q + q]);
              }
            }
          dw[((k * cg + cl) * pb.r + r) * pb.s + s] = static_cast<float>(acc);
        }
    }
  }
}

class ReferenceConvolution final : public HostConvolution {
 public:
  std::string name() const override { return "reference"; }
  void run(const ConvProblem& pb, const ConvOperands& op) override {
    pb.validate();
    switch (pb.direction) {
      case Direction::Forward: forward(pb, op.x, op.w, op.y); break;
      case Direction::BackwardData: backward_data(pb, op.x, op.w, op.y); break;
      case Direction::BackwardFilter: backward_filter(pb, op.x, op.w, op.y); break;
    }
  }
};

}  // namespace

std::unique_ptr<HostConvolution> make_reference_convolution() { return std::make_unique<ReferenceConvolution>(); }

}  // namespace convtune::cpu
