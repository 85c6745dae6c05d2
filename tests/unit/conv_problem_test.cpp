// ConvProblem: derived sizes, FLOP/byte counts, validation messages (overflow included) and the text form.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>

#include "convtune/conv_problem.h"
#include "convtune/problem.h"
#include "convtune/error.h"

using namespace convtune;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_problem(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(ConvProblem, AlexNetLayer1Sizes) {
  const ConvProblem p = parse_problem("N=128,C=3,H=224,W=224,K=64,R=11,S=11,stride=4,pad=2");
  EXPECT_EQ(p.p(), 55);
  EXPECT_EQ(p.q(), 55);
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 128 * 64 * 55 * 55 * 3 * 11 * 11);
  EXPECT_DOUBLE_EQ(p.bytes(), 4.0 * (128 * 3 * 224 * 224 + 64 * 3 * 11 * 11 + 128 * 64 * 55 * 55));
}

TEST(ConvProblem, Seed000LayerSizes) {
  const ConvProblem p = parse_problem("N=1,C=256,H=228,K=256,R=5");
  EXPECT_EQ(p.w, 228);
  EXPECT_EQ(p.s, 5);
  EXPECT_EQ(p.p(), 224);
  EXPECT_EQ(p.q(), 224);
}

TEST(ConvProblem, GroupsDilationAndNonSquare) {
  const ConvProblem p = parse_problem("N=2,C=8,H=10,W=12,K=4,R=3,S=5,stride=2x1,pad=1x2,dilation=2,groups=4");
  EXPECT_EQ(p.c_per_group(), 2);
  EXPECT_EQ(p.p(), (10 + 2 - 5) / 2 + 1);
  EXPECT_EQ(p.q(), (12 + 4 - 9) / 1 + 1);
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 2 * 4 * p.p() * p.q() * 2 * 3 * 5);
  EXPECT_EQ(parse_problem(p.to_string()), p);  // the text form round-trips
}

TEST(ConvProblem, DirectionTypeAndMathParse) {
  const ConvProblem p = parse_problem("N=1,C=1,H=4,K=1,R=3,dir=bwd-filter,type=fp16");
  EXPECT_EQ(p.direction, Direction::BackwardFilter);
  EXPECT_EQ(p.type, ElementType::F16);
  EXPECT_EQ(p.math, MathMode::FP32);
  EXPECT_DOUBLE_EQ(p.bytes(), 2.0 * (16 + 9 + 4));
  EXPECT_EQ(parse_problem(p.to_string()), p);
  const ConvProblem tf32 = parse_problem("N=1,C=1,H=4,K=1,R=3,math=tf32");
  EXPECT_EQ(tf32.type, ElementType::F32);
  EXPECT_EQ(tf32.math, MathMode::TF32);
  // 16-bit tensors are multiplied exactly and summed in FP32: another math mode is refused, naming both.
  try {
    parse_problem("N=1,C=1,H=4,K=1,R=3,type=bf16,math=3xtf32").validate();
    ADD_FAILURE() << "bf16 tensors in 3xtf32 math were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("type=bf16 takes math=fp32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("math=3xtf32"), std::string::npos) << e.what();
  }
}

// Every math mode's text reads back as itself, in a problem's text too; fp32-fast computes in FP32 (its unit
// roundoff is FP32's) and admits declared bounds up to kFp32FastErrorFactor, where fp32 and 3xtf32 admit none.
TEST(MathMode, TextRoundTripAndAdmittedBounds) {
  for (MathMode mode : {MathMode::FP32, MathMode::TF32, MathMode::TF32x3, MathMode::FP32Fast}) {
    EXPECT_EQ(parse_math_mode(to_string(mode)), mode);
    ConvProblem p = parse_problem("N=1,C=1,H=4,K=1,R=3");
    p.math = mode;
    EXPECT_EQ(parse_problem(p.to_string()), p) << p.to_string();
  }
  EXPECT_EQ(to_string(MathMode::FP32Fast), "fp32-fast");
  EXPECT_EQ(parse_problem("N=1,C=1,H=4,K=1,R=3,math=fp32-fast").math, MathMode::FP32Fast);
  EXPECT_EQ(unit_roundoff(ElementType::F32, MathMode::FP32Fast), unit_roundoff(ElementType::F32, MathMode::FP32));
  EXPECT_EQ(max_error_factor(ElementType::F32, MathMode::FP32), 1.0);
  EXPECT_EQ(max_error_factor(ElementType::F32, MathMode::TF32x3), 1.0);
  EXPECT_EQ(max_error_factor(ElementType::F32, MathMode::FP32Fast), kFp32FastErrorFactor);
  EXPECT_GT(max_error_factor(ElementType::F32, MathMode::TF32), kFp32FastErrorFactor);
  try {
    parse_math_mode("fast");
    ADD_FAILURE() << "'fast' was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("fp32-fast"), std::string::npos) << e.what();
  }
}

TEST(ConvProblem, OlderPrecisionFieldStillReads) {
  // Tuning databases written before type and math were separate say precision=...
  EXPECT_EQ(parse_problem("N=1,C=1,H=4,K=1,R=3,precision=fp16").type, ElementType::F16);
  const ConvProblem tf32 = parse_problem("N=1,C=1,H=4,K=1,R=3,precision=tf32");
  EXPECT_EQ(tf32.type, ElementType::F32);
  EXPECT_EQ(tf32.math, MathMode::TF32);
  EXPECT_THROW(parse_problem("N=1,C=1,H=4,K=1,R=3,type=fp8"), InvalidArgument);
}

TEST(GemmProblem, SizesStridesAndTextForm) {
  const GemmProblem g = parse_gemm("M=100,N=256,K=3136,trans_b=1");
  EXPECT_EQ(g.a_elements(), 100 * 3136);
  EXPECT_EQ(g.b_elements(), 256 * 3136);
  EXPECT_EQ(g.c_elements(), 100 * 256);
  EXPECT_DOUBLE_EQ(g.flops(), 2.0 * 100 * 256 * 3136);
  EXPECT_EQ(parse_gemm(g.to_string()), g);
  const GemmProblem b = parse_gemm("M=4,N=5,K=6,trans_a=1,batch=3,ldc=8,stride_b=0,accumulate=1");
  EXPECT_EQ(b.ld_a(), 4);                                 // A stored K x M
  EXPECT_EQ(b.batch_stride_c(), 4 * 8);
  EXPECT_EQ(b.c_elements(), 2 * 32 + 3 * 8 + 5);          // the last item's last row ends there
  EXPECT_EQ(b.b_elements(), 6 * 5);                       // one B shared by the batch
  EXPECT_EQ(parse_gemm(b.to_string()), b);
  const Problem any = parse_any_problem("gemm:" + b.to_string());
  ASSERT_TRUE(any.is_gemm());
  EXPECT_EQ(any.gemm(), b);
  EXPECT_EQ(any.written_operand(), 2);
  EXPECT_TRUE(any.operand(2).read);  // accumulating reads C
  EXPECT_EQ(any.reduction_length(), 6);
}

TEST(GemmProblem, ErrorsNameTheField) {
  auto error = [](const char* text) {
    try {
      parse_gemm(text);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("M=0,N=2,K=2").find("M=0"), std::string::npos);
  EXPECT_NE(error("M=2,N=4,K=2,ldc=3").find("ldc=3"), std::string::npos);
  EXPECT_NE(error("M=2,N=4,K=2,batch=2,stride_c=1").find("overlap"), std::string::npos);
  EXPECT_NE(error("M=2,N=4").find("lacks M, N or K"), std::string::npos);
  EXPECT_NE(error("M=2,N=4,K=2,trans_a=2").find("expected 0 or 1"), std::string::npos);
  EXPECT_NE(error("M=2,N=4,K=2,X=1").find("unknown GEMM field 'X'"), std::string::npos);
  // fuzz_layer's finding (fuzz/regressions/fuzz_layer/gemm-huge-k-packed-stride-overflow): M*K overflowed int64 in
  // the packed stride before validation looked at the span.
  EXPECT_NE(error("M=64,N=33,K=1777777777777777773").find("K=1777777777777777773 is too large: expected at most "
                                                          "2147483647"),
            std::string::npos);
  EXPECT_NE(error("M=2,N=4,K=2,lda=9223372036854775807").find("lda=9223372036854775807 is too large"),
            std::string::npos);
}

TEST(ConvProblem, ErrorsNameTheField) {
  EXPECT_NE(error_of("N=0,C=3,H=8,K=4,R=3").find("N=0"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=-3,H=8,K=4,R=3").find("C=-3"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=8,K=4,R=3,groups=2").find("groups=2 does not divide C=3"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=4,H=8,K=3,R=3,groups=2").find("groups=2 does not divide K=3"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=2,K=4,R=5").find("no output rows: H=2"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=9,W=4,K=4,R=3,S=3,dilation=2").find("no output columns: W=4"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=8,K=4,R=3,stride=0").find("stride_h=0"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=8,K=4,R=3,pad=-1").find("pad_h=-1"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=8,K=4,R=3,Z=1").find("unknown layer field 'Z'"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=x,H=8").find("C='x' is not an integer"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,K=4,R=3").find("no H"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=8,K=4,R=3,dir=sideways").find("unknown direction 'sideways'"), std::string::npos);
  EXPECT_NE(error_of("N=1,C=3,H=8,K=4,R=3,C").find("has no '='"), std::string::npos);
}

TEST(ConvProblem, TensorsPastIndexableSizeAreRejected) {
  const std::string msg = error_of("N=100000,C=256,H=228,K=4,R=3");
  EXPECT_NE(msg.find("tensor x"), std::string::npos) << msg;
  EXPECT_NE(msg.find("32-bit"), std::string::npos) << msg;
}

// The reliability issue's layer descriptions (tests/data/repro/layer-*.txt): each passed validation through
// signed overflow and ran a meaningless problem. Each is now refused naming the field.
TEST(ConvProblem, ReproducersOverflowingValidationAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"layer-H-int64max-overflow.txt", "H=9223372036854775807 is too large: expected at most 2147483647"},
      {"layer-dilation-int64max-overflow.txt", "dilation_h=9223372036854775807 is too large"},
      {"layer-dilation-mul-overflow.txt", "dilation_w=930321474836481134 is too large"},
      {"layer-pad-int64max-overflow.txt", "pad_h=9223372036854775807 is too large"},
  };
  for (const auto& [file, phrase] : cases) {
    std::ifstream in(std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/" + file);
    std::string text;
    std::getline(in, text);
    ASSERT_FALSE(text.empty()) << file;
    EXPECT_NE(error_of(text).find(phrase), std::string::npos) << file << ": " << error_of(text);
  }
}

TEST(ConvProblem, SumsAndProductsNearTheLimitsAreCheckedNotWrapped) {
  // Each field fits, their padded sum does not.
  EXPECT_NE(error_of("N=1,C=1,H=2147483647,W=1,K=1,R=1,pad_h=1").find("the padded height H+2*pad_h must be at most"),
            std::string::npos);
  EXPECT_NE(error_of("N=1,C=1,H=1,W=2000000000,K=1,R=1,pad_w=100000000").find("padded width"), std::string::npos);
  // A dilated filter of 2^31 * 2^31 taps: no output, said without overflow.
  EXPECT_NE(error_of("N=1,C=1,H=8,K=1,R=2147483647,dilation=2147483647").find("no output rows"), std::string::npos);
  EXPECT_NE(error_of("N=99999999999999999999,C=1,H=8,K=1,R=3").find("N='99999999999999999999' is out of range"),
            std::string::npos);
  // Unvalidated problems (fields straight from a file) still give a defined answer.
  ConvProblem p;
  p.h = INT64_MAX;
  p.pad = {INT64_MAX, INT64_MAX};
  p.r = 3;
  p.dilation = {INT64_MAX, 1};
  EXPECT_EQ(p.p(), 0);
  // The largest accepted problem's figures are exact.
  const ConvProblem big = parse_problem("N=1,C=1,H=2147483645,W=1,K=1,R=3,S=1,pad_h=1");
  EXPECT_EQ(big.p(), 2147483645);
}
