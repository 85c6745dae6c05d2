// LookupResult: which tuned entry a problem gets on a device, and which fallback tier supplied it:
// exact -> nearest shape on this device -> same architecture -> same vendor -> the family's built-in default.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
  // Entries for the asked problem (exact shape) on this device or a fallback device that are stale (other
  // kernel source, other driver) and were not trusted: worth a retune.
  std::vector<SkippedEntry> stale;
  // Entries LookupOptions::accepts refused (parameters that do not fit the asked problem).
  std::vector<SkippedEntry> rejected;

  // One line for logs and `convtune` output, e.g. "nearest tuned shape N=1,C=64,... (distance 1) on
  // NVIDIA H100: implicit_gemm TILE_M=64,... 0.412 ms; 1 stale entry ignored (kernel source changed: ...)".
  std::string explain() const;
};

struct LookupOptions {
  // Whether a stored configuration can run the asked problem (the family's constraints, say); refused entries
  // are skipped, so a nearest shape never hands back parameters that do not fit. Unset: all are accepted.
  std::function<bool(const TuningEntry&)> accepts;
};

// One entry and the file it came from, as the lookup sees the databases.
struct LookupCandidate {
  const TuningEntry* entry;
  const std::string* origin;
};

// The lookup itself, over any set of entries. `source_hash_by_family` is both the set of families the caller
// can run and each one's current kernel-source hash; entries of other families are ignored. Within a tier the
// smallest shape distance wins, then the fastest time.
LookupResult lookup_tuning(const std::vector<LookupCandidate>& candidates, const ConvProblem& problem,
                           const DeviceInfo& device, const std::map<std::string, std::string>& source_hash_by_family,
                           const LookupOptions& options = {});

}  // namespace convtune
