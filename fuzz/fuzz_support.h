// Shared by the fuzz harnesses: an input as a file without disk I/O (a memfd), and a GPU-like device description
// for the kernel families' checks.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "convtune/backend.h"

namespace convtune::fuzz {

// The bytes as a regular file that readers open by path (/proc/self/fd/N), so a harness runs the same code a
// user's file meets, thousands of times a second.
class MemoryFile {
 public:
  explicit MemoryFile(std::string_view bytes) {
    fd_ = ::memfd_create("convtune-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// An H100-like OpenCL device: large limits, so the families' own bounds (not the device's) are what is tested.
inline DeviceInfo fuzz_gpu() {
  DeviceInfo d;
  d.backend = BackendKind::OpenCL;
  d.id = "opencl:0";
  d.name = "Fuzz GPU";
  d.vendor = "Fuzz";
  d.driver_version = "1.0";
  d.compiler = "none";
  d.architecture = "fuzz_arch";
  d.is_gpu = true;
  d.compute_units = 132;
  d.clock_mhz = 1800;
  d.global_memory_bytes = uint64_t{80} << 30;
  d.local_memory_bytes = 48 * 1024;
  d.max_work_group_size = 1024;
  d.can_run_kernels = true;
  return d;
}

}  // namespace convtune::fuzz
