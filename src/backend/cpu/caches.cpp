// The CPU's data cache sizes for the CPU kernels' planners: sysfs, sysconf, CONVTUNE_CPU_CACHES or force_cache_sizes().
#include "src/backend/cpu/caches.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

#include "convtune/error.h"
#include "src/core/environment.h"

namespace convtune::cpu {

namespace {

std::mutex caches_mutex;
std::optional<CacheSizes> forced;

// One size: digits, then nothing, K or M.
std::optional<int64_t> parse_size(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value < 0 || end == text.data()) return std::nullopt;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  if (unit.empty()) return value;
  if (unit == "K" || unit == "k") return value << 10;
  if (unit == "M" || unit == "m") return value << 20;
  return std::nullopt;
}

// Bytes of cpu0's data or unified cache of `level` as the kernel describes it in sysfs
// (/sys/devices/system/cpu/cpu0/cache/index*/: level, type, size such as "32K"), else glibc's sysconf value
// `fallback` (0 when it has none). sysfs first: on an AMD EPYC (Zen 3, KVM) sysconf's L3 read 256 MiB where the
// cache is 32 MiB.
int64_t cache_bytes(int level, int fallback) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    std::ifstream level_in(dir + "level"), type_in(dir + "type"), size_in(dir + "size");
    int found_level = 0;
    std::string type, size;
    if (!(level_in >> found_level) || !(type_in >> type) || !(size_in >> size)) continue;
    if (found_level != level || type == "Instruction") continue;
    if (const auto bytes = parse_size(size); bytes && *bytes > 0) return *bytes;
  }
  const long value = sysconf(fallback);
  return value > 0 ? value : 0;
}

std::optional<CacheSizes> from_environment() {
  static const std::optional<CacheSizes> value = parsed_variable<CacheSizes>("CONVTUNE_CPU_CACHES", parse_cache_sizes);
  return value;
}

}  // namespace

CacheSizes parse_cache_sizes(std::string_view text) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (parts.size() != 3)
    throw InvalidArgument(fmt::format("cache sizes '{}': expected three sizes L1D,L2,L3 such as 32K,512K,32M", text));
  int64_t bytes[3];
  const char* names[3] = {"L1D", "L2", "L3"};
  for (int i = 0; i < 3; ++i) {
    const auto value = parse_size(parts[static_cast<size_t>(i)]);
    if (!value)
      throw InvalidArgument(fmt::format("cache sizes '{}': {} '{}' is not a size: expected a count of bytes, "
                                        "optionally followed by K or M",
                                        text, names[i], parts[static_cast<size_t>(i)]));
    bytes[i] = *value;
  }
  return {bytes[0], bytes[1], bytes[2]};
}

std::string cache_text(int64_t bytes) {
  if (bytes <= 0) return "?";
  // As the fingerprint has always written them (whole KiB below a MiB boundary), so tuned entries keep matching.
  return bytes % (1 << 20) == 0 ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} KiB", bytes >> 10);
}

CacheSizes detected_cache_sizes() {
  {
    std::lock_guard lock(caches_mutex);
    if (forced) return *forced;
  }
  if (const auto env = from_environment()) return *env;
  static const CacheSizes cpu = {cache_bytes(1, _SC_LEVEL1_DCACHE_SIZE), cache_bytes(2, _SC_LEVEL2_CACHE_SIZE),
                                 cache_bytes(3, _SC_LEVEL3_CACHE_SIZE)};
  return cpu;
}

CacheSizes cache_sizes() {
  CacheSizes c = detected_cache_sizes();
  if (c.l1d <= 0) c.l1d = int64_t{48} << 10;
  if (c.l2 <= 0) c.l2 = int64_t{2} << 20;
  if (c.l3 <= 0) c.l3 = int64_t{32} << 20;
  return c;
}

void force_cache_sizes(std::optional<CacheSizes> caches) {
  std::lock_guard lock(caches_mutex);
  forced = caches;
}

}  // namespace convtune::cpu
