// The fallback lookup over any set of entries (LookupResult and LookupOptions are public, convtune/tuning.h):
// exact -> nearest shape on this device -> same architecture -> same vendor -> the family's built-in default.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/tuning.h"
#include "src/tuning_db/shape_distance.h"

namespace convtune {

// One entry and the file it came from, as the lookup sees the databases.
struct LookupCandidate {
  const TuningEntry* entry;
  const std::string* origin;
};

// The lookup itself, over any set of entries. `kernel_versions` is both the set of families the caller
// can run and each one's current kernel version; entries of other families are ignored.
// The first tier (exact, nearest, architecture, vendor) with a usable entry answers. Within it, each family
// puts forward its nearest usable entry (smallest shape distance, then fastest), and the families compete by
// the GFLOP/s their entry reached on its own shape: the best estimate of how well each would run a shape none of
// them was tuned for, where comparing times of different shapes would not be fair. On an exact shape this is
// simply the fastest entry.
LookupResult lookup_tuning(const std::vector<LookupCandidate>& candidates, const Problem& problem,
                           const DeviceInfo& device, const KernelVersions& kernel_versions,
                           const LookupOptions& options = {});

}  // namespace convtune
