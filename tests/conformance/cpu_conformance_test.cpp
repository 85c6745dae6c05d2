// Conformance of every convolution family of the CPU backend (each one's built-in default, and cpu_direct with one
// thread, seed 000's sequential baseline) on the standard case list, every direction, plus the adjoint identity;
// and proof that the harness catches what it must.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <optional>

#include "src/backend/cpu/cpu_backend.h"
#include "src/backend/cpu/reference.h"
#include "src/conformance/conformance.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/widened.h"

using namespace convtune;

namespace {

Device& cpu_device() { return Registry::instance().find("cpu"); }

// `config` empty: the family's built-in default for each problem (the tuning database is not consulted).
std::unique_ptr<harness::Implementation> cpu_plan(const std::string& family, std::optional<Config> config) {
  PlanRequest request;
  request.family = family;
  request.config = std::move(config);
  request.use_tuning = false;
  return std::make_unique<harness::PlanImplementation>(request);
}

// The float64 reference written straight into the workload's buffers, then spoilt by `spoil`: a deliberately broken
// implementation, to prove the harness fails it.
class Broken final : public harness::Implementation {
 public:
  explicit Broken(std::function<void(float* out, int64_t count)> spoil) : spoil_(std::move(spoil)) {}
  std::string name() const override { return "broken"; }
  std::string unsupported_reason(const Problem&, const DeviceInfo&) const override { return {}; }
  void prepare(harness::Workload& workload) override { workload_ = &workload; }
  void run() override {
    const Problem& pb = workload_->problem();
    const Operands ops = workload_->operands();
    cpu::HostOperands host;
    for (int i = 0; i < Problem::kOperands; ++i)
      host.data[static_cast<size_t>(i)] = reinterpret_cast<float*>(cpu::host_memory(const_cast<Buffer&>(*ops[i])));
    float* out = host[pb.written_operand()];
    const int64_t count = pb.written_elements();
    const float last = out[count - 1];
    cpu::compute_reference(pb, host);
    spoil_(out, count);
    if (std::isnan(last) && out[count - 1] == -12345.0f) out[count - 1] = last;  // "never written"
  }
  std::string algorithm() const override { return "broken"; }

 private:
  std::function<void(float*, int64_t)> spoil_;
  harness::Workload* workload_ = nullptr;
};

}  // namespace

TEST(CpuConformance, AllCpuFamiliesMatchTheReference) {
  std::vector<conformance::Target> targets = {
      {"cpu/cpu_direct[THREADS=1]", &cpu_device(), [] { return cpu_plan("cpu_direct", Config{{"THREADS", 1}}); }}};
  for (const auto& f : kernel_families()) {
    if (!f->runs_on_cpu_backend() || f->problem_kind() != Problem::Kind::Convolution) continue;
    if (families::is_widened(*f)) continue;  // 16-bit tensors only: family_conformance_test checks them
    const std::string name = f->name();
    targets.push_back({"cpu/" + name, &cpu_device(), [name] { return cpu_plan(name, std::nullopt); }});
  }
  const auto& cases = conformance::standard_cases();
  // Every family computes every case but cpu_depthwise, which refuses (by name) the cases that are not depthwise:
  // those are skipped in each direction and left out of the adjoint check.
  int refused = 0;
  for (const auto& f : kernel_families()) {
    if (!f->runs_on_cpu_backend() || f->problem_kind() != Problem::Kind::Convolution || families::is_widened(*f)) continue;
    for (const auto& c : cases) {
      const std::string why = f->unsupported_reason(Problem(c.problem), {}, cpu_device().info());
      if (why.empty()) continue;
      ++refused;
      EXPECT_EQ(f->name(), "cpu_depthwise") << c.name << ": " << why;
      EXPECT_FALSE(depthwise::one_channel_per_group(c.problem)) << c.name << ": " << why;
    }
  }
  const auto summary = conformance::run(targets, cases, 2026, &std::cout);
  for (const auto& f : summary.failures) ADD_FAILURE() << f;
  std::cout << "conformance: " << cases.size() << " cases x 3 directions x " << targets.size()
            << " CPU paths + adjoint: " << summary.checks << " checks, " << summary.passed << " passed, "
            << summary.failures.size() << " failed, " << summary.skipped << " skipped\n";
  EXPECT_EQ(summary.skipped, 3 * refused);
  EXPECT_EQ(summary.checks, static_cast<int>((cases.size() * targets.size() - refused) * 4));
}

TEST(CpuConformance, HarnessCatchesWrongResults) {
  // A deliberately broken implementation must fail: the harness is only worth what it catches.
  const ConvProblem pb = conformance::standard_cases()[4].problem;
  harness::Workload workload(cpu_device(), pb, 7);
  Broken off_by_one([](float* out, int64_t) { out[0] += 1e-2f; });
  off_by_one.prepare(workload);
  EXPECT_FALSE(harness::check_once(off_by_one, workload, 0).passed);

  // The last element left as the poison put there: "never written".
  Broken unwritten([](float* out, int64_t count) { out[count - 1] = std::numeric_limits<float>::quiet_NaN(); });
  unwritten.prepare(workload);
  const auto rb = harness::check_once(unwritten, workload, 0);
  EXPECT_FALSE(rb.passed);
  EXPECT_NE(rb.message.find("never written"), std::string::npos) << rb.message;

  Broken overrun([](float* out, int64_t count) { out[count] = 0.0f; });  // one past the end: the first canary
  overrun.prepare(workload);
  const auto rc = harness::check_once(overrun, workload, 0);
  EXPECT_FALSE(rc.passed);
  EXPECT_NE(rc.message.find("canary"), std::string::npos) << rc.message;
}

TEST(CpuConformance, InputsAreNeverAllZero) {
  for (const auto& c : conformance::standard_cases()) {
    harness::Workload workload(cpu_device(), c.problem, 1);
    for (int i = 0; i < Problem::kOperands; ++i) {
      double sum = 0;
      for (float v : workload.initial(i)) sum += std::abs(v);
      EXPECT_GT(sum, 0) << c.name << " operand " << i;
    }
  }
}

TEST(CpuConformance, GemmFamiliesMatchTheReference) {
  // cpu_gemm on transposed, strided, batched and accumulating products; checked in full.
  const char* cases[] = {"M=7,N=9,K=5", "M=16,N=3,K=31,trans_a=1", "M=5,N=12,K=8,trans_b=1,lda=11,ldc=13",
                         "M=4,N=6,K=10,trans_a=1,trans_b=1,batch=3", "M=6,N=5,K=7,batch=2,stride_b=0,accumulate=1"};
  for (const char* text : cases) {
    for (int64_t threads : {0, 1}) {
      harness::Workload workload(cpu_device(), parse_gemm(text), 3);
      auto impl = cpu_plan("cpu_gemm", Config{{"THREADS", threads}});
      impl->prepare(workload);
      const auto r = harness::check_once(*impl, workload, 0);
      EXPECT_TRUE(r.passed) << text << " THREADS=" << threads << ": " << r.message;
    }
  }
}
