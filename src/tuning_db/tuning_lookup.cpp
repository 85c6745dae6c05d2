// The fallback lookup: classify each entry into a tier, drop stale and refused ones, rank what is left.
#include "src/tuning_db/tuning_lookup.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "src/tuning_db/shape_distance.h"

namespace convtune {

std::string_view to_string(LookupTier tier) {
  switch (tier) {
    case LookupTier::Exact: return "exact";
    case LookupTier::Nearest: return "nearest";
    case LookupTier::Architecture: return "architecture";
    case LookupTier::Vendor: return "vendor";
    case LookupTier::BuiltInDefault: return "built-in default";
  }
  return "?";
}

namespace {

// The tier an entry could serve in for this device and problem, ignoring staleness; nullopt when none.
std::optional<LookupTier> tier_of(const TuningEntry& e, const ConvProblem& problem, const DeviceInfo& device) {
  const bool exact_shape = e.problem == problem;
  if (!exact_shape && !comparable_shapes(e.problem, problem)) return std::nullopt;
  // Other drivers of this same device are matched here too, so they are reported as stale rather than
  // quietly serving as an "architecture" fallback.
  if (e.device.same_hardware(device)) return exact_shape ? LookupTier::Exact : LookupTier::Nearest;
  // Kernels built for one backend say little about the other, even on the same chip.
  if (e.device.backend != to_string(device.backend)) return std::nullopt;
  if (!device.architecture.empty() && e.device.architecture == device.architecture) return LookupTier::Architecture;
  if (!device.vendor.empty() && e.device.vendor == device.vendor) return LookupTier::Vendor;
  return std::nullopt;
}

std::string short_text(const TuningEntry& e) {
  return fmt::format("{} {} {:.4g} ms", e.family, to_string(e.parameters), e.time_ms);
}

}  // namespace

LookupResult lookup_tuning(const std::vector<LookupCandidate>& candidates, const ConvProblem& problem,
                           const DeviceInfo& device, const std::map<std::string, std::string>& source_hash_by_family,
                           const LookupOptions& options) {
  LookupResult result;
  struct Ranked {
    std::tuple<LookupTier, double, double> rank;  // tier, shape distance, time
    const LookupCandidate* candidate;
  };
  std::vector<Ranked> usable;
  for (const LookupCandidate& c : candidates) {
    const TuningEntry& e = *c.entry;
    const auto family = source_hash_by_family.find(e.family);
    if (family == source_hash_by_family.end()) continue;
    const std::optional<LookupTier> tier = tier_of(e, problem, device);
    if (!tier) continue;
    if (std::string reason = stale_reason(e, device, family->second); !reason.empty()) {
      if (e.problem == problem) result.stale.push_back({e, *c.origin, std::move(reason)});
      continue;
    }
    usable.push_back({{*tier, shape_distance(problem, e.problem), e.time_ms}, &c});
  }
  // Stable, so equal ranks keep file order (the user database comes before shipped defaults).
  std::stable_sort(usable.begin(), usable.end(), [](const Ranked& a, const Ranked& b) { return a.rank < b.rank; });
  for (const Ranked& r : usable) {
    const LookupCandidate& c = *r.candidate;
    // Only entries ranked above the winner are checked, so `rejected` lists exactly those that would have won.
    if (options.accepts && !options.accepts(*c.entry)) {
      result.rejected.push_back({*c.entry, *c.origin, "its parameters do not fit this problem on this device"});
      continue;
    }
    result.tier = std::get<0>(r.rank);
    result.entry = *c.entry;
    result.origin = *c.origin;
    result.distance = std::get<1>(r.rank);
    break;
  }
  return result;
}

std::string LookupResult::explain() const {
  std::string text;
  switch (tier) {
    case LookupTier::Exact:
      text = fmt::format("tuned for this problem on this device: {}", short_text(*entry));
      break;
    case LookupTier::Nearest:
      text = fmt::format("nearest tuned shape {} (distance {:g}) on this device: {}", entry->problem.to_string(),
                         distance, short_text(*entry));
      break;
    case LookupTier::Architecture:
    case LookupTier::Vendor:
      text = fmt::format("tuned on {} (same {}{}): {}", entry->device.name, to_string(tier),
                         distance > 0 ? fmt::format(", nearest shape {} at distance {:g}",
                                                    entry->problem.to_string(), distance)
                                      : std::string(),
                         short_text(*entry));
      break;
    case LookupTier::BuiltInDefault:
      text = "no usable tuning entry for this device, architecture or vendor: built-in default";
      break;
  }
  if (!stale.empty())
    text += fmt::format("; {} stale entr{} ignored ({})", stale.size(), stale.size() == 1 ? "y" : "ies",
                        stale.front().reason);
  if (!rejected.empty())
    text += fmt::format("; {} entr{} whose parameters do not fit skipped", rejected.size(),
                        rejected.size() == 1 ? "y" : "ies");
  return text;
}

}  // namespace convtune
