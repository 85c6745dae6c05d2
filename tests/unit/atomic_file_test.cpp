// Atomic writes replace a file whole and leave no temporary files behind.
#include <gtest/gtest.h>

#include <filesystem>

#include "src/core/atomic_file.h"

using namespace convtune;

TEST(AtomicFile, WritesAndReplacesWhole) {
  const auto dir = std::filesystem::temp_directory_path() / "convtune_atomic_test";
  std::filesystem::remove_all(dir);
  const auto path = dir / "sub" / "file.txt";
  write_file_atomic(path, "first version");
  EXPECT_EQ(read_file(path), "first version");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir / "sub")) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary left
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, UnwritableDirectoryNamesThePath) {
  try {
    write_file_atomic("/proc/convtune-cannot-write/file", "x");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/convtune-cannot-write/file"), std::string::npos) << e.what();
  }
}
