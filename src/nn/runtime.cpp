// Runtime: buffers, uploads, the nn kernels and the GEMM for the layers, on any backend.
#include "convtune/nn/runtime.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "convtune/error.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/core/parallel_for.h"

namespace convtune::nn {

namespace {
constexpr size_t kGroup = 256;
// GEMM tile for the dense layers: 32x32 per work-group with a 4x4 register tile. Dense layers here are small
// (batch x a few thousand), so bigger tiles would leave most of a GPU idle.
constexpr int kGemmTile = 32, kGemmThreads = 8, kGemmTileK = 16;
}  // namespace

int64_t element_count(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t DeviceTensor::size() const { return element_count(shape); }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

Runtime::Runtime(Device& device) : device_(&device), on_host_(device.info().backend == BackendKind::Cpu) {
  if (!on_host_) {
    if (!device.info().can_run_kernels) {
      throw BackendError(fmt::format("{} cannot run kernels: {}", device.info().id, device.info().cannot_run_reason));
    }
    nn_program_ = device.build({"nn/nn.cl", {}, {}});
  }
}

std::shared_ptr<Buffer> Runtime::allocate_bytes(size_t bytes) const {
  return std::shared_ptr<Buffer>(device_->allocate(std::max<size_t>(bytes, sizeof(float))));
}

DeviceTensor Runtime::allocate(std::vector<int64_t> shape) const {
  DeviceTensor t{std::move(shape), nullptr};
  t.buffer = allocate_bytes(t.bytes());
  return t;
}

void Runtime::upload(const DeviceTensor& tensor, const float* values) const {
  queue().write(*tensor.buffer, values, tensor.bytes());
}

void Runtime::upload(const DeviceTensor& tensor, const std::vector<float>& values) const {
  if (static_cast<int64_t>(values.size()) != tensor.size()) {
    throw InvalidArgument(fmt::format("upload of {} values into a {} tensor", values.size(), shape_string(tensor.shape)));
  }
  upload(tensor, values.data());
}

std::vector<float> Runtime::download(const DeviceTensor& tensor) const {
  std::vector<float> values(static_cast<size_t>(tensor.size()));
  queue().read(*tensor.buffer, values.data(), tensor.bytes());
  return values;
}

void Runtime::fill_zero(const DeviceTensor& tensor) const {
  const std::vector<float> zeros(static_cast<size_t>(tensor.size()), 0.0f);
  upload(tensor, zeros.data());
}

float* Runtime::host_data(const DeviceTensor& tensor) {
  return reinterpret_cast<float*>(cpu::host_memory(*tensor.buffer));
}

const int32_t* Runtime::host_ints(const Buffer& buffer) {
  return reinterpret_cast<const int32_t*>(cpu::host_memory(buffer));
}

Kernel& Runtime::nn_kernel(const std::string& name) {
  auto& slot = nn_kernels_[name];
  if (!slot) slot = nn_program_->kernel(name);
  return *slot;
}

void Runtime::launch(const std::string& kernel, const std::vector<KernelArg>& args, const LaunchGeometry& geometry) {
  Kernel& k = nn_kernel(kernel);
  for (size_t i = 0; i < args.size(); ++i) k.set_arg(static_cast<int>(i), args[i]);
  queue().launch(k, geometry);
}

void Runtime::launch(const std::string& kernel, const std::vector<KernelArg>& args, int64_t count) {
  LaunchGeometry g;
  g.dims = 1;
  g.global[0] = (static_cast<size_t>(std::max<int64_t>(count, 1)) + kGroup - 1) / kGroup * kGroup;
  g.local[0] = kGroup;
  launch(kernel, args, g);
}

void Runtime::gemm(const Buffer& a, const Buffer& b, Buffer& c, int64_t m, int64_t n, int64_t k, bool a_trans,
                   bool b_trans) {
  if (on_host_) {
    const float* pa = reinterpret_cast<const float*>(cpu::host_memory(a));
    const float* pb = reinterpret_cast<const float*>(cpu::host_memory(b));
    float* pc = reinterpret_cast<float*>(cpu::host_memory(c));
    // Rows of C in parallel; the inner loop runs along contiguous memory of B when B is not transposed.
    parallel_for(m, hardware_threads(), [&](int64_t i) {
      float* row = pc + i * n;
      std::fill(row, row + n, 0.0f);
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = a_trans ? pa[kk * m + i] : pa[i * k + kk];
        if (av == 0.0f) continue;
        if (b_trans) {
          for (int64_t j = 0; j < n; ++j) row[j] += av * pb[j * k + kk];
        } else {
          const float* brow = pb + kk * n;
          for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
        }
      }
    });
    return;
  }
  const std::string key = fmt::format("{}x{}x{}:{}{}", m, n, k, a_trans, b_trans);
  auto it = gemms_.find(key);
  if (it == gemms_.end()) {
    GemmEntry entry;
    ProgramSource source{"im2col_gemm/gemm.cl",
                         {{"GEMM_M", std::to_string(m)},
                          {"GEMM_N", std::to_string(n)},
                          {"GEMM_K", std::to_string(k)},
                          {"A_TRANS", a_trans ? "1" : "0"},
                          {"B_TRANS", b_trans ? "1" : "0"},
                          {"TILE_M", std::to_string(kGemmTile)},
                          {"TILE_N", std::to_string(kGemmTile)},
                          {"TILE_K", std::to_string(kGemmTileK)},
                          {"THREADS_M", std::to_string(kGemmThreads)},
                          {"THREADS_N", std::to_string(kGemmThreads)}},
                         {}};
    entry.program = device_->build(source);
    entry.kernel = entry.program->kernel("gemm");
    entry.geometry.dims = 3;
    entry.geometry.global = {static_cast<size_t>((n + kGemmTile - 1) / kGemmTile * kGemmThreads),
                             static_cast<size_t>((m + kGemmTile - 1) / kGemmTile * kGemmThreads), 1};
    entry.geometry.local = {kGemmThreads, kGemmThreads, 1};
    it = gemms_.emplace(key, std::move(entry)).first;
  }
  Kernel& kernel = *it->second.kernel;
  kernel.set_arg(0, &a);
  kernel.set_arg(1, &b);
  kernel.set_arg(2, &c);
  kernel.set_arg(3, int32_t{0});
  kernel.set_arg(4, int32_t{1});
  queue().launch(kernel, it->second.geometry);
}

}  // namespace convtune::nn
