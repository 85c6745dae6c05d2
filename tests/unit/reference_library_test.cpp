// The reference libraries of bench --against on small layers and GEMMs: each one that is present agrees with the
// float64 reference on every problem it supports, and one that is absent or cannot run says why instead of vanishing.
#include <gtest/gtest.h>

#include <memory>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "src/harness/implementation.h"
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

// Runs `library` on `pb` in a Workload on `device` and checks its output against the float64 reference at every
// element (poisoned first, canaries after each operand).
void expect_agrees(ReferenceLibrary& library, const Problem& pb, Device& device) {
  harness::Workload workload(device, pb, 11);
  library.prepare(workload);
  const harness::Check result = harness::check_once(library, workload, 0);
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
  // Sgemm and SgemmStridedBatched on the same queue and buffers, transposed, padded and batched.
  for (const char* text : {"M=9,N=7,K=13", "M=6,N=10,K=5,trans_a=1,trans_b=1,ldc=12", "M=5,N=4,K=6,batch=3,trans_b=1"}) {
    const Problem g = parse_gemm(text);
    ASSERT_EQ(clblast->unsupported_reason(g, device->info()), "") << text;
    expect_agrees(*clblast, g, *device);
  }
}

TEST(ReferenceLibrary, CublasSaysWhyItCannotRunWithoutACudaDevice) {
  auto cublas = make_reference_library("cublas");
  Device& cpu = Registry::instance().find("cpu");
  const std::string why = cublas->unsupported_reason(parse_gemm("M=4,N=4,K=4"), cpu.info());
  EXPECT_FALSE(why.empty());
  if (cublas->unavailable_reason().empty())
    EXPECT_NE(why.find("CUDA device"), std::string::npos) << why;
  else
    EXPECT_NE(why.find("libcublas"), std::string::npos) << why;
  EXPECT_NE(cublas->unsupported_reason(parse_problem("N=1,C=3,H=8,K=4,R=3"), cpu.info()), "");
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
    EXPECT_NE(std::string(e.what()).find("cudnn, cublas, clblast, onednn"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_math_mode("fp16"), InvalidArgument);
}

}  // namespace
}  // namespace convtune::reference
