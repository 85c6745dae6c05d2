// The CPU backend: host-memory buffers, memcpy transfers and host-clock timing. Kernels are not compiled here
// (the CPU runs OpenCL kernels through PoCL, under the OpenCL backend).
#include "src/backend/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "convtune/error.h"
#include "src/core/parallel_for.h"
#include "src/core/resources.h"

namespace convtune::cpu {

namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : data_(bytes) {}
  size_t bytes() const override { return data_.size(); }
  std::byte* data() { return data_.data(); }
  const std::byte* data() const { return data_.data(); }

 private:
  std::vector<std::byte> data_;
};

void check_range(const Buffer& b, size_t bytes, size_t offset, const char* what) {
  if (offset + bytes > b.bytes()) {
    throw BackendError(fmt::format("{} of {} bytes at offset {} overruns a {}-byte buffer", what, bytes, offset,
                                   b.bytes()));
  }
}

class HostQueue final : public Queue {
 public:
  void write(Buffer& dst, const void* src, size_t bytes, size_t offset) override {
    check_range(dst, bytes, offset, "write");
    std::memcpy(static_cast<HostBuffer&>(dst).data() + offset, src, bytes);
  }
  void read(const Buffer& src, void* dst, size_t bytes, size_t offset) override {
    check_range(src, bytes, offset, "read");
    std::memcpy(dst, static_cast<const HostBuffer&>(src).data() + offset, bytes);
  }
  void copy(const Buffer& src, Buffer& dst, size_t bytes) override {
    check_range(src, bytes, 0, "copy source");
    check_range(dst, bytes, 0, "copy destination");
    std::memcpy(static_cast<HostBuffer&>(dst).data(), static_cast<const HostBuffer&>(src).data(), bytes);
  }
  void launch(Kernel&, const LaunchGeometry&) override {
    throw Unsupported("the CPU backend runs no kernels: use an OpenCL device (PoCL) for kernels on the CPU");
  }
  void finish() override {}
  double elapsed_ms(const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
};

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

class CpuDevice final : public Device {
 public:
  CpuDevice() {
    info_.backend = BackendKind::Cpu;
    info_.id = "cpu";
    info_.name = cpu_model_name();
    info_.vendor = "host";
    info_.driver_version = "n/a";
    info_.compiler = "C++ (built in)";
    info_.architecture = info_.name;
    info_.compute_units = static_cast<int>(hardware_threads());
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    info_.global_memory_bytes = pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * page_size : 0;
    info_.can_run_kernels = false;
    info_.cannot_run_reason = "runs convtune's C++ paths (reference, sequential, threaded), not compiled kernels";
  }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    require_host_memory(bytes, fmt::format("a buffer of {} bytes on {}", bytes, info_.id));
    try {
      return std::make_unique<HostBuffer>(bytes);
    } catch (const std::bad_alloc&) {
      throw BackendError(fmt::format("cannot allocate {} bytes of host memory ({} bytes installed)", bytes,
                                     info_.global_memory_bytes));
    }
  }
  Queue& queue() override { return queue_; }
  std::shared_ptr<Program> build(const ProgramSource& source) override {
    throw Unsupported(fmt::format("the CPU backend compiles no kernels (asked for {}): use an OpenCL device",
                                  source.file));
  }

 private:
  DeviceInfo info_;
  HostQueue queue_;
};

class CpuBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::Cpu; }
  std::string unavailable_reason() const override { return {}; }
  size_t device_count() const override { return 1; }
  Device& device(size_t index) override {
    if (index != 0) throw InvalidArgument(fmt::format("cpu:{} does not exist: the CPU backend has one device", index));
    return device_;
  }

 private:
  CpuDevice device_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

std::byte* host_memory(Buffer& buffer) {
  auto* host = dynamic_cast<HostBuffer*>(&buffer);
  if (!host) throw InvalidArgument("host_memory: the buffer was not allocated by the CPU backend");
  return host->data();
}

const std::byte* host_memory(const Buffer& buffer) { return host_memory(const_cast<Buffer&>(buffer)); }

}  // namespace convtune::cpu
