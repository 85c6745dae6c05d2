// The reference libraries of bench --against on small layers: each one that is present agrees with the float64
// reference in every direction it supports, and one that is absent or cannot run says why instead of vanishing.
#include <gtest/gtest.h>

#include <memory>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/tensor.h"
#include "src/conformance/conformance.h"
#include "src/reference_libs/reference_library.h"

namespace convtune::reference {
namespace {

const Direction kDirections[] = {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};

// Small, odd-sized layers: stride, asymmetric filter, padding, dilation and groups each appear at least once.
std::vector<ConvProblem> small_problems() {
  return {parse_problem("N=2,C=4,H=9,W=7,K=6,R=3,S=2,stride=2,pad=1"),
          parse_problem("N=1,C=3,H=11,K=5,R=5,pad=2"),
          parse_problem("N=2,C=4,H=8,K=4,R=3,dilation=2,pad=2"),
          parse_problem("N=2,C=6,H=7,K=9,R=3,groups=3,pad=1")};
}

struct HostData {
  Tensor x, w, y;
  explicit HostData(const ConvProblem& pb) : x({pb.x_elements()}), w({pb.w_elements()}), y({pb.y_elements()}) {
    x.fill_random(11), w.fill_random(12), y.fill_random(13);
  }
  ConvOperands operands() { return {x.data(), w.data(), y.data()}; }
  Tensor& written(Direction d) { return d == Direction::Forward ? y : d == Direction::BackwardData ? x : w; }
};

// Runs `library` on `pb` and checks its output against the float64 reference at every element.
void expect_agrees(ReferenceLibrary& library, const ConvProblem& pb, Device& device) {
  HostData host(pb);
  SharedOperands shared{&device, {}, host.operands()};
  std::unique_ptr<Buffer> x, w, y;
  if (device.info().backend != BackendKind::Cpu) {
    x = device.allocate(host.x.bytes()), w = device.allocate(host.w.bytes()), y = device.allocate(host.y.bytes());
    device.queue().write(*x, host.x.data(), host.x.bytes());
    device.queue().write(*w, host.w.data(), host.w.bytes());
    device.queue().write(*y, host.y.data(), host.y.bytes());
    shared.device_buffers = {x.get(), w.get(), y.get(), nullptr};
  }
  library.prepare(pb, shared, MathMode::FP32);
  const std::vector<float> out = library.run_and_read();
  Tensor& written = host.written(pb.direction);
  ASSERT_EQ(static_cast<int64_t>(out.size()), written.size()) << library.name() << " " << pb.to_string();
  std::copy(out.begin(), out.end(), written.data());
  const auto result = conformance::check_sampled(pb, host.operands(), static_cast<int>(out.size()), 7);
  EXPECT_TRUE(result.passed) << library.name() << " [" << library.algorithm() << "] " << pb.to_string() << ": "
                             << result.message;
}

TEST(ReferenceLibrary, OneDnnAgreesWithTheReferenceInEveryDirection) {
  auto onednn = make_reference_library("onednn");
  if (!onednn->unavailable_reason().empty()) GTEST_SKIP() << onednn->unavailable_reason();
  Device& cpu = Registry::instance().find("cpu");
  for (const ConvProblem& base : small_problems())
    for (Direction d : kDirections) {
      const ConvProblem pb = base.with_direction(d);
      ASSERT_EQ(onednn->unsupported_reason(pb, cpu.info()), "") << pb.to_string();
      expect_agrees(*onednn, pb, cpu);
    }
}

TEST(ReferenceLibrary, ClblastAgreesOnTheForwardPassAndDeclinesTheRest) {
  auto clblast = make_reference_library("clblast");
  if (!clblast->unavailable_reason().empty()) GTEST_SKIP() << clblast->unavailable_reason();
  Device* device = nullptr;
  try {
    device = &Registry::instance().find("opencl");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  if (!device->info().can_run_kernels) GTEST_SKIP() << device->info().cannot_run_reason;
  for (const ConvProblem& base : small_problems()) {
    for (Direction d : kDirections) {
      const ConvProblem pb = base.with_direction(d);
      const std::string why = clblast->unsupported_reason(pb, device->info());
      if (d != Direction::Forward) {
        EXPECT_NE(why.find("forward pass only"), std::string::npos) << why;
      } else if (pb.groups > 1) {
        EXPECT_NE(why.find("groups"), std::string::npos) << why;
      } else {
        ASSERT_EQ(why, "") << pb.to_string();
        expect_agrees(*clblast, pb, *device);
      }
    }
  }
}

TEST(ReferenceLibrary, CudnnSaysWhyItCannotRunWithoutACudaDevice) {
  auto cudnn = make_reference_library("cudnn");
  Device& cpu = Registry::instance().find("cpu");
  const std::string why = cudnn->unsupported_reason(parse_problem("N=1,C=3,H=8,K=4,R=3"), cpu.info());
  // Either the library is absent (named with the file tried) or it is there and needs convtune on CUDA.
  EXPECT_FALSE(why.empty());
  if (cudnn->unavailable_reason().empty())
    EXPECT_NE(why.find("CUDA device"), std::string::npos) << why;
  else
    EXPECT_NE(why.find("libcudnn"), std::string::npos) << why;
}

TEST(ReferenceLibrary, UnknownNamesAreRefusedWithTheKnownOnes) {
  try {
    make_reference_library("mkl");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cudnn, clblast, onednn"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_math_mode("fp16"), InvalidArgument);
}

}  // namespace
}  // namespace convtune::reference
