// The program cache: compiled kernel binaries in memory and on disk, keyed by everything that changes the
// binary (device, driver and compiler versions, source hash, sorted parameters, options).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace convtune {

struct ProgramCacheKey {
  std::string device_fingerprint;  // DeviceInfo::fingerprint(): backend, vendor, name, arch, driver
  std::string compiler_version;    // NVRTC version, OpenCL platform + driver version
  std::string source;              // the expanded kernel text (hashed, not stored)
  std::map<std::string, std::string> defines;  // sorted by the map
  std::vector<std::string> options;

  // Human-readable key (the source as its hash); stored in each entry to rule out hash collisions.
  std::string describe() const;
  std::string hash() const;  // 16 hex digits of describe()
};

// One cache entry file's content, checked against the key it should hold (exposed for tests and fuzzing).
struct ProgramCacheEntry {
  enum class Status { Hit, OtherKey, Damaged };
  Status status = Status::Damaged;
  std::string problem;              // why it is damaged
  std::vector<std::byte> payload;   // the binary, on a hit
};
ProgramCacheEntry parse_program_cache_entry(std::string_view text, std::string_view description);
// The file the cache writes for `description` and `payload`.
std::string format_program_cache_entry(std::string_view description, const std::vector<std::byte>& payload);

class ProgramCache {
 public:
  // The process-wide cache in $CONVTUNE_CACHE_DIR, else $XDG_CACHE_HOME/convtune/programs, else
  // ~/.cache/convtune/programs. CONVTUNE_CACHE_DIR=off keeps the cache in memory only.
  static ProgramCache& instance();
  explicit ProgramCache(std::filesystem::path directory);  // empty path: memory only

  // Returns the binary for `key`: from memory, else from disk, else from `compile()` (then stored).
  // A damaged disk entry is reported once on stderr and rebuilt. Sets *from_cache when nothing compiled.
  std::vector<std::byte> get_or_build(const ProgramCacheKey& key,
                                      const std::function<std::vector<std::byte>()>& compile,
                                      bool* from_cache = nullptr);

  // The binary for `key` from memory or disk, or nullopt; never compiles.
  std::optional<std::vector<std::byte>> find(const ProgramCacheKey& key);

  // Overwrites the entry for `key`, e.g. after the driver rejected a cached binary and it was rebuilt.
  void replace(const ProgramCacheKey& key, const std::vector<std::byte>& binary);

  const std::filesystem::path& directory() const { return directory_; }
  int compiles() const { return compiles_; }
  int disk_hits() const { return disk_hits_; }

 private:
  bool report_once(const std::string& what);
  bool load(const std::filesystem::path& path, const std::string& description, std::vector<std::byte>& out);
  void store(const std::filesystem::path& path, const std::string& description, const std::vector<std::byte>& data);

  std::filesystem::path directory_;
  std::mutex mutex_;
  std::map<std::string, std::vector<std::byte>> memory_;
  std::set<std::string> reported_;
  int compiles_ = 0;
  int disk_hits_ = 0;
};

}  // namespace convtune
