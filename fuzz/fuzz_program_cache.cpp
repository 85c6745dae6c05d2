// Fuzz harness: program cache entry files. Input: one byte L, L bytes of the key description the reader expects,
// then the entry file's bytes. Properties: no crash or undefined behaviour; a hit returns exactly the payload
// bytes at the end of the file, and an entry written for a key reads back as a hit with the same payload.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "src/backend/program_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convtune;
  if (size < 1) return 0;
  const size_t key_size = std::min<size_t>(data[0], size - 1);
  const std::string_view description(reinterpret_cast<const char*>(data + 1), key_size);
  const std::string_view file(reinterpret_cast<const char*>(data + 1 + key_size), size - 1 - key_size);
  const ProgramCacheEntry entry = parse_program_cache_entry(file, description);
  if (entry.status == ProgramCacheEntry::Status::Hit) {
    if (entry.payload.size() > file.size()) __builtin_trap();
    if (!entry.payload.empty() &&
        std::memcmp(entry.payload.data(), file.data() + file.size() - entry.payload.size(), entry.payload.size()) != 0)
      __builtin_trap();
  }
  // The writer's format read back by the reader: the rest of the input as a payload stored under the key.
  std::vector<std::byte> payload(reinterpret_cast<const std::byte*>(file.data()),
                                 reinterpret_cast<const std::byte*>(file.data() + file.size()));
  const std::string stored = format_program_cache_entry(description, payload);
  const ProgramCacheEntry back = parse_program_cache_entry(stored, description);
  if (back.status != ProgramCacheEntry::Status::Hit || back.payload != payload) __builtin_trap();
  return 0;
}
