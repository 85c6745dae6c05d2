// The cpu_gemm family: batched, strided FP32 GEMM in C++ on the CPU backend (the dense layers on a machine without
// kernels). Rows of C are spread over threads; the inner loop runs along contiguous rows of B where B is not
// transposed, so the compiler vectorises it.
#include <algorithm>

#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/families/cpu_family.h"
#include "src/families/families.h"

namespace convtune {

namespace {

constexpr const char* kProgram = "cpu/gemm";

void multiply(const GemmProblem& g, unsigned threads, const float* a, const float* b, float* c) {
  const int64_t lda = g.ld_a(), ldb = g.ld_b(), ldc = g.ld_c();
  parallel_for(g.batch * g.m, threads, [&](int64_t row) {
    const int64_t item = row / g.m, i = row % g.m;
    const float* pa = a + item * g.batch_stride_a();
    const float* pb = b + item * g.batch_stride_b();
    float* out = c + item * g.batch_stride_c() + i * ldc;
    std::vector<float> acc(static_cast<size_t>(g.n), 0.0f);
    for (int64_t k = 0; k < g.k; ++k) {
      const float av = g.trans_a ? pa[k * lda + i] : pa[i * lda + k];
      if (g.trans_b) {
        for (int64_t j = 0; j < g.n; ++j) acc[static_cast<size_t>(j)] += av * pb[j * ldb + k];
      } else {
        const float* brow = pb + k * ldb;
        for (int64_t j = 0; j < g.n; ++j) acc[static_cast<size_t>(j)] += av * brow[j];
      }
    }
    for (int64_t j = 0; j < g.n; ++j) out[j] = g.accumulate ? out[j] + acc[static_cast<size_t>(j)] : acc[static_cast<size_t>(j)];
  });
}

class CpuGemmFamily final : public CpuFamily {
 public:
  CpuGemmFamily() : CpuFamily(Problem::Kind::Gemm) {
    cpu::register_host_program(kProgram, [](const ProgramSource& source) {
      const GemmProblem g = parse_any_problem(source.defines.at("PROBLEM")).gemm();
      const unsigned threads = cpu_threads(cpu::define_int(source, "THREADS"));
      return std::map<std::string, cpu::HostKernel>{{"gemm", [g, threads](const std::vector<KernelArg>& args) {
                                                       multiply(g, threads, cpu::host_floats(args.at(0), "a"),
                                                                cpu::host_floats(args.at(1), "b"),
                                                                cpu::host_floats(args.at(2), "c"));
                                                     }}};
    });
  }
  std::string name() const override { return "cpu_gemm"; }
  std::string description() const override {
    return "batched FP32 GEMM in C++ on the CPU backend, rows of C over threads, vectorised along rows of B";
  }
  std::vector<Parameter> parameters(const Problem&) const override { return {threads_parameter()}; }
  std::vector<Constraint> constraints(const Problem&) const override { return {}; }
  Config default_config(const Problem&, const DeviceInfo&) const override { return {{"THREADS", 0}}; }
  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config, const DeviceInfo&) const override {
    return cpu_recipe(kProgram, "gemm", problem, config);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_cpu_gemm() { return std::make_unique<CpuGemmFamily>(); }

}  // namespace convtune
