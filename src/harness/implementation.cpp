// PlanImplementation and the one check-then-time sequence every caller uses.
#include "src/harness/implementation.h"

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::harness {

std::string PlanImplementation::unsupported_reason(const Problem& problem, const DeviceInfo& unlimited) const {
  const Epilogue& epilogue = request_.epilogue;
  const DeviceInfo device = with_workspace_limit(unlimited, request_.workspace_limit);
  if (family_) return family_->unsupported_reason(problem, epilogue, device);
  if (!request_.family.empty()) return kernel_family(request_.family).unsupported_reason(problem, epilogue, device);
  std::string reasons;
  for (const auto& f : kernel_families()) {
    if (f->problem_kind() != problem.kind()) continue;
    const std::string why = f->unsupported_reason(problem, epilogue, device);
    if (why.empty()) return {};
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", f->name(), why);
  }
  return reasons.empty() ? "no kernel family computes it" : reasons;
}

void PlanImplementation::prepare(Workload& workload) {
  plan_.reset();  // the previous problem's workspace goes first
  workload_ = &workload;
  PlanRequest request = request_;
  request.problem = workload.problem();
  plan_ = std::make_unique<Plan>(family_ ? Plan::create(workload.device(), *family_, request)
                                         : Plan::create(workload.device(), request));
}

void PlanImplementation::run() {
  if (!plan_) throw Error("PlanImplementation::run before prepare");
  plan_->run(workload_->queue(), workload_->operands());
}

std::string PlanImplementation::algorithm() const {
  if (!plan_) return request_.family.empty() ? "auto" : request_.family;
  return fmt::format("{} ({})", plan_->describe(), to_string(plan_->tier()));
}

Check check_once(Implementation& implementation, Workload& workload, int samples, std::optional<double> tolerance) {
  try {
    workload.poison();
    implementation.run();
    implementation.collect_output();
    workload.queue().finish();
    const double tol = tolerance.value_or(harness::tolerance(workload.problem()) * implementation.error_factor());
    return samples > 0 ? workload.verify_sampled(samples, tol) : workload.verify_full(tol);
  } catch (const std::exception& e) {
    Check failed;
    failed.message = fmt::format("threw: {}", e.what());
    return failed;
  }
}

Timing time_runs(Implementation& implementation, Workload& workload, int warmup, int repeats) {
  return measure(workload.queue(), [&] { implementation.run(); }, warmup, repeats);
}

}  // namespace convtune::harness
