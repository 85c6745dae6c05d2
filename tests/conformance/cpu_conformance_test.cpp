// Conformance of the CPU paths (reference, sequential, threaded) on the standard case list, every direction,
// plus the adjoint identity; prints how many checks ran.
#include <gtest/gtest.h>

#include <iostream>

#include "src/conformance/conformance.h"

using namespace convtune;

TEST(CpuConformance, AllCpuPathsMatchTheReference) {
  std::vector<conformance::Target> targets;
  for (const std::string& name : cpu_convolution_names())
    targets.push_back({"cpu/" + name, [name] { return make_cpu_convolution(name); }});
  const auto& cases = conformance::standard_cases();
  const auto summary = conformance::run(targets, cases, 2026, &std::cout);
  for (const auto& f : summary.failures) ADD_FAILURE() << f;
  std::cout << "conformance: " << cases.size() << " cases x 3 directions x " << targets.size()
            << " CPU paths + adjoint: " << summary.checks << " checks, " << summary.passed << " passed, "
            << summary.failures.size() << " failed, " << summary.skipped << " skipped\n";
  EXPECT_EQ(summary.skipped, 0);
  EXPECT_EQ(summary.checks, static_cast<int>(cases.size() * targets.size() * 4));
}

TEST(CpuConformance, HarnessCatchesWrongResults) {
  // A deliberately broken implementation must fail: the harness is only worth what it catches.
  struct OffByOne final : HostConvolution {
    std::string name() const override { return "broken"; }
    void run(const ConvProblem& pb, const ConvOperands& op) override {
      make_cpu_convolution("reference")->run(pb, op);
      op.y[0] += 1e-2f;  // forward output slightly wrong
    }
  };
  struct Unwritten final : HostConvolution {
    std::string name() const override { return "unwritten"; }
    void run(const ConvProblem& pb, const ConvOperands& op) override {
      const float keep = op.y[pb.y_elements() - 1];
      make_cpu_convolution("reference")->run(pb, op);
      op.y[pb.y_elements() - 1] = keep;  // last element never written: still NaN poison
    }
  };
  struct Overrun final : HostConvolution {
    std::string name() const override { return "overrun"; }
    void run(const ConvProblem& pb, const ConvOperands& op) override {
      make_cpu_convolution("reference")->run(pb, op);
      op.y[pb.y_elements()] = 0.0f;  // writes one past the end
    }
  };
  const ConvProblem pb = conformance::standard_cases()[4].problem;
  const auto inputs = conformance::make_inputs(pb, 7);
  OffByOne a;
  Unwritten b;
  Overrun c;
  EXPECT_FALSE(conformance::check(a, pb, inputs).passed);
  const auto rb = conformance::check(b, pb, inputs);
  EXPECT_FALSE(rb.passed);
  EXPECT_NE(rb.message.find("never written"), std::string::npos) << rb.message;
  const auto rc = conformance::check(c, pb, inputs);
  EXPECT_FALSE(rc.passed);
  EXPECT_NE(rc.message.find("canary"), std::string::npos) << rc.message;
}

TEST(CpuConformance, InputsAreNeverAllZero) {
  for (const auto& c : conformance::standard_cases()) {
    const auto in = conformance::make_inputs(c.problem, 1);
    double sum = 0;
    for (float v : in.x) sum += std::abs(v);
    EXPECT_GT(sum, 0) << c.name;
    double out = 0;
    for (float v : in.expected) out += std::abs(v);
    EXPECT_GT(out, 0) << c.name;
  }
}
