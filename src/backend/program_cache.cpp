// Program cache entries on disk: "CONVTUNE-PROGRAM 1\n", key description length + text, payload size,
// payload checksum, payload. Written atomically (temp file + rename) so concurrent processes never see a
// partial entry; a truncated or corrupt entry fails its checks and is rebuilt.
#include "src/backend/program_cache.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "src/core/atomic_file.h"
#include "src/core/hash.h"

namespace convtune {

namespace {

constexpr std::string_view kMagic = "CONVTUNE-PROGRAM 1\n";

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads 8 bytes at pos; pos never exceeds in.size(), so pos + 8 cannot wrap.
bool get_u64(std::string_view in, size_t& pos, uint64_t& v) {
  if (in.size() - pos < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  pos += 8;
  return true;
}

std::filesystem::path default_directory() {
  if (const char* dir = std::getenv("CONVTUNE_CACHE_DIR"); dir && *dir) {
    if (std::string_view(dir) == "off") return {};
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "convtune/programs";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache/convtune/programs";
  return {};
}

}  // namespace

std::string ProgramCacheKey::describe() const {
  std::string defs;
  for (const auto& [name, value] : defines) defs += fmt::format(" -D{}={}", name, value);
  return fmt::format("device={}\ncompiler={}\nsource={}\ndefines={}\noptions={}\n", device_fingerprint,
                     compiler_version, hex64(fnv1a64(source)), defs, fmt::join(options, " "));
}

std::string ProgramCacheKey::hash() const { return hex64(fnv1a64(describe())); }

ProgramCache& ProgramCache::instance() {
  static ProgramCache cache(default_directory());
  return cache;
}

ProgramCache::ProgramCache(std::filesystem::path directory) : directory_(std::move(directory)) {}

ProgramCacheEntry parse_program_cache_entry(std::string_view text, std::string_view description) {
  ProgramCacheEntry entry;
  auto damaged = [&](std::string problem) {
    entry.status = ProgramCacheEntry::Status::Damaged;
    entry.problem = std::move(problem);
    return entry;
  };
  if (text.substr(0, kMagic.size()) != kMagic) return damaged("bad header");
  size_t pos = kMagic.size();
  uint64_t desc_size = 0, payload_size = 0, checksum = 0;
  // Sizes from the file are compared with what remains, never added to a position: a forged size cannot wrap.
  if (!get_u64(text, pos, desc_size) || desc_size > text.size() - pos) return damaged("truncated key");
  if (text.substr(pos, desc_size) != description) {
    entry.status = ProgramCacheEntry::Status::OtherKey;  // a hash collision: treat as a miss
    return entry;
  }
  pos += desc_size;
  if (!get_u64(text, pos, payload_size) || !get_u64(text, pos, checksum)) return damaged("truncated header");
  if (payload_size != text.size() - pos) {
    return damaged(fmt::format("expected {} payload bytes, found {}", payload_size, text.size() - pos));
  }
  if (fnv1a64(text.data() + pos, payload_size) != checksum) return damaged("checksum mismatch");
  // An empty payload is legal; copying through data() of an empty vector would pass memcpy a null pointer.
  const auto* payload = reinterpret_cast<const std::byte*>(text.data() + pos);
  entry.payload.assign(payload, payload + payload_size);
  entry.status = ProgramCacheEntry::Status::Hit;
  return entry;
}

bool ProgramCache::load(const std::filesystem::path& path, const std::string& description,
                        std::vector<std::byte>& out) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  ProgramCacheEntry entry;
  try {
    entry = parse_program_cache_entry(read_file(path), description);
  } catch (const std::exception& e) {
    entry.status = ProgramCacheEntry::Status::Damaged;
    entry.problem = e.what();
  }
  if (entry.status == ProgramCacheEntry::Status::Damaged) {
    if (report_once(path.string())) {
      std::cerr << fmt::format("convtune: program cache entry {} is damaged ({}); rebuilding it\n", path.string(),
                               entry.problem);
    }
    return false;
  }
  if (entry.status == ProgramCacheEntry::Status::OtherKey) return false;
  out = std::move(entry.payload);
  return true;
}

std::string format_program_cache_entry(std::string_view description, const std::vector<std::byte>& payload) {
  std::string text(kMagic);
  put_u64(text, description.size());
  text += description;
  put_u64(text, payload.size());
  put_u64(text, fnv1a64(payload.data(), payload.size()));
  if (!payload.empty()) text.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return text;
}

void ProgramCache::store(const std::filesystem::path& path, const std::string& description,
                         const std::vector<std::byte>& data) {
  const std::string text = format_program_cache_entry(description, data);
  try {
    // The cache's own folder (default or $CONVTUNE_CACHE_DIR): created on first use.
    ensure_directory(path.parent_path());
    remove_stale_temporaries(path);  // left by a process killed while storing this entry
    write_file_atomic(path, text);
  } catch (const std::exception& e) {
    // A read-only or full cache directory costs only speed: say so once and go on.
    if (report_once("write:" + directory_.string())) {
      std::cerr << fmt::format("convtune: cannot store compiled program in the cache: {}\n", e.what());
    }
  }
}

bool ProgramCache::report_once(const std::string& what) {
  std::lock_guard lock(mutex_);
  return reported_.insert(what).second;
}

std::optional<std::vector<std::byte>> ProgramCache::find(const ProgramCacheKey& key) {
  const std::string description = key.describe();
  const std::string hash = hex64(fnv1a64(description));
  {
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(hash); it != memory_.end()) return it->second;
  }
  // Disk work happens outside the lock so a tuner can compile several candidates at once.
  std::vector<std::byte> binary;
  if (directory_.empty() || !load(directory_ / (hash + ".bin"), description, binary)) return std::nullopt;
  std::lock_guard lock(mutex_);
  ++disk_hits_;
  memory_[hash] = binary;
  return binary;
}

std::vector<std::byte> ProgramCache::get_or_build(const ProgramCacheKey& key,
                                                  const std::function<std::vector<std::byte>()>& compile,
                                                  bool* from_cache) {
  if (std::optional<std::vector<std::byte>> found = find(key)) {
    if (from_cache) *from_cache = true;
    return std::move(*found);
  }
  // The compiler works outside the lock too.
  std::vector<std::byte> binary = compile();
  const std::string description = key.describe();
  const std::string hash = hex64(fnv1a64(description));
  if (!directory_.empty()) store(directory_ / (hash + ".bin"), description, binary);
  std::lock_guard lock(mutex_);
  ++compiles_;
  if (from_cache) *from_cache = false;
  memory_[hash] = binary;
  return binary;
}

void ProgramCache::replace(const ProgramCacheKey& key, const std::vector<std::byte>& binary) {
  const std::string description = key.describe();
  const std::string hash = hex64(fnv1a64(description));
  if (!directory_.empty()) store(directory_ / (hash + ".bin"), description, binary);
  std::lock_guard lock(mutex_);
  memory_[hash] = binary;
}

}  // namespace convtune
