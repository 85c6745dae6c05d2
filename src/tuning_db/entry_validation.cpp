// Tuning entries against their family's declared parameters and candidate values.
#include "src/tuning_db/entry_validation.h"

#include <fmt/format.h>

#include <algorithm>

#include "convtune/extension/kernel_family.h"

namespace convtune {

std::string search_space_violation(const TuningEntry& entry) {
  const KernelFamily* family = nullptr;
  std::string names;
  for (const auto& f : kernel_families()) {
    if (f->name() == entry.family) family = f.get();
    names += fmt::format("{}{}", names.empty() ? "" : ", ", f->name());
  }
  if (!family) {
    return fmt::format("field 'family' is \"{}\": no kernel family of this convtune has that name (expected one of "
                       "{})", entry.family, names);
  }
  if (family->problem_kind() != entry.problem.kind()) {
    return fmt::format("field 'family' is {}, which computes {}, but the problem is {}", entry.family,
                       family->problem_kind() == Problem::Kind::Convolution ? "convolutions" : "matrix products",
                       entry.problem.is_conv() ? "a convolution" : "a matrix product");
  }
  for (const Parameter& p : family->parameters(entry.problem)) {
    const auto it = entry.parameters.find(p.name);
    if (it == entry.parameters.end()) continue;
    if (std::find(p.values.begin(), p.values.end(), it->second) != p.values.end()) continue;
    std::string allowed;
    for (int64_t v : p.values) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", v);
    // A value no search could have produced: running it would take another one in its place (the nearest candidate),
    // under this entry's name and time.
    return fmt::format("field 'parameters.{}' is {}: expected one of {} ({}'s declared values for this problem)",
                       p.name, it->second, allowed, entry.family);
  }
  return {};
}

}  // namespace convtune
