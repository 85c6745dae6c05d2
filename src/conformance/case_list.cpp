// The standard conformance case list; small enough that the float64 reference runs it in seconds.
#include "src/conformance/conformance.h"

#include <tuple>

namespace convtune::conformance {

const std::vector<Case>& standard_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<std::pair<std::string, std::string>> spec = {
        {"1x1", "N=2,C=8,H=7,W=9,K=6,R=1"},
        {"1x1-stride2", "N=1,C=4,H=9,W=8,K=5,R=1,stride=2"},
        {"1x1-single-pixel", "N=2,C=3,H=1,W=1,K=5,R=1"},
        {"2x2-stride2-even", "N=2,C=3,H=8,W=7,K=4,R=2,stride=2"},
        {"3x3-pad1", "N=2,C=5,H=8,W=8,K=7,R=3,pad=1"},
        {"3x3-stride2-pad1-odd", "N=1,C=3,H=11,W=7,K=4,R=3,stride=2,pad=1"},
        {"3x3-C1-nopad", "N=3,C=1,H=6,W=10,K=2,R=3"},
        {"3x3-stride4", "N=1,C=2,H=16,W=13,K=3,R=3,stride=4"},
        {"5x5-pad2", "N=2,C=3,H=12,W=12,K=4,R=5,pad=2"},
        {"5x5-seed000-mini", "N=1,C=8,H=14,W=14,K=8,R=5"},
        {"5x5-C1-fmnist-mini", "N=4,C=1,H=12,W=12,K=6,R=5,pad=2"},
        {"5x5-filter-covers-input", "N=1,C=2,H=5,W=5,K=3,R=5"},
        {"7x7-stride2-pad2", "N=1,C=3,H=17,W=15,K=4,R=7,stride=2,pad=2"},
        {"11x11-stride4-pad2-alex1-mini", "N=2,C=3,H=35,W=35,K=4,R=11,stride=4,pad=2"},
        {"3x3-dilation2", "N=1,C=4,H=13,W=11,K=3,R=3,pad=2,dilation=2"},
        {"3x5-nonsquare-dilation2x1", "N=2,C=3,H=9,W=12,K=4,R=3,S=5,pad=1x2,dilation=2x1"},
        {"3x3-stride2x1-pad0x1", "N=2,C=2,H=10,W=9,K=3,R=3,stride=2x1,pad=0x1"},
        {"3x3-groups2", "N=2,C=6,H=8,W=8,K=4,R=3,pad=1,groups=2"},
        {"3x3-depthwise", "N=2,C=8,H=9,W=9,K=8,R=3,pad=1,groups=8"},
        {"5x5-depthwise-x2-stride2", "N=1,C=4,H=11,W=10,K=8,R=5,stride=2,pad=2,groups=4"},
        {"3x3-depthwise-stride2-odd-N1", "N=1,C=4,H=7,W=5,K=4,R=3,stride=2,pad=1,groups=4"},
        {"3x3-depthwise-x2-dilation2-nopad", "N=2,C=3,H=9,W=8,K=6,R=3,dilation=2,groups=3"},
        {"1x1-groups4-N3", "N=3,C=8,H=5,W=6,K=12,R=1,groups=4"},
        // Channels-last: the layout's own kernels where a family has them, else transposes around NCHW kernels.
        // Operands whose two layouts are the same bytes (1x1 filters, one channel, one pixel) are not copied.
        {"1x1-nhwc", "N=2,C=8,H=7,W=9,K=6,R=1,layout=nhwc"},
        {"3x3-pad1-nhwc", "N=2,C=5,H=8,W=8,K=7,R=3,pad=1,layout=nhwc"},
        {"3x3-stride2-pad1-odd-nhwc", "N=1,C=3,H=11,W=7,K=4,R=3,stride=2,pad=1,layout=nhwc"},
        {"3x3-C1-nopad-nhwc", "N=3,C=1,H=6,W=10,K=2,R=3,layout=nhwc"},
        {"3x5-nonsquare-dilation2x1-nhwc", "N=2,C=3,H=9,W=12,K=4,R=3,S=5,pad=1x2,dilation=2x1,layout=nhwc"},
        {"3x3-groups2-nhwc", "N=2,C=6,H=8,W=8,K=4,R=3,pad=1,groups=2,layout=nhwc"},
        {"3x3-depthwise-stride2-odd-N1-nhwc", "N=1,C=4,H=7,W=5,K=4,R=3,stride=2,pad=1,groups=4,layout=nhwc"},
        // Channels in whole 16-byte chunks (8 bf16, 4 FP32), which the wgmma families read in place.
        {"3x3-pad1-c8k16-nhwc", "N=2,C=8,H=6,W=7,K=16,R=3,pad=1,layout=nhwc"},
        {"1x1-stride2-c16k8-nhwc", "N=2,C=16,H=9,W=8,K=8,R=1,stride=2,layout=nhwc"},
        {"7x7-depthwise-c24-nhwc", "N=1,C=24,H=9,W=9,K=24,R=7,pad=3,groups=24,layout=nhwc"},
        {"5x5-depthwise-c16-stride2-dilation-nhwc", "N=2,C=16,H=13,W=10,K=16,R=5,stride=2,pad=3,dilation=2x1,groups=16,layout=nhwc"},
        // Several row tiles of 64 (taps straddling them), a reduction of several 64-deep tiles, groups.
        {"3x3-dilation2x1-groups2-c32k80-nhwc", "N=3,C=32,H=10,W=11,K=80,R=3,pad=1,dilation=2x1,groups=2,layout=nhwc"},
    };
    std::vector<Case> out;
    for (const auto& [name, text] : spec) out.push_back({name, parse_problem(text)});
    return out;
  }();
  return cases;
}

const std::vector<EpilogueCase>& epilogue_cases() {
  static const std::vector<EpilogueCase> cases = [] {
    std::vector<std::tuple<std::string, std::string, std::string>> spec = {
        {"3x3-pad1-bias-residual-relu", "N=2,C=5,H=8,W=8,K=7,R=3,pad=1", "bias+residual+relu"},
        {"1x1-stride2-residual", "N=1,C=4,H=9,W=8,K=5,R=1,stride=2", "residual"},
        {"3x3-pad1-c8k16-bias-residual-relu-nhwc", "N=2,C=8,H=6,W=7,K=16,R=3,pad=1,layout=nhwc",
         "bias+residual+relu"},
        {"1x1-stride2-c16k8-bias-relu6-nhwc", "N=2,C=16,H=9,W=8,K=8,R=1,stride=2,layout=nhwc", "bias+relu6"},
        {"3x3-depthwise-bias-relu", "N=2,C=8,H=9,W=9,K=8,R=3,pad=1,groups=8", "bias+relu"},
        {"3x3-depthwise-c16-stride2-bias-relu6-nhwc", "N=2,C=16,H=9,W=9,K=16,R=3,stride=2,pad=1,groups=16,layout=nhwc",
         "bias+relu6"},
    };
    std::vector<EpilogueCase> out;
    for (const auto& [name, text, epilogue] : spec) out.push_back({name, parse_problem(text), parse_epilogue(epilogue)});
    return out;
  }();
  return cases;
}

}  // namespace convtune::conformance
