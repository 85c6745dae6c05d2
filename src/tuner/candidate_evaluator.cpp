// Compile-ahead, verify-then-time evaluation of tuner candidates.
#include "src/tuner/candidate_evaluator.h"

#include <fmt/format.h>

#include <limits>

#include "convtune/error.h"
#include "convtune/plan.h"

namespace convtune {

CandidateEvaluator::CandidateEvaluator(Device& device, const KernelFamily& family, const Problem& problem,
                                       CandidateOptions options)
    : device_(device), family_(family), problem_(problem), options_(options), workload_(device, problem, options.seed) {}

CandidateEvaluator::~CandidateEvaluator() {
  std::lock_guard lock(mutex_);
  for (auto& [key, future] : compiles_) future.wait();
}

void CandidateEvaluator::prefetch(const Config& config) {
  std::lock_guard lock(mutex_);
  const std::string key = to_string(config);
  if (compiles_.count(key)) return;
  compiles_[key] = std::async(std::launch::async, [this, config] {
                     ProgramSource source = family_.recipe(problem_, {}, config, device_.info()).source;
                     source.transient = true;  // most candidates lose: no cached binary for them
                     return device_.build(source);
                   }).share();
}

Evaluation CandidateEvaluator::evaluate(const Config& config) {
  // Holding the prefetched program keeps it loaded until the plan below takes it from the device's table.
  std::shared_ptr<Program> prefetched;
  std::unique_ptr<Plan> plan;
  try {
    std::shared_future<std::shared_ptr<Program>> compile;
    {
      std::lock_guard lock(mutex_);
      if (auto it = compiles_.find(to_string(config)); it != compiles_.end()) {
        compile = it->second;
        compiles_.erase(it);
      }
    }
    if (compile.valid()) prefetched = compile.get();
    PlanRequest request;
    request.problem = problem_;
    request.family = family_.name();
    request.config = config;
    request.workspace_limit = options_.workspace_limit;
    plan = std::make_unique<Plan>(Plan::create(device_, family_, request));
  } catch (const std::exception& e) {
    return Evaluation::failed(fmt::format("compile error: {}", e.what()));
  }
  Queue& queue = workload_.queue();
  const Operands operands = workload_.operands();
  try {
    workload_.poison();
    plan->run(queue, operands);
    queue.finish();
    workload_.check_canaries();
  } catch (const std::exception& e) {
    return Evaluation::failed(fmt::format("launch error: {}", e.what()));
  }
  const harness::Check check = workload_.verify_sampled(workload_.output(), options_.samples,
                                                        harness::tolerance(problem_) * plan->error_factor());
  if (!check.passed) return Evaluation::failed(fmt::format("wrong result: {}", check.message));

  try {
    auto run = [&] { plan->run(queue, operands); };
    Evaluation result(0.0);
    if (options_.abort_factor > 0 && best_ms_ > 0) {
      // One timed run first: a candidate far behind the best is not worth its repeats.
      const double once = measure(queue, run, 0, 1).median_ms;
      if (once > options_.abort_factor * best_ms_) {
        result = Evaluation(once);
        result.note = fmt::format("timed once: {:.1f}x the best so far", once / best_ms_);
        return result;
      }
    }
    result = Evaluation(measure(queue, run, options_.warmup, options_.repeats).median_ms);
    if (best_ms_ == 0 || *result.ms < best_ms_) best_ms_ = *result.ms;
    return result;
  } catch (const std::exception& e) {
    return Evaluation::failed(fmt::format("launch error: {}", e.what()));
  }
}

}  // namespace convtune
