// Atomic file writes (a reader sees the old file or the whole new one, never a half-written file), safe reads of
// files from outside (regular files only, bounded size), and the checks a command makes before long work.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace convtune {

// The file a write to `path` must replace: `path` itself, or where its chain of symbolic links ends (the last
// link's target, which need not exist yet), so that a link the user made (a database kept in a synced folder)
// stays a link and its target is what gets written and locked. Relative targets are taken from their link's
// folder. Throws Error naming the path for a loop of links (more than 40), a link that cannot be read or a path
// holding a NUL byte.
std::filesystem::path write_target(const std::filesystem::path& path);

// Writes `contents` to a temporary file PATH.tmp.PID.N beside `path`, flushes it to disk, renames it over `path`
// and flushes the directory, so a crash at any moment leaves the old file or the new one. The directory must
// exist: convtune creates only its own default locations (ensure_directory), never a folder a user mistyped.
// Throws Error naming the path on failure; the old file stays intact and the temporary file is removed. A `path`
// that is a symbolic link is written through: its target (write_target) is replaced, the link stays.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

// Files convtune reads are far smaller; the limit keeps a wrong path (a disk image, a log) from filling memory.
inline constexpr uint64_t kDefaultMaxReadBytes = uint64_t{1} << 30;

// Reads a whole regular file of at most `max_bytes`. FIFOs, devices, sockets and directories are refused
// without blocking (a FIFO could wait forever, /dev/zero never ends). Throws Error naming the path and why.
std::string read_file(const std::filesystem::path& path, uint64_t max_bytes = kDefaultMaxReadBytes);

// Throws Error naming `path` unless it names a regular file (or nothing yet when `may_be_missing`): for the checks
// a command makes on its inputs before it starts work.
void require_regular_file(const std::filesystem::path& path, const std::string& what, bool may_be_missing = false);

// Before long work: throws InvalidArgument naming `option` and `path` unless a file can be created in its folder
// (the folder exists, is writable, is not on a read-only file system) and the file system has at least
// `expected_bytes` free. A file that already exists must be a regular file. A symbolic link is judged by its
// target's folder and kind (write_target), where the write will go.
void check_writable(const std::filesystem::path& path, const std::string& option, uint64_t expected_bytes = 0);

// Creates `dir` and missing parents (convtune's own default locations only); throws Error naming it.
void ensure_directory(const std::filesystem::path& dir);

// An exclusive advisory lock (flock) on the file PATH.lock beside `path` (beside its write_target when `path` is a
// symbolic link, so that every name of one file takes the same lock), held for the object's lifetime, so that
// processes sharing a file can read, merge and rewrite it one at a time. Waits while another process holds it,
// up to `timeout_seconds`, then throws Error naming the lock file; also throws when the lock file cannot be
// created. The lock file stays (removing it would let two processes lock different files of the same name).
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path, double timeout_seconds = 300);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes temporary files PATH.tmp.PID.N that writers killed mid-write left beside `path` (beside its
// write_target, where write_file_atomic makes them): only those whose process no longer exists. Returns how many
// were removed. Callers that lock the file (TuningDatabase::save) call it while holding the lock, so no
// cooperating writer can be between creating and renaming one.
int remove_stale_temporaries(const std::filesystem::path& path);

}  // namespace convtune
