// Benchmark suites: plain-text layer lists under bench/suites, one "NAME PROBLEM" per line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"

namespace convtune::cli {

struct Layer {
  std::string name;
  ConvProblem problem;
};

// A suite of a thousand layers takes about 100 kB.
inline constexpr uint64_t kMaxSuiteBytes = uint64_t{16} << 20;

// Reads a suite by name ("alexnet": bench/suites/alexnet.txt, found through $CONVTUNE_SUITE_DIR, then the
// source tree this binary was built from) or by path. Errors name the file, the line and the problem.
std::vector<Layer> load_suite(const std::string& name_or_path);
std::vector<std::string> available_suites();

// N scaled by `scale` (at least 1). Throws InvalidArgument when scale is not a finite number > 0 or the scaled N
// exceeds kMaxTensorElements.
ConvProblem scale_batch(ConvProblem problem, double scale);

// The layers a command was asked for: a suite's, then each --layer text (named layer1, layer2...). Throws
// InvalidArgument naming the bad --layer, or saying how to ask for something when both are empty.
std::vector<Layer> select_layers(const std::string& suite, const std::vector<std::string>& layer_texts);

// "fwd", "bwd-data", "bwd-filter" or "all".
std::vector<Direction> parse_directions(const std::string& text);

}  // namespace convtune::cli
