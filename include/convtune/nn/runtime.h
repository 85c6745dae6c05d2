// Runtime and DeviceTensor: what the network layers run on — one Device, its queue, the nn kernels compiled
// once, and shaped buffers. On the CPU backend the same buffers are host memory and layers use host loops.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/plan.h"

namespace convtune::nn {

// A device buffer with a shape (NCHW for images, N x features for dense layers) and an element type (the layers
// compute FP32 so far; a layer given another type refuses it, naming both).
struct DeviceTensor {
  std::vector<int64_t> shape;
  std::shared_ptr<Buffer> buffer;
  ElementType type = ElementType::F32;

  int64_t size() const;
  size_t bytes() const { return static_cast<size_t>(size()) * static_cast<size_t>(bytes_per_element(type)); }
  bool empty() const { return !buffer; }
};

std::string shape_string(const std::vector<int64_t>& shape);  // "64x1x28x28"
int64_t element_count(const std::vector<int64_t>& shape);

class Runtime {
 public:
  // `math`: the math mode of every convolution and GEMM the layers plan (tf32 and 3xtf32 let tensor-core families
  // compute them on devices that have some; FP32 families compute every mode as fp32).
  explicit Runtime(Device& device, MathMode math = MathMode::FP32);
  // `precision` bf16 or fp16: the convolutions compute 16-bit tensors (FP32 accumulation) on kernel devices, their
  // inputs converted from the FP32 tensors between layers (master weights stay FP32) and their outputs converted back,
  // gradients scaled per tensor into FP16's range (nn.cl's convert_to_16); dense layers' GEMMs stay FP32. The CPU
  // backend computes no 16-bit convolution: its plans refuse them, naming the families.
  Runtime(Device& device, Precision precision);

  Device& device() const { return *device_; }
  Queue& queue() const { return device_->queue(); }
  // True on the CPU backend: layers run host loops on host_data() instead of kernels.
  bool on_host() const { return on_host_; }
  MathMode math() const { return math_; }
  // The element type of the convolutions' tensors (FP32 unless the precision is bf16 or fp16).
  ElementType conv_type() const { return conv_type_; }
  Precision precision() const { return {conv_type_, math_}; }

  // Converts `count` FP32 values to 16-bit ones (`type` bf16 or fp16), or back. With `max_bits` (a buffer that
  // abs_max_bits filled) the values are scaled by the power of two that brings that maximum into [0.5, 1) on the way
  // to 16 bits, and by its inverse on the way back.
  void to_16bit(const Buffer& from, Buffer& to, int64_t count, ElementType type, const Buffer* max_bits = nullptr);
  void from_16bit(const Buffer& from, Buffer& to, int64_t count, ElementType type, const Buffer* max_bits = nullptr);
  // Zeroes `max_bits` (4 bytes) and leaves in it the bit pattern of max |x[i]| over `count` FP32 values.
  void abs_max_bits(const Buffer& x, Buffer& max_bits, int64_t count);

  DeviceTensor allocate(std::vector<int64_t> shape) const;
  std::shared_ptr<Buffer> allocate_bytes(size_t bytes) const;
  void upload(const DeviceTensor& tensor, const float* values) const;
  void upload(const DeviceTensor& tensor, const std::vector<float>& values) const;
  std::vector<float> download(const DeviceTensor& tensor) const;
  void fill_zero(const DeviceTensor& tensor) const;

  // Host memory of a CPU-backend tensor (throws on other backends).
  static float* host_data(const DeviceTensor& tensor);
  static const int32_t* host_ints(const Buffer& buffer);

  // Launches a kernel of nn/nn.cl over `count` work-items (one-dimensional, work-groups of 256).
  void launch(const std::string& kernel, const std::vector<KernelArg>& args, int64_t count);
  // Launches with an explicit geometry.
  void launch(const std::string& kernel, const std::vector<KernelArg>& args, const LaunchGeometry& geometry);

  // C = op(A) * op(B) through a GEMM plan (the gemm family, cpu_gemm on the CPU backend, tuned parameters from the
  // tuning database), made once per shape. A is m x k (a_trans: stored k x m), B is k x n (b_trans: stored n x k),
  // C is m x n, all row-major.
  void gemm(const Buffer& a, const Buffer& b, Buffer& c, int64_t m, int64_t n, int64_t k, bool a_trans,
            bool b_trans);
  // The GEMM plans made so far, one line each: problem, family and parameters, tier.
  std::vector<std::string> gemm_plans() const;

  // The workspace limit of every plan the layers make from now on (PlanRequest::workspace_limit; empty: the
  // device's default).
  void set_workspace_limit(std::optional<uint64_t> bytes) { workspace_limit_ = bytes; }
  std::optional<uint64_t> workspace_limit() const { return workspace_limit_; }

 private:
  Kernel& nn_kernel(const std::string& name);

  Device* device_;
  bool on_host_;
  MathMode math_;
  ElementType conv_type_ = ElementType::F32;
  std::shared_ptr<Program> nn_program_;
  std::map<std::string, std::unique_ptr<Kernel>> nn_kernels_;
  std::map<std::string, std::unique_ptr<Plan>> gemms_;
  std::optional<uint64_t> workspace_limit_;
};

}  // namespace convtune::nn
