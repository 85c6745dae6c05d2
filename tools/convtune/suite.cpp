// Suite lookup and parsing.
#include "tools/convtune/suite.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "src/core/install_paths.h"

namespace convtune::cli {

namespace {

std::vector<std::filesystem::path> suite_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("CONVTUNE_SUITE_DIR"); env && *env) dirs.emplace_back(env);
  if (!data_dir().empty()) dirs.emplace_back(data_dir() / "suites");
  return dirs;
}

}  // namespace

std::vector<std::string> available_suites() {
  std::vector<std::string> names;
  for (const auto& dir : suite_dirs()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.path().extension() == ".txt") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<Layer> load_suite(const std::string& name_or_path) {
  std::filesystem::path path;
  std::error_code ec;
  if (std::filesystem::exists(name_or_path, ec)) {
    path = name_or_path;  // read_file below refuses a FIFO or device with a message, rather than "unknown suite"
  } else {
    for (const auto& dir : suite_dirs()) {
      if (std::filesystem::is_regular_file(dir / (name_or_path + ".txt"))) {
        path = dir / (name_or_path + ".txt");
        break;
      }
    }
  }
  if (path.empty()) {
    throw InvalidArgument(fmt::format("unknown suite '{}': expected a file or one of: {}", name_or_path,
                                      fmt::join(available_suites(), ", ")));
  }
  std::string text;
  try {
    text = read_file(path, kMaxSuiteBytes);
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("suite file {}: {}", path.string(), e.what()));
  }
  std::istringstream in(text);
  std::vector<Layer> layers;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    Layer layer;
    std::string spec, extra;
    if (!(fields >> layer.name)) continue;
    if (!(fields >> spec) || (fields >> extra)) {
      throw InvalidArgument(fmt::format("{}:{}: expected 'NAME N=..,C=..,H=..,K=..,R=..', got '{}'", path.string(),
                                        number, line));
    }
    try {
      layer.problem = parse_any_problem(spec);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{}:{}: layer {}: {}", path.string(), number, layer.name, e.what()));
    }
    layers.push_back(layer);
  }
  if (layers.empty()) throw InvalidArgument(fmt::format("suite file {} holds no layers", path.string()));
  return layers;
}

Problem scale_batch(Problem problem, double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) {
    throw InvalidArgument(fmt::format("--batch-scale={} is invalid: expected a finite number > 0", scale));
  }
  if (!problem.is_conv()) return problem;
  ConvProblem conv = problem.conv();
  // Checked before converting: llround of a value beyond int64 is undefined, and silently becoming N=1 (as it
  // once did for 1e30) would time the wrong problem.
  const double scaled = std::round(static_cast<double>(conv.n) * scale);
  if (scaled > static_cast<double>(kMaxTensorElements)) {
    throw InvalidArgument(fmt::format("--batch-scale={} makes N={} into {:.6g}: expected at most {}", scale, conv.n,
                                      scaled, kMaxTensorElements));
  }
  conv.n = std::max<int64_t>(1, static_cast<int64_t>(scaled));
  return conv;
}

std::vector<Layer> select_layers(const std::string& suite, const std::vector<std::string>& layer_texts,
                                 const std::vector<std::string>& gemm_texts) {
  std::vector<Layer> layers;
  std::vector<std::string> problem_texts, names;
  for (const auto& text : layer_texts) (!suite.empty() && text.find('=') == std::string::npos ? names : problem_texts).push_back(text);
  if (!suite.empty()) {
    const std::vector<Layer> all = load_suite(suite);
    for (const Layer& layer : all)
      if (names.empty() || std::find(names.begin(), names.end(), layer.name) != names.end()) layers.push_back(layer);
    for (const std::string& name : names) {
      if (std::none_of(all.begin(), all.end(), [&](const Layer& layer) { return layer.name == name; })) {
        std::vector<std::string> known;
        for (const Layer& layer : all) known.push_back(layer.name);
        throw InvalidArgument(fmt::format("--layer {}: suite {} has no such layer: expected one of {}", name, suite,
                                          fmt::join(known, ", ")));
      }
    }
  }
  int index = 0;
  for (const auto& text : problem_texts) {
    try {
      layers.push_back({fmt::format("layer{}", ++index), parse_problem(text)});
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("--layer '{}': {}", text, e.what()));
    }
  }
  index = 0;
  for (const auto& text : gemm_texts) {
    try {
      layers.push_back({fmt::format("gemm{}", ++index), parse_gemm(text)});
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("--gemm '{}': {}", text, e.what()));
    }
  }
  if (layers.empty()) {
    throw InvalidArgument("nothing to run: give --suite NAME, --layer N=..,C=..,H=..,K=..,R=.. or --gemm M=..,N=..,K=..");
  }
  return layers;
}

std::vector<std::string> unscalable_layers(const std::vector<Layer>& layers, double scale) {
  std::vector<std::string> notes;
  if (!(scale < 1)) return notes;
  for (const Layer& layer : layers) {
    if (!layer.problem.is_conv()) continue;
    const int64_t n = layer.problem.conv().n;
    const int64_t scaled = scale_batch(layer.problem, scale).conv().n;
    // Twice the asked share or more: the run takes noticeably longer than the scale promises.
    if (static_cast<double>(scaled) >= 2 * scale * static_cast<double>(n)) {
      notes.push_back(fmt::format("layer {}: N={} cannot shrink by --batch-scale {}: it runs at N={}, {:.0f} times "
                                  "the asked share of its work",
                                  layer.name, n, scale, scaled, static_cast<double>(scaled) / (scale * static_cast<double>(n))));
    }
  }
  return notes;
}

std::vector<Direction> parse_directions(const std::string& text) {
  if (text == "all") return {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};
  return {parse_direction(text)};
}

}  // namespace convtune::cli
