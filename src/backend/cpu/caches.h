// The CPU's data caches as the CPU kernels plan for them (block sizes, copies kept in L2, tiles in L1): read once
// from sysfs, narrowed by CONVTUNE_CPU_CACHES or force_cache_sizes(). Part of the CPU device's identity, so tuning
// results stay with the caches they were found on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace convtune::cpu {

struct CacheSizes {
  int64_t l1d = 0;  // bytes of one core's L1 data cache
  int64_t l2 = 0;   // bytes of one core's L2 (the L2 instance cpu0 belongs to)
  int64_t l3 = 0;   // bytes of the L3 cpu0 shares
};

// What this CPU reports (sysfs /sys/devices/system/cpu/cpu0/cache, else glibc's sysconf), or CONVTUNE_CPU_CACHES
// (read once) or force_cache_sizes()'s choice; 0 for a level nothing reports.
CacheSizes detected_cache_sizes();
// detected_cache_sizes() with every unknown level set to the developer host's (48 KiB, 2 MiB, 32 MiB), the caches
// the planners' thresholds were first measured on: what the CPU kernels plan for.
CacheSizes cache_sizes();

// "L1D,L2,L3", each a count of bytes with an optional K or M suffix (powers of 1024), e.g. "32K,512K,32M"; throws
// InvalidArgument naming the part that is not such a size.
CacheSizes parse_cache_sizes(std::string_view text);
// "48 KiB", "2 MiB"; "?" for 0.
std::string cache_text(int64_t bytes);

// Overrides CONVTUNE_CPU_CACHES for this process (std::nullopt: back to the environment or the CPU's). For tests:
// plans prepared before the call keep the blocks they were prepared with.
void force_cache_sizes(std::optional<CacheSizes> caches);

}  // namespace convtune::cpu
