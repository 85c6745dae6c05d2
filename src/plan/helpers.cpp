// The one-call helpers of convtune.h: version, devices by name, compute() on host arrays with cached plans.
#include <fmt/format.h>

#include <map>
#include <mutex>

#include "convtune/convtune.h"

#ifndef CONVTUNE_VERSION
#define CONVTUNE_VERSION "0.1.0"
#endif

namespace convtune {

std::string_view version() { return CONVTUNE_VERSION; }

std::string_view built_backends() {
  static const std::string text = [] {
    std::string s = "cpu";
#ifdef CONVTUNE_WITH_OPENCL
    s += " opencl";
#endif
#ifdef CONVTUNE_WITH_CUDA
    s += " cuda";
#endif
    return s;
  }();
  return text;
}

Device& device(std::string_view spec) { return Registry::instance().find(spec); }

void compute(Device& device, const Problem& problem, const std::array<float*, Problem::kOperands>& host) {
  problem.validate();
  // Plans compile once per problem and device; later calls reuse them.
  static std::mutex mutex;
  static std::map<std::pair<Device*, std::string>, std::unique_ptr<Plan>> plans;
  const Plan* plan = nullptr;
  {
    std::lock_guard lock(mutex);
    auto& slot = plans[{&device, problem.to_string()}];
    if (!slot) {
      PlanRequest request;
      request.problem = problem;
      slot = std::make_unique<Plan>(Plan::create(device, request));
    }
    plan = slot.get();
  }
  Queue& queue = device.queue();
  std::unique_ptr<Buffer> buffers[Problem::kOperands];
  for (int i = 0; i < Problem::kOperands; ++i) {
    const OperandInfo info = problem.operand(i);
    if (!host[static_cast<size_t>(i)]) {
      throw InvalidArgument(fmt::format("compute {}: operand {} is null", problem.to_string(), info.name));
    }
    const size_t bytes = static_cast<size_t>(info.elements) * sizeof(float);
    buffers[i] = device.allocate(bytes);
    // The written operand goes up too: a GEMM's padded rows (ldc > N) come back as they were.
    queue.write(*buffers[i], host[static_cast<size_t>(i)], bytes);
  }
  plan->run(queue, {buffers[0].get(), buffers[1].get(), buffers[2].get()});
  const int written = problem.written_operand();
  queue.read(*buffers[written], host[static_cast<size_t>(written)],
             static_cast<size_t>(problem.operand(written).elements) * sizeof(float));
}

}  // namespace convtune
