// Transfers, launches and device-event timing on one in-order OpenCL queue.
#include "src/backend/opencl/opencl_queue.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <span>

#include "convtune/error.h"
#include "src/backend/opencl/opencl_buffer.h"
#include "src/backend/opencl/opencl_error.h"
#include "src/backend/opencl/opencl_kernel.h"

namespace convtune::opencl {

namespace {

void check_range(const Buffer& buffer, size_t bytes, size_t offset, const char* what) {
  if (offset > buffer.bytes() || bytes > buffer.bytes() - offset) {
    throw BackendError(fmt::format("{} of {} bytes at offset {} overruns a {}-byte buffer", what, bytes, offset,
                                   buffer.bytes()));
  }
}

std::string shape(const LaunchGeometry& g, const std::array<size_t, 3>& sizes) {
  return fmt::format("{}", fmt::join(std::span(sizes.data(), static_cast<size_t>(std::clamp(g.dims, 1, 3))), "x"));
}

}  // namespace

OpenCLQueue::OpenCLQueue(cl_context context, cl_device_id device, std::string device_id)
    : context_(context), device_id_(std::move(device_id)) {
  cl_int status = CL_SUCCESS;
  // clCreateCommandQueue is deprecated in OpenCL 2.0 but is the one call every platform (NVIDIA's 3.0 too) has.
  queue_ = ClHandle<cl_command_queue>(cl().clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &status));
  check_cl(status, "clCreateCommandQueue", "creating the profiling command queue of " + device_id_);
}

OpenCLQueue::OpenCLQueue(ClHandle<cl_command_queue> adopted, cl_context context, std::string device_id)
    : queue_(std::move(adopted)), context_(context), device_id_(std::move(device_id)) {
  cl_command_queue_properties properties = 0;
  check_cl(cl().clGetCommandQueueInfo(queue_.get(), CL_QUEUE_PROPERTIES, sizeof properties, &properties, nullptr),
           "clGetCommandQueueInfo", "reading the properties of the queue wrapped for " + device_id_);
  profiling_ = (properties & CL_QUEUE_PROFILING_ENABLE) != 0;
  markers_are_timed_ = profiling_ ? std::nullopt : std::optional<bool>(false);
}

const OpenCLBuffer& OpenCLQueue::own(const Buffer& buffer, const char* role) const {
  const auto* cl_buffer = dynamic_cast<const OpenCLBuffer*>(&buffer);
  if (!cl_buffer) {
    throw InvalidArgument(fmt::format("{} buffer was not allocated by an OpenCL device ({} queue)", role, device_id_));
  }
  if (cl_buffer->context() != context_) {
    throw InvalidArgument(fmt::format("{} buffer belongs to another OpenCL device than {}", role, device_id_));
  }
  return *cl_buffer;
}

void OpenCLQueue::keep_event(cl_event* slot) {
  if (slot && *slot) events_.emplace_back(std::exchange(*slot, nullptr));
}

void OpenCLQueue::write(Buffer& dst, const void* src, size_t bytes, size_t offset) {
  const OpenCLBuffer& buffer = own(dst, "write destination");
  check_range(dst, bytes, offset, "write");
  if (bytes == 0) return;
  // Blocking, so the caller may reuse `src` as soon as this returns.
  cl_event* slot = event_slot();
  check_cl(cl().clEnqueueWriteBuffer(queue_.get(), buffer.memory(), CL_TRUE, offset, bytes, src, 0, nullptr, slot),
           "clEnqueueWriteBuffer", fmt::format("writing {} bytes at offset {} on {}", bytes, offset, device_id_));
  keep_event(slot);
}

void OpenCLQueue::read(const Buffer& src, void* dst, size_t bytes, size_t offset) {
  const OpenCLBuffer& buffer = own(src, "read source");
  check_range(src, bytes, offset, "read");
  if (bytes == 0) return;
  cl_event* slot = event_slot();
  check_cl(cl().clEnqueueReadBuffer(queue_.get(), buffer.memory(), CL_TRUE, offset, bytes, dst, 0, nullptr, slot),
           "clEnqueueReadBuffer", fmt::format("reading {} bytes at offset {} on {}", bytes, offset, device_id_));
  keep_event(slot);
}

void OpenCLQueue::copy(const Buffer& src, Buffer& dst, size_t bytes) {
  const OpenCLBuffer& from = own(src, "copy source");
  const OpenCLBuffer& to = own(dst, "copy destination");
  check_range(src, bytes, 0, "copy source");
  check_range(dst, bytes, 0, "copy destination");
  if (bytes == 0) return;
  // Not blocking: the queue is in order, so every later command sees the copy done.
  cl_event* slot = event_slot();
  check_cl(cl().clEnqueueCopyBuffer(queue_.get(), from.memory(), to.memory(), 0, 0, bytes, 0, nullptr, slot),
           "clEnqueueCopyBuffer", fmt::format("copying {} bytes on {}", bytes, device_id_));
  keep_event(slot);
}

void OpenCLQueue::launch(Kernel& kernel, const LaunchGeometry& geometry) {
  auto* cl_kernel = dynamic_cast<OpenCLKernel*>(&kernel);
  if (!cl_kernel) throw InvalidArgument(fmt::format("kernel {} was not built by an OpenCL device", kernel.name()));
  if (cl_kernel->context() != context_) {
    throw InvalidArgument(fmt::format("{} cannot run on the queue of {}", cl_kernel->describe(), device_id_));
  }
  if (geometry.dims < 1 || geometry.dims > 3) {
    throw InvalidArgument(fmt::format("{}: launch dims must be 1, 2 or 3, not {}", cl_kernel->describe(), geometry.dims));
  }
  const bool runtime_chooses_local =
      std::all_of(geometry.local.begin(), geometry.local.end(), [](size_t n) { return n == 0; });
  cl_event* slot = event_slot();
  const cl_int status = cl().clEnqueueNDRangeKernel(queue_.get(), cl_kernel->handle(),
                                                    static_cast<cl_uint>(geometry.dims), nullptr,
                                                    geometry.global.data(),
                                                    runtime_chooses_local ? nullptr : geometry.local.data(), 0, nullptr,
                                                    slot);
  if (status != CL_SUCCESS) {
    std::string doing = fmt::format("launching {} with global {} and local {}", cl_kernel->describe(),
                                    shape(geometry, geometry.global),
                                    runtime_chooses_local ? "chosen by the runtime" : shape(geometry, geometry.local));
    if (status == CL_INVALID_WORK_GROUP_SIZE || status == CL_OUT_OF_RESOURCES) {
      // The usual causes, so the message can be acted on without reading the spec.
      doing += fmt::format(" (global must be a multiple of local per axis, and this kernel allows at most {} "
                           "work-items per group)",
                           cl_kernel->max_work_group_size());
    }
    check_cl(status, "clEnqueueNDRangeKernel", doing);
  }
  keep_event(slot);
}

void OpenCLQueue::finish() { check_cl(cl().clFinish(queue_.get()), "clFinish", "waiting for the queue of " + device_id_); }

bool OpenCLQueue::markers_are_timed() {
  if (!markers_are_timed_) {
    cl_event marker = nullptr;
    bool timed = false;
    if (cl().clEnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, &marker) == CL_SUCCESS && marker) {
      ClHandle<cl_event> owned(marker);
      cl_ulong start = 0, end = 0;
      timed = cl().clWaitForEvents(1, &marker) == CL_SUCCESS &&
              cl().clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) ==
                  CL_SUCCESS &&
              cl().clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) ==
                  CL_SUCCESS &&
              start > 0 && end >= start;
    }
    markers_are_timed_ = timed;
  }
  return *markers_are_timed_;
}

void OpenCLQueue::enqueue_foreign(const std::function<void(cl_event*)>& enqueue) {
  cl_event* slot = event_slot();
  if (slot && markers_are_timed()) {
    check_cl(cl().clEnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, slot), "clEnqueueMarkerWithWaitList",
             "marking the start of another library's commands on " + device_id_);
    keep_event(slot);
  }
  enqueue(slot);
  keep_event(slot);
}

double OpenCLQueue::elapsed_ms(const std::function<void()>& work) {
  if (recorder_.load() == std::this_thread::get_id())
    throw BackendError(fmt::format("elapsed_ms calls on {} cannot be nested", device_id_));
  // Another thread's timing finishes first: its events and this one's are kept apart.
  const std::lock_guard timing(timing_);
  if (!profiling_) {
    // A wrapped queue without profiling: everything queued before is drained first, so the host clock sees only
    // `work`, then waited for.
    finish();
    const auto start = std::chrono::steady_clock::now();
    work();
    finish();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  events_.clear();
  recorder_ = std::this_thread::get_id();
  // Events are released and recording stops however `work` ends.
  struct StopRecording {
    OpenCLQueue& queue;
    ~StopRecording() {
      queue.recorder_ = std::thread::id();
      queue.events_.clear();
    }
  } stop{*this};
  work();
  recorder_ = std::thread::id();
  if (events_.empty()) return 0.0;

  std::vector<cl_event> waiting;
  waiting.reserve(events_.size());
  for (const auto& e : events_) waiting.push_back(e.get());
  check_cl(cl().clWaitForEvents(static_cast<cl_uint>(waiting.size()), waiting.data()), "clWaitForEvents",
           fmt::format("waiting for {} timed commands on {}", waiting.size(), device_id_));
  // In an in-order queue the first command starts first and the last ends last; min/max says the same
  // without trusting that.
  cl_ulong first_start = std::numeric_limits<cl_ulong>::max(), last_end = 0;
  for (cl_event event : waiting) {
    cl_ulong start = 0, end = 0;
    check_cl(cl().clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr),
             "clGetEventProfilingInfo", "reading a command's start time on " + device_id_);
    check_cl(cl().clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr),
             "clGetEventProfilingInfo", "reading a command's end time on " + device_id_);
    first_start = std::min(first_start, start);
    last_end = std::max(last_end, end);
  }
  return last_end > first_start ? static_cast<double>(last_end - first_start) * 1e-6 : 0.0;
}

}  // namespace convtune::opencl
