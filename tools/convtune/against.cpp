// Runs each reference library next to convtune's plan and turns the outcome into table cells and JSON.
#include "tools/convtune/against.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "convtune/error.h"
#include "src/conformance/conformance.h"
#include "tools/convtune/bench_target.h"

namespace convtune::cli {

namespace {

// ||a - b|| / ||b||: how far a reference's output is from convtune's, over every element.
double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    err2 += d * d;
    ref2 += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

}  // namespace

std::string reference_label(const reference::ReferenceLibrary& library) {
  return library.runs_on_host() ? library.name() + " CPU" : library.name();
}

Against::Against(const std::vector<std::string>& names, reference::MathMode math, const Device& device)
    : math_(math), device_(device) {
  for (const auto& name : names) {
    for (const auto& existing : libraries_)
      if (existing->name() == name) throw InvalidArgument(fmt::format("--against names '{}' twice", name));
    libraries_.push_back(reference::make_reference_library(name));
  }
}

std::vector<std::string> Against::columns() const {
  std::vector<std::string> cols;
  for (const auto& lib : libraries_) {
    const std::string label = reference_label(*lib);
    cols.insert(cols.end(), {label + " ms", label + " algorithm", label + " check", "convtune/" + label});
  }
  return cols;
}

std::vector<std::string> Against::empty_cells() const { return std::vector<std::string>(libraries_.size() * 4, "-"); }

std::vector<std::pair<std::string, std::string>> Against::describe() const {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& lib : libraries_) {
    const std::string why = lib->unavailable_reason();
    std::string text = why.empty() ? lib->version() : "missing: " + why;
    if (why.empty() && lib->runs_on_host()) text += ", on the host CPU (its times are CPU times)";
    lines.emplace_back(lib->name(), text);
  }
  return lines;
}

Against::Outcome Against::compare(const ConvProblem& pb, BenchTarget& target,
                                  const std::vector<float>& convtune_output, double convtune_ms, int warmup,
                                  int repeats) {
  Outcome out;
  // FP32: the conformance tolerance (8 unit roundoffs of FP32 times the square root of the reduction length).
  // TF32 rounds both inputs to 10 mantissa bits, so each product is off by up to 2^-10 relative; with random
  // signs those errors average out rather than add up, so the output's relative L2 error stays near 2^-11 whatever
  // the reduction length: 8 * 2^-11 (3.9e-3) is allowed on top of the FP32 tolerance.
  const double reference_tolerance =
      conformance::tolerance(pb) + (math_ == reference::MathMode::TF32 ? 8 * std::ldexp(1.0, -11) : 0.0);
  // Two implementations each within the tolerance of the truth are within twice it of each other.
  const double agree_tolerance = 2 * reference_tolerance;
  for (auto& lib : libraries_) {
    nlohmann::json v;
    auto add = [&](std::string ms, std::string algorithm, std::string check, std::string ratio) {
      out.cells.insert(out.cells.end(), {std::move(ms), std::move(algorithm), std::move(check), std::move(ratio)});
    };
    if (const std::string why = lib->unavailable_reason(); !why.empty()) {
      add("missing: " + why, "-", "-", "-");
      out.values[lib->name()] = {{"status", "missing"}, {"reason", why}};
      continue;
    }
    if (const std::string why = lib->unsupported_reason(pb, device_.info()); !why.empty()) {
      add("n/a: " + why, "-", "-", "-");
      out.values[lib->name()] = {{"status", "n/a"}, {"reason", why}};
      continue;
    }
    try {
      reference::SharedOperands shared = target.shared_operands();
      lib->prepare(pb, shared, math_);
      const std::vector<float> theirs = lib->run_and_read();
      // Against convtune's output everywhere, and against the float64 reference at sampled elements.
      const double vs_convtune = relative_l2(theirs, convtune_output);
      ConvOperands with_theirs = shared.host;
      float* written = pb.direction == Direction::Forward        ? with_theirs.y
                       : pb.direction == Direction::BackwardData ? with_theirs.x
                                                                 : with_theirs.w;
      std::vector<float> saved(written, written + theirs.size());
      std::copy(theirs.begin(), theirs.end(), written);
      const auto sampled = conformance::check_sampled(pb, with_theirs, 512, 43);
      std::copy(saved.begin(), saved.end(), written);  // convtune's output stays where it was
      const bool agrees = vs_convtune <= agree_tolerance && sampled.rel_l2_error <= reference_tolerance;
      const Timing t = lib->time(warmup, repeats);
      const double ratio = convtune_ms / t.median_ms;
      const std::string word = ratio > 1 ? "slower" : "faster";
      add(fmt::format("{:.3f}", t.median_ms), lib->algorithm(),
          fmt::format("{}{:.1e}", agrees ? "" : "DISAGREES ", vs_convtune), fmt::format(fmt::runtime(ratio >= 0.1 ? "{:.2f} {}" : "{:.2g} {}"), ratio, word));
      v = {{"status", agrees ? "ok" : "disagrees"},
           {"ms", t.median_ms},
           {"min_ms", t.min_ms},
           {"algorithm", lib->algorithm()},
           {"rel_l2_vs_convtune", vs_convtune},
           {"rel_l2_vs_reference_sampled", sampled.rel_l2_error},
           {"tolerance_vs_convtune", agree_tolerance},
           {"ratio_convtune_over_reference", ratio},
           {"convtune_is", word},
           {"runs_on", lib->runs_on_host() ? "host CPU" : device_.info().id}};
      out.values[lib->name()] = v;
      if (!agrees)
        out.failures.push_back(fmt::format("{} disagrees on {}: rel L2 {:.2e} from convtune's output (tolerance "
                                           "{:.2e}), {:.2e} from the float64 reference at sampled elements",
                                           lib->name(), pb.to_string(), vs_convtune, agree_tolerance,
                                           sampled.rel_l2_error));
    } catch (const Error& e) {
      add(fmt::format("FAILED: {}", e.what()), "-", "-", "-");
      out.values[lib->name()] = {{"status", "failed"}, {"reason", e.what()}};
      out.failures.push_back(fmt::format("{} on {}: {}", lib->name(), pb.to_string(), e.what()));
    }
  }
  return out;
}

}  // namespace convtune::cli
