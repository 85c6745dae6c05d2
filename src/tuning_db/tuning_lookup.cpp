// The fallback lookup: classify each entry into a tier, drop stale ones, pick each family's nearest that fits,
// let the families compete by GFLOP/s.
#include "src/tuning_db/tuning_lookup.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "src/tuning_db/shape_distance.h"

namespace convtune {

namespace {

// The tier an entry could serve in for this device and problem, ignoring staleness; nullopt when none.
std::optional<LookupTier> tier_of(const TuningEntry& e, const Problem& problem, const DeviceInfo& device) {
  const bool exact_shape = same_shape(e.problem, problem);
  if (!exact_shape && !comparable_shapes(e.problem, problem)) return std::nullopt;
  // Other drivers of this same device are matched here too, so they are reported as stale rather than
  // quietly serving as an "architecture" fallback.
  if (e.device.same_hardware(device)) return exact_shape ? LookupTier::Exact : LookupTier::Nearest;
  // The same chip through the other kernel backend (CUDA's entries for NVIDIA's OpenCL, or back): both compile the
  // same kernel sources, and the configurations carry. Measured on an H200: the 69 stride1 rows through OpenCL with
  // CUDA's entries against the built-in defaults, none slower by more than 2%, 7 faster by 5-23%. Served as the
  // architecture tier.
  if (e.device.same_chip_other_backend(device)) return LookupTier::Architecture;
  // Otherwise kernels built for one backend say little about the other: another chip of the architecture through
  // the other backend is not a fallback.
  if (e.device.backend != to_string(device.backend)) return std::nullopt;
  // A CPU family's register blocks, cache blocking and thread split belong to the CPU's ISA, caches and cores
  // (all in its fingerprint): entries never move from one CPU to another, whatever the vendor.
  if (device.backend == BackendKind::Cpu) return std::nullopt;
  if (!device.architecture.empty() && e.device.architecture == device.architecture) return LookupTier::Architecture;
  if (!device.vendor.empty() && e.device.vendor == device.vendor) return LookupTier::Vendor;
  return std::nullopt;
}

// The order in which the tiers are tried, with one exception to their order: an exact-shape entry of another device
// of this architecture comes before a nearest shape on this device. Without it, a tune of some layers on an H100
// (fft entries for alex2, u2, u6 and u8) serves alex3-alex5, u3-u5 and u9 as their nearest shapes, over the H200's
// exact entries for them (mostly winograd): u5 runs at 2.9x cuDNN's time instead of 0.9-1.0x. A shape's own tune on
// a sibling chip is a better guide to its family than a neighbour's tune.
int precedence(LookupTier tier, bool exact_shape) {
  switch (tier) {
    case LookupTier::Exact: return 0;
    case LookupTier::Architecture: return exact_shape ? 1 : 3;
    case LookupTier::Nearest: return 2;
    case LookupTier::Vendor: return 4;
    default: return 5;
  }
}

std::string short_text(const TuningEntry& e) {
  return fmt::format("{} {} {:.4g} ms", e.family, to_string(e.parameters), e.time_ms);
}

}  // namespace

LookupResult lookup_tuning(const std::vector<LookupCandidate>& candidates, const Problem& problem,
                           const DeviceInfo& device, const KernelVersions& kernel_versions,
                           const LookupOptions& options) {
  LookupResult result;
  result.max_distance = options.max_distance;
  struct Ranked {
    int precedence;
    LookupTier tier;
    const std::string* family;
    double distance;
    const LookupCandidate* candidate;
  };
  std::vector<Ranked> usable;
  for (const LookupCandidate& c : candidates) {
    const TuningEntry& e = *c.entry;
    const auto family = kernel_versions.find(e.family);
    if (family == kernel_versions.end()) continue;
    const std::optional<LookupTier> tier = tier_of(e, problem, device);
    if (!tier) continue;
    if (std::string reason = stale_reason(e, device, family->second); !reason.empty()) {
      if (same_shape(e.problem, problem)) result.stale.push_back({e, *c.origin, std::move(reason)});
      continue;
    }
    const double distance = shape_distance(problem, e.problem);
    if (distance > options.max_distance) continue;
    usable.push_back({precedence(*tier, same_shape(e.problem, problem)), *tier, &family->first, distance, &c});
  }
  // Precedence (the tier, see above), then family, then nearest, then fastest. Stable, so equal ranks keep file
  // order (the user database comes before shipped defaults).
  std::stable_sort(usable.begin(), usable.end(), [](const Ranked& a, const Ranked& b) {
    return std::tie(a.precedence, *a.family, a.distance, a.candidate->entry->time_ms) <
           std::tie(b.precedence, *b.family, b.distance, b.candidate->entry->time_ms);
  });
  // Each family's first entry that fits, in the first precedence where any family has one.
  struct Pick {
    const Ranked* ranked;
    FittedConfig fitted;
  };
  std::vector<Pick> picks;
  for (size_t i = 0; i < usable.size(); ++i) {
    const Ranked& r = usable[i];
    if (!picks.empty() && r.precedence != picks.front().ranked->precedence) break;
    if (!picks.empty() && *picks.back().ranked->family == *r.family) continue;
    const TuningEntry& e = *r.candidate->entry;
    std::optional<FittedConfig> fitted =
        options.fit ? options.fit(e) : std::optional<FittedConfig>(FittedConfig{e.parameters, {}});
    if (!fitted) {
      result.rejected.push_back({e, *r.candidate->origin, "its parameters cannot be made to fit this problem"});
      continue;
    }
    if (std::string why = options.refuse ? options.refuse(e, fitted->config) : std::string(); !why.empty()) {
      result.refused.push_back({e, *r.candidate->origin, std::move(why)});
      continue;
    }
    picks.push_back({&r, std::move(*fitted)});
  }
  if (picks.empty()) return result;
  // GFLOP/s on the entry's own shape, recomputed rather than read, so a hand-edited file cannot skew it.
  auto gflops = [](const Pick& p) {
    const TuningEntry& e = *p.ranked->candidate->entry;
    return e.time_ms > 0 ? e.problem.flops() / (e.time_ms * 1e6) : 0.0;
  };
  // max_element keeps the first of equals: the family order of the sort.
  const Pick& best = *std::max_element(picks.begin(), picks.end(),
                                       [&](const Pick& a, const Pick& b) { return gflops(a) < gflops(b); });
  result.tier = best.ranked->tier;
  result.entry = *best.ranked->candidate->entry;
  result.origin = *best.ranked->candidate->origin;
  result.distance = best.ranked->distance;
  result.parameters = best.fitted.config;
  result.fitted = best.fitted.changes;
  result.other_backend = result.entry->device.backend != to_string(device.backend);
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
      text = fmt::format("tuned on {} (same {}{}): {}",
                         other_backend ? fmt::format("{} through {}", entry->device.name, entry->device.backend)
                                       : entry->device.name,
                         other_backend ? std::string("chip") : std::string(to_string(tier)),
                         distance > 0 ? fmt::format(", nearest shape {} at distance {:g}",
                                                    entry->problem.to_string(), distance)
                                      : std::string(),
                         short_text(*entry));
      break;
    case LookupTier::Given:  // a configuration the caller named: plans say so themselves, no lookup ran
      text = "the caller's configuration";
      break;
    case LookupTier::BuiltInDefault:
      text = fmt::format("no usable tuning entry for this device, architecture or vendor within shape distance {:g}: "
                         "built-in default", max_distance);
      break;
  }
  if (!fitted.empty()) text += fmt::format("; fitted to this problem: {}", fitted);
  if (!stale.empty())
    text += fmt::format("; {} stale entr{} ignored ({})", stale.size(), stale.size() == 1 ? "y" : "ies",
                        stale.front().reason);
  if (!rejected.empty())
    text += fmt::format("; {} entr{} whose parameters cannot fit skipped", rejected.size(),
                        rejected.size() == 1 ? "y" : "ies");
  // The first refused entry in full (family, parameters, why), so the reader sees what the request cost.
  if (!refused.empty()) {
    const TuningEntry& e = refused.front().entry;
    text += fmt::format("; {} entr{} skipped, first {} [{}] tuned for {}: {}", refused.size(),
                        refused.size() == 1 ? "y" : "ies", e.family, to_string(e.parameters), e.problem.to_string(),
                        refused.front().reason);
  }
  return text;
}

}  // namespace convtune
