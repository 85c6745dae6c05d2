// Atomic file writes through a unique temporary file + fsync + rename.
#include "src/core/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "convtune/error.h"

namespace convtune {

void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path tmp =
      path.string() + fmt::format(".tmp.{}.{}", static_cast<long>(getpid()), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot flush {}: {}", path.string(), std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot replace {}: {}", path.string(), std::strerror(err)));
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace convtune
