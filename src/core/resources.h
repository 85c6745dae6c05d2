// Checked resources: before a large allocation, the bytes it needs are compared with the memory this process can
// still get, so an impossible request ends in a message naming both instead of std::bad_alloc or the OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace convtune {

// Smaller requests are not checked: reading /proc costs more than they risk.
inline constexpr uint64_t kHostMemoryCheckThreshold = uint64_t{64} << 20;

// Bytes of memory this process can still allocate: the smaller of the kernel's MemAvailable and the room left
// under the cgroup's memory limit (containers); UINT64_MAX when neither can be read.
uint64_t available_host_memory();

// Throws ResourceError ("x (N*C*H*W) needs 4.7 GB of host memory; 2.1 GB is available") when `bytes` exceeds the
// available host memory; `what` names the allocation. Requests below kHostMemoryCheckThreshold pass unchecked.
void require_host_memory(uint64_t bytes, const std::string& what);

// "4.70 GB" / "512 MB" / "900 bytes": sizes in messages, in powers of 1000 like df -H.
std::string format_bytes(uint64_t bytes);

}  // namespace convtune
