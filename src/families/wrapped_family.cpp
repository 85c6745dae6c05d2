// The wrapped family's constraints and device as a wrapper's staging copies leave them (wrapped_family.h).
#include "src/families/wrapped_family.h"

namespace convtune::families {

DeviceInfo less_staging(const DeviceInfo& device, uint64_t staging) {
  const uint64_t limit = workspace_limit(device);
  return with_workspace_limit(device, limit > staging ? limit - staging : 0);
}

std::vector<Constraint> constraints_on_twin(const KernelFamily& inner, const Problem& twin, uint64_t staging) {
  std::vector<Constraint> list = inner.constraints(twin);
  for (Constraint& c : list) {
    c.holds = [holds = std::move(c.holds), twin, staging](const ConstraintContext& context) {
      const DeviceInfo device = less_staging(context.device, staging);
      return holds(ConstraintContext{context.config, twin, device});
    };
  }
  return list;
}

}  // namespace convtune::families
