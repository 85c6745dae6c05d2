// Fuzz harness: problem descriptions (--layer, --gemm, suite lines, database entries, tune logs: convolutions and
// "gemm:" matrix products) through parse_any_problem and validate, then every family's support check, default
// configuration and launch recipe on a GPU-like device.
// Properties: only InvalidArgument escapes; an accepted problem has outputs, round-trips through its text form,
// and no family plans more launch steps or workspace than it declares.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "convtune/problem.h"
#include "tests/support/hopper_device.h"

namespace {

// Far above what any family plans for a real layer; a recipe beyond it is a resource bug.
constexpr size_t kMaxSteps = 20000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convtune;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Problem problem;
  try {
    problem = parse_any_problem(text);
  } catch (const InvalidArgument&) {
    return 0;
  }
  for (int i = 0; i < Problem::kOperands; ++i)
    if (problem.operand(i).elements <= 0) __builtin_trap();
  if (!(problem.flops() > 0)) __builtin_trap();
  if (problem.is_conv() && (problem.conv().p() <= 0 || problem.conv().q() <= 0)) __builtin_trap();
  if (!(parse_any_problem(problem.to_string()) == problem)) __builtin_trap();

  static const DeviceInfo device = test::described_hopper();
  std::vector<Problem> variants;
  if (problem.is_conv()) {
    for (Direction direction : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      variants.push_back(problem.conv().with_direction(direction));
  } else {
    variants.push_back(problem);
  }
  for (const Problem& pb : variants) {
    for (const auto& family : kernel_families()) {
      if (!family->unsupported_reason(pb, {}, device).empty()) continue;
      const Config config = family->default_config(pb, device);
      if (!config_problem(*family, config, pb, device).empty()) continue;  // Plan::create names the constraint
      const KernelRecipe recipe = family->recipe(pb, {}, config, device);
      if (recipe.steps.size() > kMaxSteps) __builtin_trap();
      if (recipe.workspace_bytes > device.global_memory_bytes) __builtin_trap();
    }
  }
  return 0;
}
