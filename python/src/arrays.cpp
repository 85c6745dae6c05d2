// DLPack import (device, dtype, layout and shape checks with messages naming the operand), CUDA streams wrapped once
// per stream, and the three ways a plan runs on Python's arrays: in place on the host, in place on a CUDA device,
// or copied through a kernel device's own buffers.
#include "arrays.h"

#include <nanobind/stl/string.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "dlpack.h"

namespace convtune::python {

namespace {

std::string join(const std::vector<int64_t>& values) {
  std::string text = "(";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + (values.size() == 1 ? ",)" : ")");
}

std::string class_name(nb::handle object) { return nb::cast<std::string>(object.type().attr("__name__")); }

std::string dclass_name(const DLDataType& t) {
  const char* kind = t.code == kDLFloat ? "float" : t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint"
                     : t.code == kDLBfloat ? "bfloat" : t.code == kDLComplex ? "complex" : t.code == kDLBool ? "bool"
                                                                                                        : "code ";
  std::string text = kind;
  if (t.code > kDLBool) text += std::to_string(t.code) + " ";
  text += std::to_string(t.bits);
  if (t.lanes != 1) text += "x" + std::to_string(t.lanes);
  return text;
}

// The element type of a DLPack dtype convtune computes: float32, float16 (IEEE binary16) and bfloat16.
std::optional<ElementType> element_type(const DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 32) return ElementType::F32;
  if (t.code == kDLFloat && t.bits == 16) return ElementType::F16;
  if (t.code == kDLBfloat && t.bits == 16) return ElementType::BF16;
  return std::nullopt;
}

// The dtype of an element type as NumPy and PyTorch name it.
const char* dtype_name(ElementType type) {
  switch (type) {
    case ElementType::F32: return "float32";
    case ElementType::F16: return "float16";
    case ElementType::BF16: return "bfloat16";
  }
  return "?";
}

// The dense row-major shape each convolution operand must have (channels-last: the axes in memory order); empty for
// GEMM operands (their buffers are checked by element count, since leading dimensions and batch strides are the
// problem's).
std::vector<int64_t> expected_shape(const Problem& problem, int operand) {
  if (!problem.is_conv()) return {};
  const ConvProblem& c = problem.conv();
  if (c.layout == Layout::NHWC) {
    switch (operand) {
      case 0: return {c.n, c.h, c.w, c.c};
      case 1: return {c.k, c.r, c.s, c.c_per_group()};
      default: return {c.n, c.p(), c.q(), c.k};
    }
  }
  switch (operand) {
    case 0: return {c.n, c.c, c.h, c.w};
    case 1: return {c.k, c.c_per_group(), c.r, c.s};
    default: return {c.n, c.k, c.p(), c.q()};
  }
}

const char* shape_legend(const Problem& problem, int operand) {
  if (problem.is_conv() && problem.conv().layout == Layout::NHWC)
    return operand == 0 ? "(N, H, W, C)" : operand == 1 ? "(K, R, S, C/groups)" : "(N, P, Q, K)";
  return operand == 0 ? "(N, C, H, W)" : operand == 1 ? "(K, C/groups, R, S)" : "(N, K, P, Q)";
}

void check_against_problem(const Problem& problem, int operand, const ArrayView& view) {
  // The library reads buffers as the problem's element type whatever they hold, so a float32 array in a bf16 plan
  // (or the reverse) would be read as garbage: refused here, where the array's dtype is known.
  if (view.type != problem.type()) {
    throw InvalidArgument(view.name + ": dtype " + view.dtype + " does not fit the problem: expected " +
                          dtype_name(problem.type()) + " (its element type, type=" +
                          std::string(to_string(problem.type())) + ") for " + problem.to_string() +
                          ": every operand has the problem's dtype, which a Plan's math= sets ('bf16', 'fp16', or "
                          "'fp32' and its modes)");
  }
  const std::vector<int64_t> expected = expected_shape(problem, operand);
  if (!expected.empty()) {
    if (view.shape != expected) {
      throw InvalidArgument(view.name + ": shape " + join(view.shape) + " does not fit the problem: expected " +
                            join(expected) + " " + shape_legend(problem, operand) + " for " + problem.to_string());
    }
    return;
  }
  const int64_t elements = problem.operand(operand).elements;
  if (view.elements != elements) {
    throw InvalidArgument(view.name + ": " + std::to_string(view.elements) + " elements " +
                          join(view.shape) + " do not fit the problem: expected " + std::to_string(elements) +
                          " for " + problem.to_string());
  }
}

// Kernels read operands with 16-byte vector loads (float4, cp.async); the allocators of CUDA and PyTorch give
// 256-byte aligned memory, but a view into the middle of a tensor may start anywhere.
void check_alignment(const ArrayView& view, size_t alignment) {
  if (reinterpret_cast<uintptr_t>(view.data) % alignment != 0) {
    throw InvalidArgument(view.name + ": its data starts at an address that is not " + std::to_string(alignment) +
                          "-byte aligned (a view into the middle of another array?): convtune's kernels need " +
                          std::to_string(alignment) + "-byte aligned operands; pass a copy");
  }
}

// A convtune queue on a caller's CUDA stream, made once per device and stream (it holds two timing events).
// Kept for the life of the process: a queue may be used by a plan run any time, and streams are few.
Queue& cuda_queue(Device& device, intptr_t stream) {
  static std::mutex mutex;
  static auto* queues = new std::map<std::pair<Device*, intptr_t>, std::unique_ptr<Queue>>();
  std::lock_guard lock(mutex);
  std::unique_ptr<Queue>& queue = (*queues)[{&device, stream}];
  if (!queue) queue = wrap_cuda_stream(device, reinterpret_cast<void*>(stream));
  return *queue;
}

std::unique_ptr<Buffer> wrap_in_place(Device& device, std::byte* data, size_t bytes) {
  if (device.info().backend == BackendKind::Cpu) return wrap_host_buffer(device, data, bytes);
  return wrap_cuda_buffer(device, reinterpret_cast<uint64_t>(data), bytes);
}

}  // namespace

bool ArrayView::on_host() const {
  return device_type == kDLCPU || device_type == kDLCUDAHost;
}

std::string ArrayView::where() const {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDAHost: return "cpu (CUDA page-locked)";
    case kDLCUDA: return "cuda:" + std::to_string(device_id);
    case kDLCUDAManaged: return "cuda managed memory";
    case kDLOpenCL: return "opencl:" + std::to_string(device_id);
    case kDLROCM: return "rocm:" + std::to_string(device_id);
    default: return "DLPack device type " + std::to_string(device_type) + " " + std::to_string(device_id);
  }
}

std::pair<int32_t, int32_t> dlpack_device(nb::handle object, const std::string& name) {
  if (!nb::hasattr(object, "__dlpack__") || !nb::hasattr(object, "__dlpack_device__")) {
    throw nb::type_error((name + ": expected an array that speaks DLPack (__dlpack__ and __dlpack_device__), such as "
                          "a NumPy array or a PyTorch tensor, got " + class_name(object)).c_str());
  }
  nb::tuple device = nb::cast<nb::tuple>(object.attr("__dlpack_device__")());
  return {nb::cast<int32_t>(nb::int_(device[0])), nb::cast<int32_t>(nb::int_(device[1]))};
}

ArrayView import_array(nb::handle object, const std::string& name, intptr_t cuda_stream) {
  ArrayView view;
  view.name = name;
  std::tie(view.device_type, view.device_id) = dlpack_device(object, name);
  // The protocol's stream numbers for CUDA: 1 is the legacy default stream (0 is not allowed), else the handle.
  const bool cuda = view.device_type == kDLCUDA || view.device_type == kDLCUDAManaged;
  const intptr_t stream = cuda_stream == 0 ? intptr_t{1} : cuda_stream;
  nb::object export_ = object.attr("__dlpack__");
  bool versioned = true;
  try {
    try {
      view.capsule = cuda ? export_(nb::arg("stream") = stream, nb::arg("max_version") = nb::make_tuple(1, 0))
                          : export_(nb::arg("max_version") = nb::make_tuple(1, 0));
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_TypeError)) throw;
      versioned = false;  // a producer older than DLPack 1.0 knows no max_version
      view.capsule = cuda ? export_(nb::arg("stream") = stream) : export_();
    }
  } catch (nb::python_error& e) {
    throw InvalidArgument(name + ": " + class_name(object) + ".__dlpack__() failed: " +
                          nb::cast<std::string>(nb::steal<nb::str>(PyObject_Str(e.value().ptr()))));
  }
  const DLTensor* tensor = nullptr;
  if (versioned && PyCapsule_IsValid(view.capsule.ptr(), kDLTensorVersionedCapsule)) {
    auto* managed =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(view.capsule.ptr(), kDLTensorVersionedCapsule));
    if (managed->version.major != 1) {
      throw nb::type_error((name + ": " + class_name(object) + ".__dlpack__() returned DLPack " +
                            std::to_string(managed->version.major) + ".x, not the 1.x asked for").c_str());
    }
    tensor = &managed->dl_tensor;
    view.read_only = (managed->flags & kDLFlagReadOnly) != 0;
  } else if (PyCapsule_IsValid(view.capsule.ptr(), kDLTensorCapsule)) {
    tensor = &static_cast<DLManagedTensor*>(PyCapsule_GetPointer(view.capsule.ptr(), kDLTensorCapsule))->dl_tensor;
  } else {
    throw nb::type_error((name + ": " + class_name(object) + ".__dlpack__() returned no unused DLPack capsule").c_str());
  }
  const DLTensor& t = *tensor;
  view.dtype = dclass_name(t.dtype);
  std::optional<ElementType> type = element_type(t.dtype);
  // NumPy exports no bfloat16 (ml_dtypes' is no NumPy type to DLPack): the package hands such an array over as its
  // uint16 bits in a wrapper that says so (convtune/_arrays.py).
  if (!type && t.dtype.code == kDLUInt && t.dtype.bits == 16 && t.dtype.lanes == 1 &&
      nb::hasattr(object, "_convtune_bfloat16_bits")) {
    type = ElementType::BF16;
    view.dtype = "bfloat16";
  }
  if (!type) {
    throw nb::type_error((name + ": dtype " + view.dtype + " is not supported: convtune computes float32, float16 "
                          "and bfloat16 arrays (convert with .astype(numpy.float32) or .float())").c_str());
  }
  view.type = *type;
  view.shape.assign(t.shape, t.shape + t.ndim);
  int64_t elements = 1;
  for (int64_t extent : view.shape) elements *= extent;
  // Dense row-major: every axis longer than one element steps by the product of the extents after it.
  if (t.strides) {
    int64_t expected = 1;
    for (int32_t axis = t.ndim - 1; axis >= 0; --axis) {
      if (view.shape[static_cast<size_t>(axis)] != 1 && t.strides[axis] != expected) {
        throw InvalidArgument(name + ": the array is not contiguous (strides " +
                              join(std::vector<int64_t>(t.strides, t.strides + t.ndim)) + " for shape " +
                              join(view.shape) + "): convtune reads dense row-major arrays (NCHW for images); pass "
                              "numpy.ascontiguousarray(a) or tensor.contiguous()");
      }
      expected *= view.shape[static_cast<size_t>(axis)];
    }
  }
  view.data = static_cast<std::byte*>(t.data) + t.byte_offset;
  view.elements = elements;
  view.bytes = static_cast<size_t>(elements) * static_cast<size_t>(bytes_per_element(view.type));
  return view;
}

void run_on_arrays(const Plan& plan, const std::array<nb::handle, 3>& arrays, intptr_t cuda_stream) {
  const Problem& problem = plan.problem();
  std::array<ArrayView, 3> views;
  for (int i = 0; i < 3; ++i) views[i] = import_array(arrays[i], problem.operand(i).name, cuda_stream);
  // The inputs first: an output made by the package for this plan fits it, so a mismatch names the caller's array.
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < 3; ++i) {
      if ((i == problem.written_operand()) == (pass == 0)) continue;
      check_against_problem(problem, i, views[i]);
    }
  }
  for (int i = 1; i < 3; ++i) {
    if (views[i].device_type != views[0].device_type || views[i].device_id != views[0].device_id) {
      throw InvalidArgument("the operands are on different devices: " + views[0].name + " on " + views[0].where() +
                            ", " + views[i].name + " on " + views[i].where() + ": expected all on one device");
    }
  }
  Device& device = plan.device();
  const DeviceInfo& info = device.info();
  const ArrayView& first = views[0];
  const bool cuda_memory = first.device_type == kDLCUDA || first.device_type == kDLCUDAManaged;
  const bool in_place = (info.backend == BackendKind::Cpu && first.on_host()) ||
                        (info.backend == BackendKind::Cuda && cuda_memory && first.device_id == info.index);
  if (!in_place && !(first.on_host() && info.can_run_kernels)) {
    throw InvalidArgument("the operands are on " + first.where() + " but the plan runs on " + info.id + " (" +
                          info.name + "): expected arrays in its memory" +
                          (info.backend == BackendKind::Cpu ? "" : " or host arrays, which are copied"));
  }
  for (const ArrayView& v : views) {
    check_alignment(v, info.backend == BackendKind::Cpu ? static_cast<size_t>(bytes_per_element(v.type)) : 16);
  }
  const ArrayView& written = views[problem.written_operand()];
  if (written.read_only) {
    throw InvalidArgument(written.name + ": the array is read-only, but the result is written into it: pass a "
                          "writable one");
  }

  nb::gil_scoped_release released;
  std::array<std::unique_ptr<Buffer>, 3> buffers;
  if (in_place) {
    for (int i = 0; i < 3; ++i) buffers[i] = wrap_in_place(device, views[i].data, views[i].bytes);
    Queue& queue = info.backend == BackendKind::Cuda ? cuda_queue(device, cuda_stream) : device.queue();
    plan.run(queue, {buffers[0].get(), buffers[1].get(), buffers[2].get()});
    return;
  }
  // Host arrays on a kernel device: through the device's own buffers and queue. The written operand goes up too,
  // since a GEMM that accumulates reads it.
  Queue& queue = device.queue();
  for (int i = 0; i < 3; ++i) {
    buffers[i] = device.allocate(views[i].bytes);
    queue.write(*buffers[i], views[i].data, views[i].bytes);
  }
  plan.run(queue, {buffers[0].get(), buffers[1].get(), buffers[2].get()});
  const int index = problem.written_operand();
  queue.read(*buffers[index], views[index].data, views[index].bytes);
}

void run_on_pointers(const Plan& plan, const std::array<uintptr_t, 5>& pointers, uintptr_t workspace,
                     intptr_t cuda_stream) {
  Device& device = plan.device();
  const BackendKind backend = device.info().backend;
  const bool staged = backend == BackendKind::OpenCL;  // host memory through the device's own buffers
  if (staged && !device.info().can_run_kernels) {
    throw InvalidArgument(device.info().id + " cannot run kernels: " + device.info().cannot_run_reason);
  }
  nb::gil_scoped_release released;
  std::array<std::unique_ptr<Buffer>, 5> buffers;
  Queue& queue = backend == BackendKind::Cuda ? cuda_queue(device, cuda_stream) : device.queue();
  for (int i = 0; i < 5; ++i) {
    const size_t bytes = plan.descriptor().operand_bytes(i);
    if (bytes == 0) continue;  // an epilogue operand the plan does not use
    if (pointers[i] == 0) {
      const std::string name =
          i == kBiasOperand ? "bias" : i == kResidualOperand ? "residual" : plan.problem().operand(i).name;
      throw InvalidArgument(name + ": the address is null");
    }
    if (staged) {
      buffers[i] = device.allocate(bytes);
      queue.write(*buffers[i], reinterpret_cast<const void*>(pointers[i]), bytes);
    } else {
      buffers[i] = wrap_in_place(device, reinterpret_cast<std::byte*>(pointers[i]), bytes);
    }
  }
  std::unique_ptr<Buffer> workspace_buffer;
  if (workspace != 0 && !staged) {
    workspace_buffer = wrap_in_place(device, reinterpret_cast<std::byte*>(workspace), plan.memory_bytes());
  }
  plan.run(queue, {buffers[0].get(), buffers[1].get(), buffers[2].get(), buffers[3].get(), buffers[4].get()},
           workspace_buffer.get());
  if (staged) {
    const int written = plan.problem().written_operand();
    queue.read(*buffers[written], reinterpret_cast<void*>(pointers[written]), plan.descriptor().operand_bytes(written));
    queue.finish();
  }
}

namespace {

// The batch norm's operands: wrapped in place (the CPU device, CUDA), or on an OpenCL device device buffers the host
// memory is copied into (inputs) and out of (outputs, by finish()). Null for a 0 address of an optional operand.
struct BatchNormBuffers {
  Device& device;
  Queue& queue;
  std::vector<std::unique_ptr<Buffer>> owned;
  std::vector<std::pair<const Buffer*, uintptr_t>> outputs;
  std::vector<size_t> output_bytes;
  bool staged() const { return device.info().backend == BackendKind::OpenCL; }
  const Buffer* wrap(uintptr_t address, size_t bytes, const char* name, bool output, bool optional = false) {
    if (address == 0) {
      if (optional) return nullptr;
      throw InvalidArgument(std::string(name) + ": the address is null");
    }
    if (!staged()) {
      owned.push_back(wrap_in_place(device, reinterpret_cast<std::byte*>(address), bytes));
    } else {
      owned.push_back(device.allocate(bytes));
      if (output) {
        outputs.emplace_back(owned.back().get(), address);
        output_bytes.push_back(bytes);
      } else {
        queue.write(*owned.back(), reinterpret_cast<const void*>(address), bytes);
      }
    }
    return owned.back().get();
  }
  void also_output(const Buffer* buffer, uintptr_t address, size_t bytes) {
    outputs.emplace_back(buffer, address);
    output_bytes.push_back(bytes);
  }
  const Buffer* workspace(uintptr_t address, size_t bytes) {
    if (staged()) {
      owned.push_back(device.allocate(bytes));
      return owned.back().get();
    }
    return wrap(address, bytes, "workspace", false);
  }
  void finish() {
    if (!staged()) return;
    for (size_t i = 0; i < outputs.size(); ++i)
      queue.read(*outputs[i].first, reinterpret_cast<void*>(outputs[i].second), output_bytes[i]);
    queue.finish();
  }
};

Queue& queue_for(Device& device, intptr_t cuda_stream) {
  const BackendKind backend = device.info().backend;
  if (backend == BackendKind::OpenCL && !device.info().can_run_kernels)
    throw InvalidArgument(device.info().id + " cannot run kernels: " + device.info().cannot_run_reason);
  return backend == BackendKind::Cuda ? cuda_queue(device, cuda_stream) : device.queue();
}

size_t tensor_bytes(const BatchNormPlan& plan) {
  return static_cast<size_t>(plan.problem().elements()) * static_cast<size_t>(bytes_per_element(plan.problem().type));
}

}  // namespace

void batch_norm_forward_on_pointers(const BatchNormPlan& plan, Device& device, const std::array<uintptr_t, 8>& p,
                                    float eps, float momentum, uintptr_t workspace, intptr_t cuda_stream) {
  Queue& queue = queue_for(device, cuda_stream);
  nb::gil_scoped_release released;
  BatchNormBuffers b{device, queue, {}, {}, {}};
  const size_t t = tensor_bytes(plan), v = static_cast<size_t>(plan.problem().c) * sizeof(float);
  BatchNormForward f;
  f.y = b.wrap(p[0], t, "y", false);
  f.gamma = b.wrap(p[1], v, "gamma", false);
  f.beta = b.wrap(p[2], v, "beta", false);
  f.residual = b.wrap(p[3], t, "residual", false, true);
  f.stats = b.wrap(p[4], 2 * v, "stats", true);
  f.a = b.wrap(p[5], t, "a", true);
  // Read and written: copied both ways on a staged device.
  f.running_mean = b.wrap(p[6], v, "running_mean", false, true);
  f.running_var = b.wrap(p[7], v, "running_var", false, true);
  if (b.staged()) {
    if (f.running_mean) b.also_output(f.running_mean, p[6], v);
    if (f.running_var) b.also_output(f.running_var, p[7], v);
  }
  f.momentum = momentum;
  f.eps = eps;
  plan.forward(queue, f, *b.workspace(workspace, plan.workspace_bytes()));
  b.finish();
}

void batch_norm_backward_on_pointers(const BatchNormPlan& plan, Device& device, const std::array<uintptr_t, 9>& p,
                                     float eps, uintptr_t workspace, intptr_t cuda_stream) {
  Queue& queue = queue_for(device, cuda_stream);
  nb::gil_scoped_release released;
  BatchNormBuffers b{device, queue, {}, {}, {}};
  const size_t t = tensor_bytes(plan), v = static_cast<size_t>(plan.problem().c) * sizeof(float);
  BatchNormBackward g;
  g.da = b.wrap(p[0], t, "da", false);
  g.a = b.wrap(p[1], t, "a", false);
  g.y = b.wrap(p[2], t, "y", false);
  g.stats = b.wrap(p[3], 2 * v, "stats", false);
  g.gamma = b.wrap(p[4], v, "gamma", false);
  g.dy = b.wrap(p[5], t, "dy", true);
  g.dgamma = b.wrap(p[6], v, "dgamma", true);
  g.dbeta = b.wrap(p[7], v, "dbeta", true);
  g.dresidual = b.wrap(p[8], t, "dresidual", true, true);
  g.eps = eps;
  plan.backward(queue, g, *b.workspace(workspace, plan.workspace_bytes()));
  b.finish();
}

}  // namespace convtune::python
