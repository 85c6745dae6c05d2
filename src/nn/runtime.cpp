// Runtime: buffers, uploads, the nn kernels and the GEMM for the layers, on any backend.
#include "convtune/nn/runtime.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "convtune/error.h"
#include "src/backend/cpu/cpu_backend.h"

namespace convtune::nn {

namespace {
constexpr size_t kGroup = 256;
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

Runtime::Runtime(Device& device, Precision precision) : Runtime(device, precision.math) {
  validate_precision(precision.type, precision.math);
  conv_type_ = precision.type;
}

Runtime::Runtime(Device& device, MathMode math)
    : device_(&device), on_host_(device.info().backend == BackendKind::Cpu), math_(math) {
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
  // One plan per shape, through the gemm family on kernel devices and cpu_gemm on the CPU backend, with the
  // tuning database's parameters where it has some for this shape (or a near one).
  const std::string key = fmt::format("{}x{}x{}:{}{}", m, n, k, a_trans, b_trans);
  auto it = gemms_.find(key);
  if (it == gemms_.end()) {
    GemmProblem problem;
    problem.m = m, problem.n = n, problem.k = k, problem.trans_a = a_trans, problem.trans_b = b_trans;
    problem.math = math_;
    PlanRequest request;
    request.problem = problem;
    request.workspace_limit = workspace_limit_;
    it = gemms_.emplace(key, std::make_unique<Plan>(Plan::create(*device_, request))).first;
  }
  it->second->run(queue(), {&a, &b, &c});
}

void Runtime::to_16bit(const Buffer& from, Buffer& to, int64_t count, ElementType type, const Buffer* max_bits) {
  launch("convert_to_16", {&from, &to, static_cast<int32_t>(count), static_cast<int32_t>(type == ElementType::BF16),
                           static_cast<int32_t>(max_bits != nullptr), max_bits ? max_bits : &from},
         count);
}

void Runtime::from_16bit(const Buffer& from, Buffer& to, int64_t count, ElementType type, const Buffer* max_bits) {
  launch("convert_from_16", {&from, &to, static_cast<int32_t>(count), static_cast<int32_t>(type == ElementType::BF16),
                             static_cast<int32_t>(max_bits != nullptr), max_bits ? max_bits : &from},
         count);
}

void Runtime::abs_max_bits(const Buffer& x, Buffer& max_bits, int64_t count) {
  const uint32_t zero = 0;
  queue().write(max_bits, &zero, sizeof zero);
  launch("abs_max_bits", {&x, &max_bits, static_cast<int32_t>(count)}, count);
}

std::vector<std::string> Runtime::gemm_plans() const {
  std::vector<std::string> out;
  for (const auto& [key, plan] : gemms_) out.push_back(fmt::format("{} {} ({})", plan->problem().to_string(), plan->describe(), to_string(plan->tier())));
  return out;
}

}  // namespace convtune::nn
