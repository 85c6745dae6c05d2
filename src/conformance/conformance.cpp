// Conformance runs: each case x direction x target on a Workload checked in full, plus the adjoint identity.
#include "src/conformance/conformance.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "convtune/error.h"

namespace convtune::conformance {

namespace {

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace

harness::Check check_adjoint(harness::Implementation& impl, Device& device, const ConvProblem& problem, uint64_t seed) {
  // The same seed gives every direction's workload the same x, w and dy (operands 0, 1, 2 by position).
  harness::Check res;
  std::vector<float> outputs[3];
  const Direction directions[3] = {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter};
  std::vector<float> x, w, dy;
  try {
    for (int d = 0; d < 3; ++d) {
      harness::Workload workload(device, problem.with_direction(directions[d]), seed);
      impl.prepare(workload);
      workload.poison();
      impl.run();
      impl.collect_output();
      workload.queue().finish();
      workload.check_canaries();
      outputs[d] = workload.output();
      if (d == 0) x = workload.initial(0), w = workload.initial(1), dy = workload.initial(2);
    }
  } catch (const std::exception& e) {
    res.message = fmt::format("threw: {}", e.what());
    return res;
  }
  const double a = dot(outputs[0], dy), b = dot(x, outputs[1]), c = dot(w, outputs[2]);
  // Scale by the sum of |terms| so the check is relative to the magnitude actually summed.
  double scale = 0;
  for (size_t i = 0; i < outputs[0].size(); ++i) scale += std::abs(static_cast<double>(outputs[0][i]) * dy[i]);
  scale = std::max(scale, 1e-30);
  const double tol = 4 * harness::tolerance(problem.with_direction(Direction::Forward));
  res.rel_l2_error = std::max(std::abs(a - b), std::abs(a - c)) / scale;
  res.passed = std::isfinite(a) && std::isfinite(b) && std::isfinite(c) && res.rel_l2_error <= tol;
  res.message = fmt::format("<fwd,dy>={:.6g} <x,bwd_data>={:.6g} <w,bwd_filter>={:.6g}, rel diff {:.2e} (tolerance {:.2e})",
                            a, b, c, res.rel_l2_error, tol);
  return res;
}

harness::Check check_epilogue(harness::Implementation& impl, Device& device, const EpilogueCase& c, ElementType type,
                              uint64_t seed) {
  ConvProblem pb = c.problem.with_direction(Direction::Forward);
  pb.type = type;
  harness::Check res;
  if (!impl.set_epilogue(c.epilogue)) {
    res.message = "unsupported: no fused epilogues";
    return res;
  }
  try {
    if (const std::string why = impl.unsupported_reason(pb, device.info()); !why.empty()) {
      res.message = "unsupported: " + why;
    } else {
      harness::Workload workload(device, pb, seed, c.epilogue);
      impl.prepare(workload);
      res = harness::check_once(impl, workload, 0);
    }
  } catch (const std::exception& e) {
    res.message = fmt::format("threw: {}", e.what());
  }
  impl.set_epilogue({});
  return res;
}

Summary run(const std::vector<Target>& targets, const std::vector<Case>& cases, uint64_t seed, std::ostream* log) {
  Summary sum;
  std::vector<std::unique_ptr<harness::Implementation>> impls;
  for (const auto& t : targets) impls.push_back(t.make());
  uint64_t case_seed = seed;
  for (const Case& c : cases) {
    ++case_seed;
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = c.problem.with_direction(d);
      // One workload per device: its full reference is computed once for every target there.
      std::map<Device*, std::unique_ptr<harness::Workload>> workloads;
      for (size_t t = 0; t < targets.size(); ++t) {
        Device& device = *targets[t].device;
        if (const std::string why = impls[t]->unsupported_reason(pb, device.info()); !why.empty()) {
          ++sum.skipped;
          continue;
        }
        auto& workload = workloads[&device];
        if (!workload) workload = std::make_unique<harness::Workload>(device, pb, case_seed);
        ++sum.checks;
        harness::Check r;
        try {
          impls[t]->prepare(*workload);
          r = harness::check_once(*impls[t], *workload, 0);
        } catch (const std::exception& e) {
          r.message = fmt::format("threw: {}", e.what());
        }
        const std::string line = fmt::format("{} {} {} {}: {}", r.passed ? "ok  " : "FAIL", targets[t].name, c.name,
                                             to_string(d), r.message);
        if (r.passed) ++sum.passed;
        else sum.failures.push_back(line);
        if (log && !r.passed) *log << line << "\n";
      }
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      if (!impls[t]->unsupported_reason(c.problem, targets[t].device->info()).empty()) continue;
      ++sum.checks;
      const harness::Check r = check_adjoint(*impls[t], *targets[t].device, c.problem, case_seed);
      if (r.passed) ++sum.passed;
      else sum.failures.push_back(fmt::format("FAIL {} {} adjoint: {}", targets[t].name, c.name, r.message));
    }
    if (log) *log << fmt::format("conformance: {:<32} checked ({} checks so far, {} failed)\n", c.name, sum.checks, sum.failures.size());
  }
  return sum;
}

}  // namespace convtune::conformance
