// Runs each reference library next to convtune's plan on the same Workload and turns the outcome into cells and JSON.
#include "tools/convtune/against.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
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

Against::Outcome Against::compare(harness::Workload& workload, harness::Implementation& convtune,
                                  const std::vector<float>& convtune_output, int warmup, int repeats,
                                  const std::function<double()>& ceiling) {
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
  const double agree_tolerance = (1 + convtune.error_factor()) * reference_tolerance;

  // First every library is prepared and checked; the ones that computed the problem are timed afterwards, in
  // rounds with convtune. Per library: its cells so far, or its slot among the timed sides.
  struct Pending {
    std::vector<std::string> cells;  // filled when it is not timed (missing, n/a, failed)
    std::unique_ptr<harness::Workload> host;
    harness::Workload* workload = nullptr;
    double vs_convtune = 0;
    harness::Check sampled;
    bool agrees = false;
    int side = -1;
  };
  std::vector<Pending> pending(libraries_.size());
  // Each side finishes its work before the clock stops: timed on its workload's queue.
  auto side_of = [](harness::Implementation& impl, harness::Workload& w) {
    harness::RoundSide side;
    side.run = [&impl, &w] {
      impl.run();
      w.queue().finish();
    };
    side.time = [&impl, &w](const std::function<void()>&) { return w.queue().elapsed_ms([&] { impl.run(); }); };
    side.settle_after = impl.name() == "onednn";
    return side;
  };
  std::vector<harness::RoundSide> sides = {side_of(convtune, workload)};
  auto fail = [&](size_t i, const std::string& what) {
    auto& lib = libraries_[i];
    pending[i].cells = {fmt::format("FAILED: {}", what), "-", "-", "-"};
    pending[i].side = -1;
    out.values[lib->name()] = {{"status", "failed"}, {"reason", what}};
    out.failures.push_back(fmt::format("{} on {}: {}", lib->name(), pb.to_string(), what));
  };
  for (size_t i = 0; i < libraries_.size(); ++i) {
    auto& lib = libraries_[i];
    Pending& p = pending[i];
    if (const std::string why = lib->unavailable_reason(); !why.empty()) {
      p.cells = {"missing: " + why, "-", "-", "-"};
      out.values[lib->name()] = {{"status", "missing"}, {"reason", why}};
      continue;
    }
    if (const std::string why = lib->unsupported_reason(pb, device_.info()); !why.empty()) {
      p.cells = {"n/a: " + why, "-", "-", "-"};
      out.values[lib->name()] = {{"status", "n/a"}, {"reason", why}};
      continue;
    }
    try {
      // A library on the host gets a CPU workload with the same seed: the same input values.
      p.workload = &workload;
      if (lib->runs_on_host() && workload.device().info().backend != BackendKind::Cpu) {
        p.host = std::make_unique<harness::Workload>(Registry::instance().find("cpu"), pb, workload.seed());
        p.workload = p.host.get();
      }
      lib->prepare(*p.workload);
      p.workload->poison();
      lib->run();
      lib->collect_output();
      p.workload->queue().finish();
      p.workload->check_canaries();
      const std::vector<float> result = p.workload->output();
      // Against convtune's output everywhere, and against the float64 reference at sampled elements.
      p.vs_convtune = harness::relative_l2(result, convtune_output);
      p.sampled = p.workload->verify_sampled(result, 512, reference_tolerance);
      p.agrees = p.vs_convtune <= agree_tolerance && p.sampled.passed;
      p.side = static_cast<int>(sides.size());
      sides.push_back(side_of(*lib, *p.workload));
    } catch (const std::exception& e) {
      fail(i, e.what());
    }
  }

  // The ceiling probe goes last in each round: after oneDNN it runs untimed for 50 ms while the OpenMP workers
  // spin down, as any side there does, then one reading is kept. Its `samples` (wall ms) are not used.
  if (ceiling) {
    harness::RoundSide probe;
    probe.run = [&ceiling] { ceiling(); };
    // Convtune's side comes next, and a short layer ran at half speed right after the probe even with its one
    // untimed run (MobileNetV2's 144 -> 32 1x1, 16 images, two threads: 0.73-0.93 ms against 0.39-0.40 without the
    // probe or with 50 ms of its own runs first, 2026-12-04): it settles as after oneDNN.
    probe.settle_after = true;
    probe.time = [&ceiling, &out](const std::function<void()>&) {
      const auto start = std::chrono::steady_clock::now();
      out.ceiling_gflops.push_back(ceiling());
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    sides.push_back(std::move(probe));
  }
  harness::time_in_rounds(sides, warmup, repeats);
  if (!sides[0].failure.empty()) throw Error("convtune's plan failed while timed: " + sides[0].failure);
  out.convtune_samples = sides[0].samples;
  const double convtune_ms = harness::median_ms(sides[0].samples);

  for (size_t i = 0; i < libraries_.size(); ++i) {
    auto& lib = libraries_[i];
    Pending& p = pending[i];
    if (p.side >= 0) {
      const harness::RoundSide& side = sides[static_cast<size_t>(p.side)];
      if (!side.failure.empty()) {
        fail(i, side.failure);
      } else {
        const double ms = harness::median_ms(side.samples);
        const double min_ms = *std::min_element(side.samples.begin(), side.samples.end());
        const double ratio = convtune_ms / ms;
        const std::string word = ratio > 1 ? "slower" : "faster";
        p.cells = {fmt::format("{:.3f}", ms), lib->algorithm(),
                   fmt::format("{}{:.1e}", p.agrees ? "" : "DISAGREES ", p.vs_convtune),
                   fmt::format(fmt::runtime(ratio >= 0.1 ? "{:.2f} {}" : "{:.2g} {}"), ratio, word)};
        out.values[lib->name()] = {{"status", p.agrees ? "ok" : "disagrees"},
                                   {"ms", ms},
                                   {"min_ms", min_ms},
                                   {"algorithm", lib->algorithm()},
                                   {"rel_l2_vs_convtune", p.vs_convtune},
                                   {"rel_l2_vs_reference_sampled", p.sampled.rel_l2_error},
                                   {"tolerance_vs_convtune", agree_tolerance},
                                   {"ratio_convtune_over_reference", ratio},
                                   {"convtune_is", word},
                                   {"runs_on", p.workload->device().info().id}};
        if (!p.agrees)
          out.failures.push_back(fmt::format("{} disagrees on {}: rel L2 {:.2e} from convtune's output (tolerance "
                                             "{:.2e}), {:.2e} from the float64 reference at sampled elements",
                                             lib->name(), pb.to_string(), p.vs_convtune, agree_tolerance,
                                             p.sampled.rel_l2_error));
      }
    }
    out.cells.insert(out.cells.end(), p.cells.begin(), p.cells.end());
  }
  return out;
}

}  // namespace convtune::cli
