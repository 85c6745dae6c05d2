// PlanImplementation and the one check-then-time sequence every caller uses.
#include "src/harness/implementation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"

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
  request.epilogue = workload.epilogue();
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

namespace {

// A side whose last timed run took less than this runs once untimed right before each timed run; above it that
// costs nothing measurable.
constexpr double kRewarmBelowMs = 50;
// oneDNN's OpenMP workers spin for 7-11 ms of CPU after each of its calls (libgomp's wait policy): timed right
// after it, convtune's threads share the cores with them (alex1 forward reads 1.28 of oneDNN's time so, 1.07-1.10
// on idle cores). So the side after it runs untimed this long first. Not idle: with a 50 ms sleep before each timed
// run, convtune's fmnist1 runs read 1.7-2x slower even after three untimed runs (a VM's cores left idle that long
// come back slowly), while the side timed right after convtune sees no such gap. The same after `bench --against`'s
// FMA ceiling probe on the CPU: the 0.4 ms layer after it read 0.73-0.93 ms with one untimed run first, 0.39-0.40
// with 50 ms of them.
constexpr double kSpinDownMs = 50;
// Sides whose runs take longer skip that: the workers' spin is then a few percent of one run at most.
constexpr double kLongRunMs = 200;

}  // namespace

void time_in_rounds(std::vector<RoundSide>& sides, int warmup, int repeats) {
  using Clock = std::chrono::steady_clock;
  for (RoundSide& side : sides) {
    try {
      for (int i = 0; i < warmup; ++i) side.run();
    } catch (const std::exception& e) {
      side.failure = e.what();
    }
  }
  const RoundSide* previous = nullptr;
  for (int round = 0; round < repeats; ++round) {
    for (RoundSide& side : sides) {
      if (!side.failure.empty()) continue;
      try {
        const double last = side.samples.empty() ? 0 : side.samples.back();
        const bool spin_down = previous && previous != &side && previous->settle_after && last < kLongRunMs;
        if (spin_down || last < kRewarmBelowMs) {
          const auto start = Clock::now();
          do {
            side.run();
          } while (spin_down && std::chrono::duration<double, std::milli>(Clock::now() - start).count() < kSpinDownMs);
        }
        side.samples.push_back(side.time(side.run));
      } catch (const std::exception& e) {
        side.failure = e.what();
      }
      previous = &side;
    }
  }
}

double median_ms(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
}

}  // namespace convtune::harness
