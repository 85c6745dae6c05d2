// LookupResult: which tuned entry a problem gets on a device, and which fallback tier supplied it:
// exact -> nearest shape on this device -> same architecture -> same vendor -> the family's built-in default.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/tuning_db/shape_distance.h"
#include "src/tuning_db/tuning_entry.h"

namespace convtune {

enum class LookupTier {
  Exact,           // this device (fingerprint, so this driver), this exact problem
  Nearest,         // this device, the nearest comparable shape (see shape_distance.h)
  Architecture,    // another device of the same backend and architecture string; exact or nearest shape
  Vendor,          // another device of the same backend and vendor; exact or nearest shape
  BuiltInDefault,  // nothing usable: the caller uses its family's default configuration
};
std::string_view to_string(LookupTier tier);  // "exact", "nearest", "architecture", "vendor", "built-in default"

// An entry the lookup saw but did not use, and why.
struct SkippedEntry {
  TuningEntry entry;
  std::string origin;  // the file it came from
  std::string reason;
};

struct LookupResult {
  LookupTier tier = LookupTier::BuiltInDefault;
  std::optional<TuningEntry> entry;  // absent only for BuiltInDefault
  std::string origin;                // the file the entry came from
  double distance = 0;               // shape_distance(asked problem, entry->problem); 0 for an exact shape
  double max_distance = kMaxNearestShapeDistance;  // the farthest shape the lookup considered
  // What to run: the entry's parameters, or those LookupOptions::fit made of them for the asked problem.
  Config parameters;
  std::string fitted;  // what fitting changed ("SPLIT_K 32 -> 16"); empty when the entry's parameters fit as stored
  // Entries for the asked problem (exact shape) on this device or a fallback device that are stale (other
  // kernel source, other driver) and were not trusted: worth a retune.
  std::vector<SkippedEntry> stale;
  // Entries LookupOptions::fit refused (parameters that cannot be made to fit the asked problem).
  std::vector<SkippedEntry> rejected;

  // One line for logs and `convtune` output, e.g. "nearest tuned shape N=1,C=64,... (distance 1) on
  // NVIDIA H100: implicit_gemm TILE_M=64,... 0.412 ms; 1 stale entry ignored (kernel source changed: ...)".
  std::string explain() const;
};

struct LookupOptions {
  // The parameters a stored entry gives the asked problem: its own when they fit, else the closest ones that do
  // (see fit_config in convtune/plan.h), or nullopt when none can, and the entry is skipped. A nearest shape thus
  // never hands back parameters that do not run. Unset: every entry's parameters are taken as stored.
  std::function<std::optional<FittedConfig>(const TuningEntry&)> fit;
  // Tuned shapes farther than this (shape_distance) are not used at all (see kMaxNearestShapeDistance).
  double max_distance = kMaxNearestShapeDistance;
};

// One entry and the file it came from, as the lookup sees the databases.
struct LookupCandidate {
  const TuningEntry* entry;
  const std::string* origin;
};

// The lookup itself, over any set of entries. `source_hash_by_family` is both the set of families the caller
// can run and each one's current kernel-source hash; entries of other families are ignored.
// The first tier (exact, nearest, architecture, vendor) with a usable entry answers. Within it, each family
// puts forward its nearest usable entry (smallest shape distance, then fastest), and the families compete by
// the GFLOP/s their entry reached on its own shape: the best estimate of how well each would run a shape none of
// them was tuned for, where comparing times of different shapes would not be fair. On an exact shape this is
// simply the fastest entry.
LookupResult lookup_tuning(const std::vector<LookupCandidate>& candidates, const ConvProblem& problem,
                           const DeviceInfo& device, const std::map<std::string, std::string>& source_hash_by_family,
                           const LookupOptions& options = {});

}  // namespace convtune
