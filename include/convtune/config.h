// Configurations: a family's parameter values, as plans report them and callers pass them (PlanRequest::config,
// the tuning database, --config). User API: naming a configuration needs nothing of how families are written.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace convtune {

// One parameter assignment: name -> value. Sorted, so it prints and hashes the same everywhere. This is the form
// configurations take at the edges (tuning database, --config, logs); families read it into their own typed
// parameter struct once (see src/families/parameter_table.h).
using Config = std::map<std::string, int64_t>;
std::string to_string(const Config& config);  // "TILE_K=8,THREADS_M=16"
Config parse_config(std::string_view text);    // the inverse; throws InvalidArgument

// A configuration made to fit a problem other than the one it was tuned for, and what was changed
// ("SPLIT_K 32 -> 16"; empty when it fit as it was). See fit_config in convtune/extension/kernel_family.h.
struct FittedConfig {
  Config config;
  std::string changes;
};

}  // namespace convtune
