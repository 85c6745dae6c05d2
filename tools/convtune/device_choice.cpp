// --backend/--device resolution shared by the CLI commands.
#include "tools/convtune/device_choice.h"

#include <fmt/format.h>

#include <iostream>

#include "convtune/extension/kernel_family.h"

namespace convtune::cli {

bool has_convolutions(const Device& device) {
  return device.info().backend == BackendKind::Cpu || (device.info().can_run_kernels && !kernel_families().empty());
}

Device& choose_device(const std::string& spec, std::string_view command) {
  Registry& registry = Registry::instance();
  if (spec != "best") return registry.find(spec);
  Device& best = registry.best();
  if (has_convolutions(best)) return best;
  std::cerr << fmt::format("{}: the best device, {} ({}), has no convolution kernels; falling back to the CPU "
                           "backend\n", command, best.info().id, best.info().name);
  return registry.find("cpu");
}

}  // namespace convtune::cli
