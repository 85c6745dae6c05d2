// Program cache: hits from memory and disk, keys that change the binary, damaged or forged entries rebuilt.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "src/backend/program_cache.h"
#include "src/core/atomic_file.h"

using namespace convtune;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return out;
}

ProgramCacheKey key(const std::string& source, std::map<std::string, std::string> defines = {}) {
  return {"opencl|vendor|device|arch|driver 1", "compiler 2", source, std::move(defines), {"-cl-fast-relaxed-math"}};
}

// Per process: two runs of this binary at once (ctest -j, two build trees) must not share it.
struct CacheDir {
  std::filesystem::path path;
  CacheDir() {
    path = std::filesystem::temp_directory_path() /
           ("convtune_cache_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
  }
  ~CacheDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST(ProgramCache, SecondProcessCompilesNothing) {
  CacheDir dir;
  int compiles = 0;
  auto compile = [&] { ++compiles; return bytes_of("binary-A"); };
  bool from_cache = true;
  {
    ProgramCache first(dir.path);
    EXPECT_EQ(first.get_or_build(key("src"), compile, &from_cache), bytes_of("binary-A"));
    EXPECT_FALSE(from_cache);
    first.get_or_build(key("src"), compile, &from_cache);  // memory hit
    EXPECT_TRUE(from_cache);
  }
  ProgramCache second(dir.path);  // a new process: only the disk remains
  EXPECT_EQ(second.get_or_build(key("src"), compile, &from_cache), bytes_of("binary-A"));
  EXPECT_TRUE(from_cache);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(second.disk_hits(), 1);
}

TEST(ProgramCache, EveryKeyPartChangesTheEntry) {
  const ProgramCacheKey base = key("src", {{"TILE", "4"}});
  ProgramCacheKey other_source = base, other_define = base, other_device = base, other_compiler = base;
  other_source.source = "src2";
  other_define.defines["TILE"] = "8";
  other_device.device_fingerprint += "x";
  other_compiler.compiler_version = "compiler 3";
  for (const auto& k : {other_source, other_define, other_device, other_compiler}) EXPECT_NE(base.hash(), k.hash());
  // Defines are sorted, so insertion order does not matter.
  EXPECT_EQ(key("s", {{"A", "1"}, {"B", "2"}}).hash(), key("s", {{"B", "2"}, {"A", "1"}}).hash());
}

TEST(ProgramCache, TruncatedOrCorruptEntryIsRebuilt) {
  CacheDir dir;
  int compiles = 0;
  auto compile = [&] { ++compiles; return bytes_of("a-binary-long-enough-to-truncate"); };
  ProgramCache(dir.path).get_or_build(key("src"), compile);
  const auto entry = dir.path / (key("src").hash() + ".bin");
  ASSERT_TRUE(std::filesystem::exists(entry));

  std::string text = read_file(entry);
  write_file_atomic(entry, text.substr(0, text.size() - 5));  // truncated
  testing::internal::CaptureStderr();
  EXPECT_EQ(ProgramCache(dir.path).get_or_build(key("src"), compile), compile());
  EXPECT_NE(testing::internal::GetCapturedStderr().find("damaged"), std::string::npos);

  text = read_file(entry);
  text[text.size() - 3] ^= 0x55;  // one flipped byte
  write_file_atomic(entry, text);
  testing::internal::CaptureStderr();
  bool from_cache = true;
  ProgramCache(dir.path).get_or_build(key("src"), compile, &from_cache);
  EXPECT_FALSE(from_cache);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("checksum"), std::string::npos);
  // Rebuilt entry is good again.
  ProgramCache(dir.path).get_or_build(key("src"), compile, &from_cache);
  EXPECT_TRUE(from_cache);
}

TEST(ProgramCache, ConcurrentWritersLeaveAValidEntry) {
  CacheDir dir;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      ProgramCache cache(dir.path);  // separate caches, like separate processes
      for (int i = 0; i < 20; ++i) cache.get_or_build(key("src" + std::to_string(i % 4)), [] { return bytes_of(std::string(4096, 'z')); });
    });
  }
  for (auto& t : threads) t.join();
  int compiles = 0;
  ProgramCache check(dir.path);
  for (int i = 0; i < 4; ++i) check.get_or_build(key("src" + std::to_string(i)), [&] { ++compiles; return bytes_of("x"); });
  EXPECT_EQ(compiles, 0);
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) EXPECT_EQ(e.path().extension(), ".bin");
}

// An empty binary is a legal entry; reading it back once copied from a null pointer (undefined behaviour, caught
// by UBSan in the sanitizer job).
TEST(ProgramCache, EmptyPayloadRoundTrips) {
  CacheDir dir;
  ProgramCache(dir.path).get_or_build(key("empty"), [] { return std::vector<std::byte>{}; });
  bool from_cache = false;
  const auto binary = ProgramCache(dir.path).get_or_build(key("empty"), [] { return bytes_of("rebuilt"); }, &from_cache);
  EXPECT_TRUE(from_cache);
  EXPECT_TRUE(binary.empty());
}

// The fuzzer's reproducer (its format: one byte L, the L-byte key description, the entry file) and forged sizes
// whose sums with the read position would wrap around.
TEST(ProgramCache, ForgedSizesAreDamagedEntriesNotReadsOutOfBounds) {
  const std::string input = read_file(std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/progcache-ub-memcpy-null-empty-payload.bin");
  const size_t key_size = static_cast<unsigned char>(input[0]);
  const std::string description = input.substr(1, key_size), file = input.substr(1 + key_size);
  const ProgramCacheEntry entry = parse_program_cache_entry(file, description);
  EXPECT_EQ(entry.status, ProgramCacheEntry::Status::Hit);
  EXPECT_TRUE(entry.payload.empty());

  const std::string good = format_program_cache_entry("key", bytes_of("payload"));
  EXPECT_EQ(parse_program_cache_entry(good, "key").payload, bytes_of("payload"));
  EXPECT_EQ(parse_program_cache_entry(good, "other").status, ProgramCacheEntry::Status::OtherKey);
  auto with_u64 = [&](size_t at, uint64_t value) {
    std::string text = good;
    for (int i = 0; i < 8; ++i) text[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
    return text;
  };
  const size_t key_size_at = std::string_view("CONVTUNE-PROGRAM 1\n").size();
  const size_t payload_size_at = key_size_at + 8 + 3;
  for (uint64_t forged : {~uint64_t{0}, ~uint64_t{0} - 10, uint64_t{1} << 63}) {
    EXPECT_EQ(parse_program_cache_entry(with_u64(key_size_at, forged), "key").status,
              ProgramCacheEntry::Status::Damaged);
    const ProgramCacheEntry damaged = parse_program_cache_entry(with_u64(payload_size_at, forged), "key");
    EXPECT_EQ(damaged.status, ProgramCacheEntry::Status::Damaged);
    EXPECT_NE(damaged.problem.find("payload bytes"), std::string::npos) << damaged.problem;
  }
}
