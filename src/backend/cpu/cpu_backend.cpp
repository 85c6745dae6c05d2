// The CPU backend: host-memory buffers, memcpy transfers, host-clock timing, and host programs (C++ functions the
// CPU families register) in place of compiled kernels. OpenCL kernels run on the CPU through PoCL, under the
// OpenCL backend.
#include "src/backend/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "convtune/error.h"
#include "src/backend/cpu/caches.h"
#include "src/backend/cpu/host_program.h"
#include "src/backend/cpu/isa.h"
#include "src/core/parallel_for.h"
#include "src/core/resources.h"
#include "src/core/thread_pool.h"

namespace convtune::cpu {

namespace {

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, HostProgramFactory>& host_programs() {
  static std::map<std::string, HostProgramFactory> programs;
  return programs;
}

// A kernel of a host program: the arguments the plan set, kept until the launch calls the function with them.
class HostKernelObject final : public Kernel {
 public:
  HostKernelObject(std::string name, HostKernel function) : name_(std::move(name)), function_(std::move(function)) {}
  const std::string& name() const override { return name_; }
  void set_arg(int index, const KernelArg& value) override {
    if (index < 0) throw InvalidArgument(fmt::format("host kernel {}: argument index {} is negative", name_, index));
    if (static_cast<size_t>(index) >= args_.size()) args_.resize(static_cast<size_t>(index) + 1);
    args_[static_cast<size_t>(index)] = value;
  }
  void run() const { function_(args_); }

 private:
  std::string name_;
  HostKernel function_;
  std::vector<KernelArg> args_;
};

class HostProgram final : public Program {
 public:
  HostProgram(std::string file, std::map<std::string, HostKernel> kernels)
      : file_(std::move(file)), kernels_(std::move(kernels)) {}
  std::unique_ptr<Kernel> kernel(const std::string& name) override {
    const auto it = kernels_.find(name);
    if (it == kernels_.end()) {
      throw InvalidArgument(fmt::format("host program {} has no kernel '{}'", file_, name));
    }
    return std::make_unique<HostKernelObject>(name, it->second);
  }
  bool from_cache() const override { return false; }

 private:
  std::string file_;
  std::map<std::string, HostKernel> kernels_;
};

// Host memory: its own, or the caller's (wrapped, never freed).
// Owned buffers start on a 64-byte boundary (a cache line, an AVX-512 vector), as PyTorch's and oneDNN's CPU
// allocators give: the kernels' streaming stores need whole aligned vectors, and an operand that starts mid-line
// splits every row's first and last vector across two lines. Zero-filled, as the vector it replaced was.
struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kHostAlignment}); }
  static constexpr size_t kHostAlignment = 64;
};

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes)
      : owned_(static_cast<std::byte*>(::operator new[](std::max<size_t>(bytes, 1),
                                                         std::align_val_t{AlignedFree::kHostAlignment}))),
        data_(owned_.get()),
        bytes_(bytes) {
    std::memset(data_, 0, bytes);
  }
  HostBuffer(std::byte* foreign, size_t bytes) : data_(foreign), bytes_(bytes) {}
  size_t bytes() const override { return bytes_; }
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }

 private:
  std::unique_ptr<std::byte[], AlignedFree> owned_;
  std::byte* data_;
  size_t bytes_;
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
  void launch(Kernel& kernel, const LaunchGeometry&) override {
    const auto* host = dynamic_cast<const HostKernelObject*>(&kernel);
    if (!host) throw InvalidArgument(fmt::format("kernel {} was not built by the CPU backend", kernel.name()));
    host->run();
  }
  void finish() override {}
  double elapsed_ms(const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
};

// A field of /proc/cpuinfo's first processor ("model name", "vendor_id"); `otherwise` when absent.
std::string cpuinfo_field(const std::string& field, const std::string& otherwise) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) {
      const auto colon = line.find(':');
      const auto value = colon == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", colon + 1);
      if (value != std::string::npos) return line.substr(value);
    }
  }
  return otherwise;
}

// What decides how a CPU family's parameters perform beyond the model name (which a virtual machine may report
// as a generic "Intel(R) Xeon(R) Processor"): the ISA its SIMD kernels run (CONVTUNE_CPU_ISA included), the
// threads the pool runs (CONVTUNE_THREADS included) and the data caches. Part of the device fingerprint, so
// tuning results never move between CPUs, ISAs or thread counts.
std::string cpu_architecture() {
  const CacheSizes caches = detected_cache_sizes();
  return fmt::format("{}, {} threads, L1d {}, L2 {}, L3 {}", to_string(active_isa()), ThreadPool::instance().size(),
                     cache_text(caches.l1d), cache_text(caches.l2), cache_text(caches.l3));
}

class CpuDevice final : public Device {
 public:
  CpuDevice() {
    info_.backend = BackendKind::Cpu;
    info_.id = "cpu";
    info_.name = cpuinfo_field("model name", "unknown CPU");
    info_.vendor = cpuinfo_field("vendor_id", "unknown vendor");
    info_.driver_version = "n/a";
    info_.compiler = "C++ (built in)";
    info_.architecture = cpu_architecture();
    info_.compute_units = static_cast<int>(hardware_threads());
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    info_.global_memory_bytes = pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * page_size : 0;
    info_.max_work_group_size = 1;
    info_.can_run_kernels = false;
    info_.cannot_run_reason =
        "runs convtune's C++ families (cpu_blocked, cpu_direct, cpu_gemm, ...), not compiled kernels";
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
    HostProgramFactory factory;
    {
      std::lock_guard lock(registry_mutex());
      const auto it = host_programs().find(source.file);
      if (it != host_programs().end()) factory = it->second;
    }
    if (!factory) {
      throw Unsupported(fmt::format("the CPU backend compiles no kernels (asked for {}): use an OpenCL device (PoCL) "
                                    "for kernels on the CPU",
                                    source.file));
    }
    return std::make_shared<HostProgram>(source.file, factory(source));
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

void register_host_program(const std::string& file, HostProgramFactory factory) {
  std::lock_guard lock(registry_mutex());
  host_programs()[file] = std::move(factory);
}

float* host_floats(const KernelArg& arg, const char* what) {
  const auto* buffer = std::get_if<const Buffer*>(&arg);
  if (!buffer || !*buffer) throw InvalidArgument(fmt::format("host kernel argument {} is not a buffer", what));
  return reinterpret_cast<float*>(host_memory(const_cast<Buffer&>(**buffer)));
}

int64_t define_int(const ProgramSource& source, const std::string& name) {
  const auto it = source.defines.find(name);
  int64_t value = 0;
  if (it == source.defines.end() ||
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), value).ec != std::errc()) {
    throw InvalidArgument(fmt::format("host program {}: define {} is missing or not an integer", source.file, name));
  }
  return value;
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

std::unique_ptr<Buffer> wrap_host_memory(std::byte* memory, size_t bytes) {
  return std::make_unique<HostBuffer>(memory, bytes);
}

std::byte* host_memory(Buffer& buffer) {
  auto* host = dynamic_cast<HostBuffer*>(&buffer);
  if (!host) throw InvalidArgument("host_memory: the buffer was not allocated by the CPU backend");
  return host->data();
}

const std::byte* host_memory(const Buffer& buffer) { return host_memory(const_cast<Buffer&>(buffer)); }

}  // namespace convtune::cpu
