// The backend registry: every backend built into this binary, device lookup by spec, and "best device".
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "src/backend/cpu/cpu_backend.h"
#ifdef CONVTUNE_WITH_OPENCL
#include "src/backend/opencl/opencl_backend.h"
#endif
#ifdef CONVTUNE_WITH_CUDA
#include "src/backend/cuda/cuda_backend.h"
#endif

namespace convtune {

std::string_view to_string(BackendKind kind) {
  switch (kind) {
    case BackendKind::Cpu: return "cpu";
    case BackendKind::OpenCL: return "opencl";
    case BackendKind::Cuda: return "cuda";
  }
  return "?";
}

std::string DeviceInfo::fingerprint() const {
  return fmt::format("{}|{}|{}|{}|{}", to_string(backend), vendor, name, architecture, driver_version);
}

uint64_t default_workspace_limit(const DeviceInfo& device) {
  // The CPU backend's buffers are host memory, checked against what is available when they are allocated; its
  // cpu_blocked packs operands into buffers of up to 1.25 GB on the seed layers (fmnist1 backward-data), which a
  // GPU's cap would push onto slower families.
  if (device.backend == BackendKind::Cpu) {
    return device.global_memory_bytes == 0 ? std::numeric_limits<uint64_t>::max() : device.global_memory_bytes;
  }
  constexpr uint64_t kCap = uint64_t{256} << 20, kGpuCap = uint64_t{1} << 30;
  // A device that reports no memory size keeps the fixed cap rather than a limit of zero.
  if (device.global_memory_bytes == 0) return kCap;
  // GPUs: 1 GiB (the search workspace bench gives cuDNN) and at most an eighth of the memory. On the H100, with
  // the built-in defaults: the FP32 stride1 suite at 1 GiB against 256 MiB runs no row more than 5% slower
  // and ucla5x5 4.1-5.7x faster (fft's tiles of its 228x228 image fit), geomean 0.93; tf32 over AlexNet, the seeds
  // and the unseen layers runs at 0.935 of cuDNN's time against 1.013, u8's fft_tc taking its batch in one chunk
  // instead of four.
  if (device.is_gpu) return std::min(kGpuCap, device.global_memory_bytes / 8);
  // Other kernel devices (OpenCL on a CPU: PoCL) keep 256 MiB and at most a quarter of their memory.
  return std::min(kCap, device.global_memory_bytes / 4);
}

uint64_t workspace_limit(const DeviceInfo& device) {
  return device.workspace_limit_bytes.value_or(default_workspace_limit(device));
}

DeviceInfo with_workspace_limit(DeviceInfo device, std::optional<uint64_t> limit) {
  if (limit) device.workspace_limit_bytes = limit;
  return device;
}

Registry::Registry() {
  backends_.push_back(cpu::make_cpu_backend());
#ifdef CONVTUNE_WITH_OPENCL
  backends_.push_back(opencl::make_opencl_backend());
#endif
#ifdef CONVTUNE_WITH_CUDA
  backends_.push_back(cuda::make_cuda_backend());
#endif
}

Registry& Registry::instance() {
  static Registry registry;
  return registry;
}

Backend* Registry::backend(BackendKind kind) const {
  for (const auto& b : backends_)
    if (b->kind() == kind) return b.get();
  return nullptr;
}

std::vector<Device*> Registry::all_devices() {
  std::vector<Device*> out;
  for (const auto& b : backends_) {
    if (!b->available()) continue;
    for (size_t i = 0; i < b->device_count(); ++i) out.push_back(&b->device(i));
  }
  return out;
}

std::string Registry::describe_available() {
  std::string text;
  for (Device* d : all_devices()) text += fmt::format("\n  {:<10} {}", d->info().id, d->info().name);
  for (const auto& b : backends_)
    if (!b->available()) text += fmt::format("\n  ({} unavailable: {})", to_string(b->kind()), b->unavailable_reason());
  return text;
}

Device& Registry::find(std::string_view spec) {
  if (spec == "best") return best();
  const auto colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  size_t index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = spec.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || ptr != digits.data() + digits.size()) {
      throw InvalidArgument(fmt::format("device '{}': expected BACKEND or BACKEND:INDEX, e.g. opencl:0", spec));
    }
  }
  for (const auto& b : backends_) {
    if (to_string(b->kind()) != name) continue;
    if (!b->available()) {
      throw InvalidArgument(fmt::format("device '{}': the {} backend is unavailable: {}. Available:{}", spec, name,
                                        b->unavailable_reason(), describe_available()));
    }
    if (index >= b->device_count()) {
      throw InvalidArgument(fmt::format("device '{}' does not exist ({} has {} device(s)). Available:{}", spec, name,
                                        b->device_count(), describe_available()));
    }
    return b->device(index);
  }
  throw InvalidArgument(
      fmt::format("unknown device '{}': expected best, cpu, opencl[:N] or cuda[:N]. Available:{}", spec,
                  describe_available()));
}

Device& Registry::best() {
  const auto devices = all_devices();
  // The CPU backend ranks above an OpenCL CPU device: on the same cores cpu_blocked, untuned, runs every layer of
  // the seed suite and of bench/suites/cpu_shapes.txt 2x to 300x faster than PoCL in every direction.
  auto rank = [](const DeviceInfo& info) {
    if (info.backend == BackendKind::Cpu) return 2;
    if (!info.can_run_kernels) return 0;
    if (info.backend == BackendKind::Cuda) return 4;
    if (info.backend == BackendKind::OpenCL && info.is_gpu) return 3;
    return 1;
  };
  Device* chosen = nullptr;
  for (Device* d : devices)
    if (!chosen || rank(d->info()) > rank(chosen->info())) chosen = d;
  return *chosen;  // the CPU backend is always there
}

Timing measure(Queue& queue, const std::function<void()>& work, int warmup, int repeats) {
  repeats = std::max(1, repeats);
  for (int i = 0; i < warmup; ++i) work();
  queue.finish();
  std::vector<double> times;
  times.reserve(static_cast<size_t>(repeats));
  for (int i = 0; i < repeats; ++i) times.push_back(queue.elapsed_ms(work));
  std::sort(times.begin(), times.end());
  Timing t;
  t.repeats = repeats;
  t.min_ms = times.front();
  t.max_ms = times.back();
  const size_t mid = times.size() / 2;
  t.median_ms = times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
  return t;
}

}  // namespace convtune
