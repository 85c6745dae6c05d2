// Available host memory from /proc/meminfo and the cgroup (v2, then v1) limits.
#include "src/core/resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "convtune/error.h"

namespace convtune {

namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

// The first number in a small file, or kUnknown ("max" in cgroup v2 means no limit).
uint64_t read_number(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return kUnknown;
  uint64_t value = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return kUnknown;
    if (value > (kUnknown - 9) / 10) return kUnknown;
    value = value * 10 + static_cast<uint64_t>(ch - '0');
  }
  return value;
}

uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return kUnknown;
}

// Room left under a limit, kUnknown when there is no limit or it cannot be read.
uint64_t room(uint64_t limit, uint64_t used) {
  if (limit == kUnknown || used == kUnknown) return kUnknown;
  return limit > used ? limit - used : 0;
}

}  // namespace

uint64_t available_host_memory() {
  uint64_t available = mem_available();
  available = std::min(available, room(read_number("/sys/fs/cgroup/memory.max"),
                                       read_number("/sys/fs/cgroup/memory.current")));
  // cgroup v1 reports "no limit" as a huge number rather than "max"; room() then is simply huge.
  available = std::min(available, room(read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                                       read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes")));
  return available;
}

void require_host_memory(uint64_t bytes, const std::string& what) {
  if (bytes < kHostMemoryCheckThreshold) return;
  const uint64_t available = available_host_memory();
  if (available != kUnknown && bytes > available) {
    throw ResourceError(fmt::format("{} needs {} of host memory; {} is available", what, format_bytes(bytes),
                                    format_bytes(available)));
  }
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} bytes", bytes);
  const char* units[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1000 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", value, value < 10 ? 2 : value < 100 ? 1 : 0, units[unit]);
}

}  // namespace convtune
