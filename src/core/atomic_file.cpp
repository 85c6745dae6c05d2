// Atomic file writes through a unique temporary file + fsync + rename + directory fsync; bounded reads of regular
// files; write-location checks; removal of temporaries left by killed writers.
#include "src/core/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <thread>

#include "convtune/error.h"

namespace convtune {

namespace {

std::string error_text(int err) { return std::strerror(err); }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string folder_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path().string() : std::string(".");
}

// Flushes the directory entry of a rename, so the new name survives a power cut (the data is already flushed).
void sync_directory(const std::filesystem::path& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename happened; durability of the name is best effort where the folder cannot open
  ::fsync(fd);
  ::close(fd);
}

// A path with a NUL byte would be cut there by every system call: another file than the one named.
void require_no_nul(const std::filesystem::path& path, const char* doing) {
  if (path.native().find('\0') != std::string::npos) {
    throw InvalidArgument(fmt::format("cannot {} {}: the path holds a NUL byte", doing, path.string()));
  }
}

}  // namespace

std::filesystem::path write_target(const std::filesystem::path& path) {
  require_no_nul(path, "write");
  // Linux's own limit on links followed in one lookup (MAXSYMLINKS).
  constexpr int kMaxLinks = 40;
  std::filesystem::path target = path;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return target;
    if (hops == kMaxLinks) {
      throw Error(fmt::format("cannot write {}: more than {} symbolic links in a row (a loop?)", path.string(),
                              kMaxLinks));
    }
    std::string link(static_cast<size_t>(st.st_size > 0 ? st.st_size : 256) + 1, '\0');
    const ssize_t n = ::readlink(target.c_str(), link.data(), link.size());
    if (n < 0 || static_cast<size_t>(n) >= link.size()) {
      throw Error(fmt::format("cannot write {}: cannot read the symbolic link {}: {}", path.string(), target.string(),
                              n < 0 ? error_text(errno) : std::string("it changed while it was read")));
    }
    link.resize(static_cast<size_t>(n));
    const std::filesystem::path next(link);
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
}

void write_file_atomic(const std::filesystem::path& requested, std::string_view contents) {
  // Through a symbolic link to its target: renaming over the link itself would replace it with a regular file and
  // leave the file it pointed to as it was.
  const std::filesystem::path path = write_target(requested);
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path tmp =
      path.string() + fmt::format(".tmp.{}.{}", static_cast<long>(getpid()), counter++);
  // The name holds our PID and a per-process counter, so no live writer shares it; a leftover of a dead process
  // that had our PID is simply overwritten.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      throw Error(fmt::format("cannot write {}: the folder {} does not exist", path.string(), folder_of(path)));
    }
    throw Error(fmt::format("cannot write {}: {}", path.string(), error_text(err)));
  }
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("cannot write {}: {}", path.string(), error_text(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot flush {}: {}", path.string(), error_text(err)));
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot flush {}: {}", path.string(), error_text(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot replace {}: {}", path.string(), error_text(err)));
  }
  sync_directory(path);
}

std::string read_file(const std::filesystem::path& path, uint64_t max_bytes) {
  require_no_nul(path, "read");
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; it is refused below anyway.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) throw Error(fmt::format("cannot read {}: {}", path.string(), error_text(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw Error(fmt::format("cannot read {}: {}", path.string(), error_text(errno)));
  if (!S_ISREG(st.st_mode)) {
    throw Error(fmt::format("cannot read {}: it is {}, expected a regular file", path.string(), file_kind(st.st_mode)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw Error(fmt::format("cannot read {}: it holds {} bytes, more than the {} expected of such a file",
                            path.string(), size, max_bytes));
  }
  std::string out;
  out.resize(static_cast<size_t>(size));
  size_t done = 0;
  // The file may grow while it is read (its size above is a snapshot): read on to the end, but never past the limit.
  while (true) {
    if (done == out.size()) {
      if (out.size() > max_bytes) {
        throw Error(fmt::format("cannot read {}: it grew past the {} bytes expected of such a file while it was read",
                                path.string(), max_bytes));
      }
      out.resize(static_cast<size_t>(std::min<uint64_t>(max_bytes + 1, out.size() + 65536)));
    }
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("cannot read {}: {}", path.string(), error_text(errno)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

void require_regular_file(const std::filesystem::path& path, const std::string& what, bool may_be_missing) {
  require_no_nul(path, "read");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT && may_be_missing) return;
    throw Error(fmt::format("{} {}: {}", what, path.string(),
                            err == ENOENT ? std::string("no such file") : error_text(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Error(fmt::format("{} {}: it is {}, expected a regular file", what, path.string(), file_kind(st.st_mode)));
  }
}

void check_writable(const std::filesystem::path& requested, const std::string& option, uint64_t expected_bytes) {
  const std::filesystem::path path = write_target(requested);
  const std::string folder = folder_of(path);
  // Errors name the path as the user gave it, and the link's target where that is where the problem lies.
  const std::string shown =
      path == requested ? requested.string() : fmt::format("{} (a symbolic link to {})", requested.string(), path.string());
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw InvalidArgument(fmt::format("{} {}: the folder {} does not exist (convtune creates no folders it was not "
                                      "asked for: create it first)", option, shown, folder));
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw InvalidArgument(fmt::format("{} {}: it is {}, expected a regular file to write", option, shown,
                                      file_kind(st.st_mode)));
  }
  // Creating a file is the only test that also catches read-only file systems and root-squashed mounts, which
  // access(2) does not.
  const std::filesystem::path probe =
      std::filesystem::path(folder) / fmt::format(".convtune-write-test.{}", static_cast<long>(getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err != EEXIST) {
      throw InvalidArgument(fmt::format("{} {}: cannot create files in {}: {}", option, shown, folder,
                                        error_text(err)));
    }
  } else {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  struct statvfs fs {};
  if (expected_bytes > 0 && ::statvfs(folder.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < expected_bytes) {
      throw InvalidArgument(fmt::format("{} {}: the file system of {} has {} bytes free, the file needs about {}",
                                        option, shown, folder, free_bytes, expected_bytes));
    }
  }
}

void ensure_directory(const std::filesystem::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create the folder {}: {}", dir.string(), ec.message()));
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(fmt::format("cannot create the folder {}: a file of that name is in the way", dir.string()));
  }
}

FileLock::FileLock(const std::filesystem::path& requested, double timeout_seconds) {
  // Beside the link's target, where the write goes: every name of the file then takes one lock.
  const std::filesystem::path path = write_target(requested);
  const std::filesystem::path lock = path.string() + ".lock";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) {
      throw Error(fmt::format("cannot write {}: the folder {} does not exist", path.string(), folder_of(path)));
    }
    throw Error(fmt::format("cannot lock {}: cannot open {}: {}", path.string(), lock.string(), error_text(err)));
  }
  const auto start = std::chrono::steady_clock::now();
  // Polling rather than a blocking flock, so a holder that hangs (stopped, on a dead NFS server) ends in a message.
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      ::close(fd_);
      throw Error(fmt::format("cannot lock {}: {}", lock.string(), error_text(err)));
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_seconds) {
      ::close(fd_);
      throw Error(fmt::format("cannot lock {}: another process has held it for more than {:.0f} s", lock.string(),
                              timeout_seconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
}

int remove_stale_temporaries(const std::filesystem::path& requested) {
  const std::filesystem::path path = write_target(requested);
  const std::string prefix = path.filename().string() + ".tmp.";
  std::error_code ec;
  int removed = 0;
  for (const auto& item : std::filesystem::directory_iterator(folder_of(path), ec)) {
    const std::string name = item.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // PID.N, both decimal: anything else is not one of ours and stays.
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 == rest.size()) continue;
    long pid = 0;
    const auto [end, parse_error] = std::from_chars(rest.data(), rest.data() + dot, pid);
    if (parse_error != std::errc() || end != rest.data() + dot || pid <= 0) continue;
    if (rest.substr(dot + 1).find_first_not_of("0123456789") != std::string_view::npos) continue;
    // kill(pid, 0) fails with ESRCH only when no such process exists; EPERM means it lives under another user.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (std::filesystem::remove(item.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace convtune
