// Test helpers over the checking harness: run a family's plan (or the plan's own choice) on a Workload and check it
// against the float64 reference in full, and the reference output of a problem's workload inputs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "convtune/plan.h"
#include "src/backend/cpu/reference.h"
#include "src/harness/implementation.h"

namespace convtune::testing_support {

inline harness::Check check_plan(Device& device, const Problem& problem, const std::string& family,
                                 const std::optional<Config>& config, uint64_t seed, const Epilogue& epilogue = {}) {
  harness::Workload workload(device, problem, seed);
  PlanRequest request;
  request.family = family;
  request.config = config;
  request.epilogue = epilogue;
  harness::PlanImplementation impl(request);
  try {
    impl.prepare(workload);
  } catch (const std::exception& e) {
    harness::Check failed;
    failed.message = std::string("prepare threw: ") + e.what();
    return failed;
  }
  return harness::check_once(impl, workload, 0);
}

// The float64 reference's written operand for the inputs a Workload of `problem` and `seed` holds (operands in
// Problem::operand order: x, w, y or a, b, c).
struct ReferenceData {
  std::vector<float> operands[Problem::kOperands];
  std::vector<float> expected;
};
inline ReferenceData reference_data(const Problem& problem, uint64_t seed) {
  ReferenceData d;
  for (int i = 0; i < Problem::kOperands; ++i)
    d.operands[i] = harness::random_values(problem.operand(i).elements, seed * 3 + static_cast<uint64_t>(i) + 1);
  std::vector<float> out = d.operands[problem.written_operand()];
  cpu::HostOperands host;
  for (int i = 0; i < Problem::kOperands; ++i) host.data[static_cast<size_t>(i)] = d.operands[i].data();
  host.data[static_cast<size_t>(problem.written_operand())] = out.data();
  cpu::compute_reference(problem, host);
  d.expected = out;
  return d;
}

}  // namespace convtune::testing_support
