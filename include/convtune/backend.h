// The backend interface: Registry -> Backend -> Device -> Queue / Buffer / Program -> Kernel.
// CPU, OpenCL and CUDA implement it; the tuner, benchmarks, tests and layers use only this.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace convtune {

enum class BackendKind { Cpu, OpenCL, Cuda };
std::string_view to_string(BackendKind kind);

struct DeviceInfo {
  BackendKind backend = BackendKind::Cpu;
  int index = 0;                // position within its backend
  std::string id;               // "cpu", "opencl:0", "cuda:0": what --device takes
  std::string name;
  std::string vendor;
  std::string driver_version;
  std::string compiler;         // what compiles kernels: "NVRTC 13.0", "PoCL 5.0 (LLVM 15)"
  std::string architecture;     // "sm_90", "gfx1100", CPU model...
  bool is_gpu = false;
  int compute_units = 0;
  int clock_mhz = 0;
  uint64_t global_memory_bytes = 0;
  uint64_t local_memory_bytes = 0;
  // Shared memory a CUDA kernel may take as dynamic shared memory once it opts in (227 KiB on Hopper); 0 where
  // nothing beyond local_memory_bytes can be had (OpenCL, the CPU).
  uint64_t local_memory_optin_bytes = 0;
  size_t max_work_group_size = 0;
  bool can_run_kernels = false;
  std::string cannot_run_reason;  // when can_run_kernels is false
  // The scratch memory (bytes) one plan may take here; empty: default_workspace_limit(). A request's limit
  // (PlanRequest::workspace_limit, TuneOptions::workspace_limit) is set on the copy of the description the families
  // see, so their support checks, constraints and defaults all read workspace_limit(). Not in the fingerprint: the
  // limit is the caller's choice, not the hardware's.
  std::optional<uint64_t> workspace_limit_bytes;

  // Stable identity of the hardware + software stack for cache keys and tuning entries.
  std::string fingerprint() const;
};

// The workspace limit a plan gets unless its request names one: on GPUs 1 GiB and at most an eighth of the device's
// memory, on other kernel devices (PoCL) 256 MiB and at most a quarter (256 MiB where a device reports no memory),
// so a plan never crowds out the tensors it computes on; on
// the CPU backend the host's memory (its buffers are host allocations, checked against what is available).
uint64_t default_workspace_limit(const DeviceInfo& device);
// What plans on `device` compare their workspace with: device.workspace_limit_bytes, else the default.
uint64_t workspace_limit(const DeviceInfo& device);
// `device` with `limit` applied; as it was when `limit` is empty.
DeviceInfo with_workspace_limit(DeviceInfo device, std::optional<uint64_t> limit);

// Device memory. Created by Device::allocate, freed on destruction.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual size_t bytes() const = 0;
};

// A raw by-value argument (a struct or a vector type like float4).
struct RawArg {
  std::vector<std::byte> bytes;
};
using KernelArg = std::variant<const Buffer*, int32_t, uint32_t, int64_t, uint64_t, float, RawArg>;

// Work-item geometry in OpenCL terms: global counts work-items per axis, local the work-group shape.
// CUDA launches global/local blocks of local threads (global must be a multiple of local).
// local all zero means "let the runtime choose" (OpenCL); CUDA then uses its own default.
struct LaunchGeometry {
  int dims = 1;
  std::array<size_t, 3> global{1, 1, 1};
  std::array<size_t, 3> local{0, 0, 0};
  size_t dynamic_local_bytes = 0;  // CUDA dynamic shared memory; OpenCL ignores it
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const std::string& name() const = 0;
  virtual void set_arg(int index, const KernelArg& value) = 0;
};

// What to compile: a kernel file (relative to src/kernels, e.g. "peak/fill.cl") and its compile-time
// parameters, passed as -DNAME=value.
struct ProgramSource {
  std::string file;
  std::map<std::string, std::string> defines;
  std::vector<std::string> options;  // extra compiler options, backend-specific
  // Built to be tried once (a tuner's candidate): a backend may skip what serves only later processes. On PoCL,
  // reading a binary for the program cache compiles every kernel a second time (about 40% of a candidate's
  // compile); PoCL's own kernel cache still keeps the program.
  bool transient = false;
};

class Program {
 public:
  virtual ~Program() = default;
  virtual std::unique_ptr<Kernel> kernel(const std::string& name) = 0;
  // True when the binary came from the program cache and nothing was compiled.
  virtual bool from_cache() const = 0;
};

// In-order command queue with device-side timing.
class Queue {
 public:
  virtual ~Queue() = default;
  virtual void write(Buffer& dst, const void* src, size_t bytes, size_t offset = 0) = 0;
  virtual void read(const Buffer& src, void* dst, size_t bytes, size_t offset = 0) = 0;
  virtual void copy(const Buffer& src, Buffer& dst, size_t bytes) = 0;
  virtual void launch(Kernel& kernel, const LaunchGeometry& geometry) = 0;
  virtual void finish() = 0;
  // Milliseconds the device spent from the start of the first to the end of the last command that
  // `work` enqueues, measured with device events (host clock on the CPU backend). Waits for completion.
  virtual double elapsed_ms(const std::function<void()>& work) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  // Throws BackendError naming the requested bytes and the device's free memory when it cannot.
  virtual std::unique_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual Queue& queue() = 0;
  // Compiles (or loads from the program cache) a kernel file with its parameters. A compile failure
  // throws BackendError holding the compiler log, the file and the parameter set.
  virtual std::shared_ptr<Program> build(const ProgramSource& source) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // Empty when usable; otherwise why not ("libcuda.so.1 not found: no NVIDIA driver").
  virtual std::string unavailable_reason() const = 0;
  bool available() const { return unavailable_reason().empty(); }
  virtual size_t device_count() const = 0;
  virtual Device& device(size_t index) = 0;
};

// Every backend compiled into this binary. Backends initialise lazily on first use.
class Registry {
 public:
  static Registry& instance();
  const std::vector<std::unique_ptr<Backend>>& backends() const { return backends_; }
  Backend* backend(BackendKind kind) const;
  // "cpu", "opencl", "opencl:1", "cuda", "cuda:0", or "best". Throws InvalidArgument listing the
  // available devices when the spec matches none.
  Device& find(std::string_view spec);
  // The fastest kind of device present: a CUDA GPU, then an OpenCL GPU, then the CPU backend (its SIMD
  // families beat an OpenCL CPU device such as PoCL on every measured layer), then any other OpenCL device.
  Device& best();
  std::vector<Device*> all_devices();
  std::string describe_available();  // for error messages

 private:
  Registry();
  std::vector<std::unique_ptr<Backend>> backends_;
};

// Median-of-repeats timing with warm-up, the one way convtune measures anything.
struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int repeats = 0;
};
Timing measure(Queue& queue, const std::function<void()>& work, int warmup = 2, int repeats = 10);

}  // namespace convtune
