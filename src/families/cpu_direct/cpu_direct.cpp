// The cpu_direct family: FP32 direct convolution in C++ on the CPU backend. Per output plane, filter-tap x
// input-row products accumulate along contiguous rows so the compiler vectorises the inner loop. THREADS=1 is seed
// 000's sequential baseline; THREADS=0 splits planes (fwd, bwd-data) or filters (bwd-filter) over every core.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/families/cpu_family.h"
#include "src/families/families.h"

namespace convtune {

namespace {

// Output columns q whose input column q*stride - pad + offset lies in [0, width): [first, last).
struct ColumnRange {
  int64_t first, last;
};
ColumnRange valid_columns(int64_t Q, int64_t stride, int64_t pad, int64_t offset, int64_t width) {
  // iw = q*stride + (offset - pad) must satisfy 0 <= iw < width.
  const int64_t base = offset - pad;
  int64_t first = base >= 0 ? 0 : (-base + stride - 1) / stride;
  int64_t last = width - base <= 0 ? 0 : (width - base - 1) / stride + 1;
  return {std::min(first, Q), std::clamp<int64_t>(last, 0, Q)};
}

void forward_plane(const ConvProblem& pb, int64_t n, int64_t k, const float* x, const float* w, float* y) {
  const int64_t cg = pb.c_per_group(), g = k / pb.k_per_group(), P = pb.p(), Q = pb.q();
  const int64_t sw = pb.stride.w;
  float* out = y + (n * pb.k + k) * P * Q;
  std::fill(out, out + P * Q, 0.0f);
  for (int64_t cl = 0; cl < cg; ++cl) {
    const float* in = x + (n * pb.c + g * cg + cl) * pb.h * pb.w;
    for (int64_t r = 0; r < pb.r; ++r)
      for (int64_t s = 0; s < pb.s; ++s) {
        const float tap = w[((k * cg + cl) * pb.r + r) * pb.s + s];
        const auto cols = valid_columns(Q, sw, pb.pad.w, s * pb.dilation.w, pb.w);
        for (int64_t p = 0; p < P; ++p) {
          const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
          if (ih < 0 || ih >= pb.h) continue;
          const float* row = in + ih * pb.w + s * pb.dilation.w - pb.pad.w;
          float* orow = out + p * Q;
          for (int64_t q = cols.first; q < cols.last; ++q) orow[q] += tap * row[q * sw];
        }
      }
  }
}

void backward_data_plane(const ConvProblem& pb, int64_t n, int64_t c, float* dx, const float* w,
                         const float* dy) {
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group(), g = c / cg, cl = c % cg, P = pb.p(), Q = pb.q();
  const int64_t sw = pb.stride.w;
  float* out = dx + (n * pb.c + c) * pb.h * pb.w;
  std::fill(out, out + pb.h * pb.w, 0.0f);
  for (int64_t kl = 0; kl < kg; ++kl) {
    const int64_t k = g * kg + kl;
    const float* grad = dy + (n * pb.k + k) * P * Q;
    for (int64_t r = 0; r < pb.r; ++r)
      for (int64_t s = 0; s < pb.s; ++s) {
        const float tap = w[((k * cg + cl) * pb.r + r) * pb.s + s];
        const auto cols = valid_columns(Q, sw, pb.pad.w, s * pb.dilation.w, pb.w);
        for (int64_t p = 0; p < P; ++p) {
          const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
          if (ih < 0 || ih >= pb.h) continue;
          float* row = out + ih * pb.w + s * pb.dilation.w - pb.pad.w;
          const float* grow = grad + p * Q;
          for (int64_t q = cols.first; q < cols.last; ++q) row[q * sw] += tap * grow[q];
        }
      }
  }
}

// sum of row[q*stride] * grad[q] over [first, last), with eight independent partial sums: strict FP order
// would forbid the compiler to vectorise a single-accumulator reduction, and short sums also round better.
float row_dot(const float* row, int64_t stride, const float* grad, int64_t first, int64_t last) {
  float part[8] = {};
  int64_t q = first;
  for (; q + 8 <= last; q += 8)
    for (int i = 0; i < 8; ++i) part[i] += row[(q + i) * stride] * grad[q + i];
  float sum = 0.0f;
  for (; q < last; ++q) sum += row[q * stride] * grad[q];
  for (float v : part) sum += v;
  return sum;
}

void backward_filter_one(const ConvProblem& pb, int64_t k, const float* x, float* dw, const float* dy) {
  const int64_t cg = pb.c_per_group(), g = k / pb.k_per_group(), P = pb.p(), Q = pb.q();
  const int64_t sw = pb.stride.w;
  for (int64_t cl = 0; cl < cg; ++cl)
    for (int64_t r = 0; r < pb.r; ++r)
      for (int64_t s = 0; s < pb.s; ++s) {
        const auto cols = valid_columns(Q, sw, pb.pad.w, s * pb.dilation.w, pb.w);
        float acc = 0.0f;
        for (int64_t n = 0; n < pb.n; ++n) {
          const float* in = x + (n * pb.c + g * cg + cl) * pb.h * pb.w;
          const float* grad = dy + (n * pb.k + k) * P * Q;
          for (int64_t p = 0; p < P; ++p) {
            const int64_t ih = p * pb.stride.h - pb.pad.h + r * pb.dilation.h;
            if (ih < 0 || ih >= pb.h) continue;
            const float* row = in + ih * pb.w + s * pb.dilation.w - pb.pad.w;
            const float* grow = grad + p * Q;
            acc += row_dot(row, sw, grow, cols.first, cols.last);
          }
        }
        dw[((k * cg + cl) * pb.r + r) * pb.s + s] = acc;
      }
}

void convolve(const ConvProblem& pb, unsigned threads, float* x, float* w, float* y) {
  switch (pb.direction) {
    case Direction::Forward:
      parallel_for(pb.n * pb.k, threads, [&](int64_t i) { forward_plane(pb, i / pb.k, i % pb.k, x, w, y); });
      break;
    case Direction::BackwardData:
      parallel_for(pb.n * pb.c, threads, [&](int64_t i) { backward_data_plane(pb, i / pb.c, i % pb.c, x, w, y); });
      break;
    case Direction::BackwardFilter:
      parallel_for(pb.k, threads, [&](int64_t k) { backward_filter_one(pb, k, x, w, y); });
      break;
  }
}

constexpr const char* kProgram = "cpu/direct";

class CpuDirectFamily final : public CpuFamily {
 public:
  CpuDirectFamily() : CpuFamily(Problem::Kind::Convolution) {
    cpu::register_host_program(kProgram, [](const ProgramSource& source) {
      const ConvProblem pb = parse_problem(source.defines.at("PROBLEM"));
      const unsigned threads = cpu_threads(cpu::define_int(source, "THREADS"));
      return std::map<std::string, cpu::HostKernel>{
          {"convolve", [pb, threads](const std::vector<KernelArg>& args) {
             convolve(pb, threads, cpu::host_floats(args.at(0), "x"), cpu::host_floats(args.at(1), "w"),
                      cpu::host_floats(args.at(2), "y"));
           }}};
    });
  }
  std::string name() const override { return "cpu_direct"; }
  std::string description() const override {
    return "direct FP32 convolution in C++ on the CPU backend, vectorised along rows (THREADS=1: seed 000's "
           "sequential baseline; 0: every core)";
  }
  std::vector<Parameter> parameters(const Problem&) const override { return {threads_parameter()}; }
  std::vector<Constraint> constraints(const Problem&) const override { return {}; }
  Config default_config(const Problem&, const DeviceInfo&) const override { return {{"THREADS", 0}}; }
  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config, const DeviceInfo&) const override {
    return cpu_recipe(kProgram, "convolve", problem, config);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_cpu_direct() { return std::make_unique<CpuDirectFamily>(); }

}  // namespace convtune
