// The OpenCL command queue: in-order, with profiling on, so elapsed_ms reads device timestamps.
#pragma once

#include <CL/cl.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "convtune/backend.h"
#include "src/backend/opencl/opencl_handle.h"

namespace convtune::opencl {

class OpenCLBuffer;

// Threads may share it: OpenCL's enqueue calls are thread-safe and the queue is in order. elapsed_ms records only
// the commands its own thread enqueues (another thread's commands in between still take queue time), and timings
// from two threads take turns.
class OpenCLQueue final : public Queue {
 public:
  OpenCLQueue(cl_context context, cl_device_id device, std::string device_id);
  // The caller's queue (retained): convtune's commands go there, in order with the caller's. Without
  // CL_QUEUE_PROFILING_ENABLE, elapsed_ms times with the host clock around a finish.
  OpenCLQueue(ClHandle<cl_command_queue> adopted, cl_context context, std::string device_id);
  void write(Buffer& dst, const void* src, size_t bytes, size_t offset) override;
  void read(const Buffer& src, void* dst, size_t bytes, size_t offset) override;
  void copy(const Buffer& src, Buffer& dst, size_t bytes) override;
  void launch(Kernel& kernel, const LaunchGeometry& geometry) override;
  void finish() override;
  double elapsed_ms(const std::function<void()>& work) override;

  cl_command_queue handle() const { return queue_.get(); }

  // Commands another library enqueues on this queue (CLBlast's) count in elapsed_ms like convtune's own:
  // `enqueue` receives the event slot to fill (null when not recording). A marker goes first, so a library that
  // enqueues several kernels but reports only its last one's event is still timed from its first command.
  void enqueue_foreign(const std::function<void(cl_event*)>& enqueue);
  // Whether marker commands carry profiling timestamps here (probed once); without them only the foreign
  // library's own event is timed.
  bool markers_are_timed();

 private:
  const OpenCLBuffer& own(const Buffer& buffer, const char* role) const;
  // Where an enqueue call should write its event: somewhere only while elapsed_ms records on this thread.
  cl_event* event_slot() { return recorder_.load() == std::this_thread::get_id() ? &pending_event_ : nullptr; }
  void keep_event(cl_event* slot);

  ClHandle<cl_command_queue> queue_;
  cl_context context_;
  std::string device_id_;
  // The thread elapsed_ms records for (a default id when none); pending_event_ and events_ are that thread's.
  std::atomic<std::thread::id> recorder_{};
  std::mutex timing_;  // one elapsed_ms at a time
  cl_event pending_event_ = nullptr;
  std::vector<ClHandle<cl_event>> events_;
  std::optional<bool> markers_are_timed_;
  bool profiling_ = true;
};

}  // namespace convtune::opencl
