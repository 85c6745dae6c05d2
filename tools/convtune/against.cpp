// Runs each reference library next to convtune's plan on the same Workload and turns the outcome into cells and JSON.
#include "tools/convtune/against.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "convtune/error.h"

namespace convtune::cli {

std::string reference_label(const reference::ReferenceLibrary& library) {
  return library.runs_on_host() ? library.name() + " CPU" : library.name();
}

Against::Against(const std::vector<std::string>& names, Precision precision, const Device& device)
    : precision_(precision), device_(device) {
  const MathMode math = precision.math;
  for (const auto& name : names) {
    for (const auto& existing : libraries_)
      if (existing->name() == name) throw InvalidArgument(fmt::format("--against names '{}' twice", name));
    libraries_.push_back(reference::make_reference_library(name));
    // The libraries have no split-TF32 mode (3xTF32 is FP32-accurate) and no declared-bound mode (fp32-fast
    // multiplies in FP32): beside both they run their FP32 (FMA) math.
    libraries_.back()->set_math(math == MathMode::TF32 ? MathMode::TF32 : MathMode::FP32);
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

Against::Outcome Against::compare(harness::Workload& workload, const std::vector<float>& convtune_output,
                                  double convtune_error_factor, double convtune_ms, int warmup, int repeats) {
  Outcome out;
  const Problem& pb = workload.problem();
  // FP32: the conformance tolerance (8 unit roundoffs of FP32 times the square root of the reduction length).
  // TF32 rounds both inputs to 10 mantissa bits, so each product is off by up to 2^-10 relative; with random
  // signs those errors average out rather than add up, so the output's relative L2 error stays near 2^-11 whatever
  // the reduction length: 8 * 2^-11 (3.9e-3) is allowed on top of the FP32 tolerance.
  const double reference_tolerance =
      harness::tolerance(pb) + (precision_.math == MathMode::TF32 ? 8 * std::ldexp(1.0, -11) : 0.0);
  // Two implementations each within their tolerance of the truth are within the sum of both of each other; convtune's
  // is the library's times its plan's declared error factor (Winograd's alpha 8 in fp32-fast: 4).
  const double agree_tolerance = (1 + convtune_error_factor) * reference_tolerance;
  for (auto& lib : libraries_) {
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
      // A library on the host gets a CPU workload with the same seed: the same input values.
      std::unique_ptr<harness::Workload> host;
      harness::Workload* theirs = &workload;
      if (lib->runs_on_host() && workload.device().info().backend != BackendKind::Cpu) {
        host = std::make_unique<harness::Workload>(Registry::instance().find("cpu"), pb, workload.seed());
        theirs = host.get();
      }
      lib->prepare(*theirs);
      theirs->poison();
      lib->run();
      lib->collect_output();
      theirs->queue().finish();
      theirs->check_canaries();
      const std::vector<float> result = theirs->output();
      // Against convtune's output everywhere, and against the float64 reference at sampled elements.
      const double vs_convtune = harness::relative_l2(result, convtune_output);
      const harness::Check sampled = theirs->verify_sampled(result, 512, reference_tolerance);
      const bool agrees = vs_convtune <= agree_tolerance && sampled.passed;
      const Timing t = harness::time_runs(*lib, *theirs, warmup, repeats);
      const double ratio = convtune_ms / t.median_ms;
      const std::string word = ratio > 1 ? "slower" : "faster";
      add(fmt::format("{:.3f}", t.median_ms), lib->algorithm(),
          fmt::format("{}{:.1e}", agrees ? "" : "DISAGREES ", vs_convtune),
          fmt::format(fmt::runtime(ratio >= 0.1 ? "{:.2f} {}" : "{:.2g} {}"), ratio, word));
      out.values[lib->name()] = {{"status", agrees ? "ok" : "disagrees"},
                                 {"ms", t.median_ms},
                                 {"min_ms", t.min_ms},
                                 {"algorithm", lib->algorithm()},
                                 {"rel_l2_vs_convtune", vs_convtune},
                                 {"rel_l2_vs_reference_sampled", sampled.rel_l2_error},
                                 {"tolerance_vs_convtune", agree_tolerance},
                                 {"ratio_convtune_over_reference", ratio},
                                 {"convtune_is", word},
                                 {"runs_on", theirs->device().info().id}};
      if (!agrees)
        out.failures.push_back(fmt::format("{} disagrees on {}: rel L2 {:.2e} from convtune's output (tolerance "
                                           "{:.2e}), {:.2e} from the float64 reference at sampled elements",
                                           lib->name(), pb.to_string(), vs_convtune, agree_tolerance,
                                           sampled.rel_l2_error));
    } catch (const std::exception& e) {
      add(fmt::format("FAILED: {}", e.what()), "-", "-", "-");
      out.values[lib->name()] = {{"status", "failed"}, {"reason", e.what()}};
      out.failures.push_back(fmt::format("{} on {}: {}", lib->name(), pb.to_string(), e.what()));
    }
  }
  return out;
}

}  // namespace convtune::cli
