// Benchmark suites: plain-text layer lists (share/convtune/suites, from bench/suites), one "NAME PROBLEM" per line;
// a problem is a convolution (N=..,C=..,...) or a matrix product (gemm:M=..,N=..,K=..).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "convtune/problem.h"

namespace convtune::cli {

struct Layer {
  std::string name;
  Problem problem;  // a convolution's direction is set per row
};

// A suite of a thousand layers takes about 100 kB.
inline constexpr uint64_t kMaxSuiteBytes = uint64_t{16} << 20;

// Reads a suite by name ("alexnet": alexnet.txt in $CONVTUNE_SUITE_DIR, else in share/convtune/suites beside the
// library) or by path. Errors name the file, the line and the problem.
std::vector<Layer> load_suite(const std::string& name_or_path);
std::vector<std::string> available_suites();

// A convolution's N scaled by `scale` (at least 1); a GEMM as it is. Throws InvalidArgument when scale is not a
// finite number > 0 or the scaled N exceeds kMaxTensorElements.
Problem scale_batch(Problem problem, double scale);

// The layers a command was asked for: a suite's, then each --layer text (named layer1, layer2...), then each
// --gemm text (gemm1, gemm2...). With a suite, a --layer text without '=' names one of its layers: the suite then
// contributes only the named ones. Throws InvalidArgument naming the bad text or unknown layer, or saying how to
// ask for something when all are empty.
std::vector<Layer> select_layers(const std::string& suite, const std::vector<std::string>& layer_texts,
                                 const std::vector<std::string>& gemm_texts = {});

// One line per convolution whose N cannot shrink by `scale` (N=1 at 0.01 stays 1: 100 times the asked share of
// the work), said before a run so that a long one is not a surprise; empty when scale >= 1.
std::vector<std::string> unscalable_layers(const std::vector<Layer>& layers, double scale);

// "fwd", "bwd-data", "bwd-filter" or "all".
std::vector<Direction> parse_directions(const std::string& text);

}  // namespace convtune::cli
