// Atomic writes replace a file whole and leave no temporary files behind; reads refuse special files and files
// beyond their limit; write locations are checked; locks exclude; temporaries of dead writers are removed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "convtune/error.h"
#include "src/core/atomic_file.h"

using namespace convtune;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("convtune_atomic_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string message_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(AtomicFile, WritesAndReplacesWhole) {
  const auto dir = fresh_dir("whole");
  const auto path = dir / "file.txt";
  write_file_atomic(path, "first version");
  EXPECT_EQ(read_file(path), "first version");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary left
  fs::remove_all(dir);
}

TEST(AtomicFile, UnwritableDirectoryNamesThePath) {
  const std::string message = message_of([] { write_file_atomic("/proc/convtune-cannot-write/file", "x"); });
  EXPECT_TRUE(contains(message, "/proc/convtune-cannot-write/file")) << message;
}

// No folder is created for a path a user mistyped (it once created /nonexistent/dir as root).
TEST(AtomicFile, MissingFolderIsAnErrorNotCreated) {
  const auto dir = fresh_dir("missing");
  const std::string message = message_of([&] { write_file_atomic(dir / "no" / "such" / "x.csv", "x"); });
  EXPECT_TRUE(contains(message, "the folder " + (dir / "no" / "such").string() + " does not exist")) << message;
  EXPECT_FALSE(fs::exists(dir / "no"));
  fs::remove_all(dir);
}

TEST(AtomicFile, ReadRefusesSpecialFilesAtOnceAndFilesBeyondTheLimit) {
  const auto dir = fresh_dir("read");
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(contains(message_of([&] { read_file(fifo); }), "it is a FIFO (named pipe), expected a regular file"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));  // no writer needed to return
  EXPECT_TRUE(contains(message_of([] { read_file("/dev/zero"); }), "it is a character device"));
  EXPECT_TRUE(contains(message_of([&] { read_file(dir); }), "it is a directory"));
  std::ofstream(dir / "big") << std::string(1000, 'x');
  EXPECT_TRUE(contains(message_of([&] { read_file(dir / "big", 999); }), "it holds 1000 bytes, more than the 999"));
  EXPECT_EQ(read_file(dir / "big", 1000).size(), 1000u);
  fs::remove_all(dir);
}

TEST(AtomicFile, CheckWritableBeforeLongWork) {
  const auto dir = fresh_dir("writable");
  EXPECT_NO_THROW(check_writable(dir / "out.csv", "--out", 1000));
  EXPECT_TRUE(fs::is_empty(dir));  // the probe file is gone
  std::string message = message_of([&] { check_writable(dir / "none" / "out.csv", "--out"); });
  EXPECT_TRUE(contains(message, "--out " + (dir / "none" / "out.csv").string() + ": the folder")) << message;
  message = message_of([&] { check_writable("/proc/out.csv", "--db"); });
  EXPECT_TRUE(contains(message, "--db /proc/out.csv: cannot create files in /proc")) << message;
  message = message_of([&] { check_writable(dir / "out.csv", "--log", uint64_t{1} << 62); });
  EXPECT_TRUE(contains(message, "bytes free, the file needs about")) << message;
  fs::create_directories(dir / "a-folder");
  message = message_of([&] { check_writable(dir / "a-folder", "--out"); });
  EXPECT_TRUE(contains(message, "it is a directory, expected a regular file to write")) << message;
  fs::remove_all(dir);
}

TEST(AtomicFile, FileLockExcludesOtherHolders) {
  const auto dir = fresh_dir("lock");
  const fs::path file = dir / "db.json";
  {
    FileLock held(file);
    // flock is per open file, so a second lock in this same process waits like another process would.
    const std::string message = message_of([&] { FileLock second(file, 0.2); });
    EXPECT_TRUE(contains(message, "db.json.lock: another process has held it for more than")) << message;
  }
  EXPECT_NO_THROW(FileLock again(file, 0.2));  // released with the first
  fs::remove_all(dir);
}

TEST(AtomicFile, StaleTemporariesOfDeadProcessesOnlyAreRemoved) {
  const auto dir = fresh_dir("stale");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const fs::path file = dir / "model.bin";
  const std::string stale = "model.bin.tmp." + std::to_string(dead) + ".0";
  const std::string live = "model.bin.tmp." + std::to_string(getpid()) + ".4";
  for (const std::string& name : {stale, live, std::string("model.bin.tmp.1x.2"), std::string("other.tmp.1.1")})
    std::ofstream(dir / name) << "partial";
  EXPECT_EQ(remove_stale_temporaries(file), 1);
  EXPECT_FALSE(fs::exists(dir / stale));
  for (const std::string& name : {live, std::string("model.bin.tmp.1x.2"), std::string("other.tmp.1.1")})
    EXPECT_TRUE(fs::exists(dir / name)) << name;
  fs::remove_all(dir);
}

// symlink-db.sh: `--db` a symbolic link. The rename replaced the link with a regular file, the target was never
// updated and the lock was taken beside the link. Writes now go through the link to its target, the lock is the
// target's, and the link stays.
TEST(AtomicFile, WritesGoThroughSymbolicLinksToTheirTarget) {
  const auto dir = fresh_dir("symlink");
  fs::create_directories(dir / "real");
  const fs::path target = dir / "real" / "tuning.json";
  write_file_atomic(target, "old");
  fs::create_symlink(target, dir / "absolute.json");
  fs::create_symlink(fs::path("real") / "tuning.json", dir / "relative.json");  // relative to the link's folder
  fs::create_symlink(dir / "relative.json", dir / "chain.json");                // a link to a link
  for (const char* name : {"absolute.json", "relative.json", "chain.json"}) {
    const fs::path link = dir / name;
    EXPECT_EQ(write_target(link), target) << name;
    write_file_atomic(link, name);
    EXPECT_TRUE(fs::is_symlink(link)) << name;
    EXPECT_EQ(read_file(target), name);
    EXPECT_NO_THROW(check_writable(link, "--db"));
  }
  {
    FileLock lock(dir / "chain.json");
    EXPECT_TRUE(fs::exists(dir / "real" / "tuning.json.lock"));
    EXPECT_FALSE(fs::exists(dir / "chain.json.lock"));
    // Any name of the file takes the same lock: a child locking through another link must wait.
    const pid_t child = fork();
    if (child == 0) {
      try {
        FileLock other(dir / "absolute.json", 0.2);
        _exit(0);  // got the lock: wrong
      } catch (const Error&) {
        _exit(7);  // timed out: right
      }
    }
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);
  }
  // A dangling link: its target is created, the link kept.
  fs::create_symlink(dir / "real" / "new.json", dir / "dangling.json");
  write_file_atomic(dir / "dangling.json", "made");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.json"));
  EXPECT_EQ(read_file(dir / "real" / "new.json"), "made");
  // A loop is named, not followed forever.
  fs::create_symlink(dir / "loop-b", dir / "loop-a");
  fs::create_symlink(dir / "loop-a", dir / "loop-b");
  EXPECT_TRUE(contains(message_of([&] { write_file_atomic(dir / "loop-a", "x"); }), "symbolic links in a row"));
  // A link into a folder that does not exist: the folder is named.
  fs::create_symlink(dir / "no-such-folder" / "x.json", dir / "nowhere.json");
  EXPECT_TRUE(contains(message_of([&] { check_writable(dir / "nowhere.json", "--db"); }),
                       "--db " + (dir / "nowhere.json").string() + " (a symbolic link to"));
  fs::remove_all(dir);
}

// A path cut at a NUL byte by the system calls would name another file.
TEST(AtomicFile, PathsWithANulByteAreRefused) {
  const auto dir = fresh_dir("nul");
  write_file_atomic(dir / "a", "a");
  const fs::path cut(std::string((dir / "a").string()) + std::string(1, '\0') + "b");
  EXPECT_TRUE(contains(message_of([&] { read_file(cut); }), "the path holds a NUL byte"));
  EXPECT_TRUE(contains(message_of([&] { write_file_atomic(cut, "x"); }), "the path holds a NUL byte"));
  EXPECT_EQ(read_file(dir / "a"), "a");
  fs::remove_all(dir);
}
