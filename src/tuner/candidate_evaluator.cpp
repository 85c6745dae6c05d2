// Compile-ahead, verify-then-time evaluation of tuner candidates.
#include "src/tuner/candidate_evaluator.h"

#include <fmt/format.h>

#include <limits>

#include "convtune/error.h"
#include "convtune/plan.h"

namespace convtune {

CandidateEvaluator::CandidateEvaluator(Device& device, const KernelFamily& family, const ConvProblem& problem,
                                       CandidateOptions options)
    : device_(device),
      family_(family),
      problem_(problem),
      options_(options),
      x_({problem.x_elements()}),
      w_({problem.w_elements()}),
      y_({problem.y_elements()}) {
  // Every operand random: the written one is poisoned before each run, the others are the inputs.
  x_.fill_random(options.seed), w_.fill_random(options.seed + 1), y_.fill_random(options.seed + 2);
  reference_ = std::make_unique<conformance::SampledReference>(problem, ConvOperands{x_.data(), w_.data(), y_.data()},
                                                               options.samples, options.seed + 3);
  Queue& queue = device.queue();
  dx_ = device.allocate(x_.bytes()), dw_ = device.allocate(w_.bytes()), dy_ = device.allocate(y_.bytes());
  queue.write(*dx_, x_.data(), x_.bytes());
  queue.write(*dw_, w_.data(), w_.bytes());
  queue.write(*dy_, y_.data(), y_.bytes());
  queue.finish();
  poison_.assign(static_cast<size_t>(problem.written_elements()), std::numeric_limits<float>::quiet_NaN());
  readback_.resize(poison_.size());
}

CandidateEvaluator::~CandidateEvaluator() {
  std::lock_guard lock(mutex_);
  for (auto& [key, future] : compiles_) future.wait();
}

Buffer& CandidateEvaluator::written_buffer() {
  return problem_.direction == Direction::Forward        ? *dy_
         : problem_.direction == Direction::BackwardData ? *dx_
                                                         : *dw_;
}

void CandidateEvaluator::prefetch(const Config& config) {
  std::lock_guard lock(mutex_);
  const std::string key = to_string(config);
  if (compiles_.count(key)) return;
  compiles_[key] = std::async(std::launch::async, [this, config] {
                     return device_.build(family_.recipe(problem_, {}, config, device_.info()).source);
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
    plan = std::make_unique<Plan>(Plan::create(device_, family_, {problem_, {}, family_.name(), config}));
  } catch (const std::exception& e) {
    return Evaluation::failed(fmt::format("compile error: {}", e.what()));
  }
  Queue& queue = device_.queue();
  const DeviceOperands operands{dx_.get(), dw_.get(), dy_.get(), nullptr};
  Buffer& out = written_buffer();
  try {
    queue.write(out, poison_.data(), poison_.size() * sizeof(float));
    plan->run(queue, operands);
    queue.read(out, readback_.data(), readback_.size() * sizeof(float));
    queue.finish();
  } catch (const std::exception& e) {
    return Evaluation::failed(fmt::format("launch error: {}", e.what()));
  }
  const conformance::Result check = reference_->check(readback_.data());
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
