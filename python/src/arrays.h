// Arrays from Python through DLPack, checked and wrapped as convtune buffers, and plans run on them: in place on
// their own device (host memory on the CPU device, CUDA memory on its CUDA device and stream), copied to and from
// a device that cannot reach them (host arrays on an OpenCL or CUDA device).
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <convtune/convtune.h>

namespace convtune::python {

namespace nb = nanobind;

struct ArrayView {
  nb::object capsule;  // the producer's export: its memory stays valid while this lives
  std::string name;    // "x", "w", "y", "a", ...: the operand, for messages
  std::byte* data = nullptr;
  int32_t device_type = 0;
  int32_t device_id = 0;
  std::vector<int64_t> shape;
  ElementType type = ElementType::F32;  // float32, float16 or bfloat16: the dtypes convtune computes
  std::string dtype;                    // the producer's dtype as DLPack names it ("bfloat16"), for messages
  int64_t elements = 0;
  size_t bytes = 0;
  bool read_only = false;  // the producer said so (DLPack 1.x)

  bool on_host() const;
  std::string where() const;  // "cpu", "cuda:1", "DLPack device type 10 (ROCm) 0"
};

// The DLPack device (type, index) of `object`, from __dlpack_device__; TypeError when it has none.
std::pair<int32_t, int32_t> dlpack_device(nb::handle object, const std::string& name);

// Imports `object` as a dense row-major float32, float16 or bfloat16 array, through DLPack 1.x where the producer
// offers it (it can export read-only arrays), else the unversioned protocol. `cuda_stream` is the stream the work
// will run on (0: the legacy default stream); for CUDA memory it is passed to __dlpack__, so the producer orders its
// pending writes before that stream's work. Throws TypeError (not an array, another dtype) or InvalidArgument (not
// contiguous, a failed export), naming the array and what was expected.
ArrayView import_array(nb::handle object, const std::string& name, intptr_t cuda_stream);

// Runs `plan` on three arrays in Problem operand order (x, w, y or a, b, c): each is checked against the problem
// (its dtype against the element type, a convolution operand's shape, a GEMM operand's element count) and all
// against the plan's device. CUDA memory
// runs on `cuda_stream` without waiting for it; host memory on a kernel device is copied and the call returns when
// the written array holds the result.
void run_on_arrays(const Plan& plan, const std::array<nb::handle, 3>& arrays, intptr_t cuda_stream);

// Runs `plan` on raw addresses (PyTorch's data_ptr(), checked by the caller): host memory on the CPU device, device
// memory of a CUDA device on `cuda_stream`, host memory on an OpenCL device through copies (the call returns when the
// written operand holds the result). `workspace` (at least plan.workspace_bytes()) is used by plans made
// with an external workspace and must be 0 for the others. Then the epilogue's bias and residual, where the plan has
// them (0 otherwise).
void run_on_pointers(const Plan& plan, const std::array<uintptr_t, 5>& pointers, uintptr_t workspace,
                     intptr_t cuda_stream);

// A batch norm's forward (y, gamma, beta, residual, stats, a, running_mean, running_var) and backward (da, a, y,
// stats, gamma, dy, dgamma, dbeta, dresidual) on raw addresses, as run_on_pointers: 0 for the residual operands of a
// block without one and for running statistics not updated.
void batch_norm_forward_on_pointers(const BatchNormPlan& plan, Device& device, const std::array<uintptr_t, 8>& p,
                                    float eps, float momentum, uintptr_t workspace, intptr_t cuda_stream);
void batch_norm_backward_on_pointers(const BatchNormPlan& plan, Device& device, const std::array<uintptr_t, 9>& p,
                                     float eps, uintptr_t workspace, intptr_t cuda_stream);

}  // namespace convtune::python
