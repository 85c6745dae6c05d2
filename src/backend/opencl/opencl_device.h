// One OpenCL device: its description, and (created on first use) its context, queue, buffers and programs.
#pragma once

#include <CL/cl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "src/backend/opencl/opencl_handle.h"
#include "src/backend/opencl/opencl_queue.h"

namespace convtune {
class ProgramCache;
}

namespace convtune::opencl {

class OpenCLDevice final : public Device {
 public:
  // `index` numbers devices across all platforms; `cache` must outlive the device.
  OpenCLDevice(cl_platform_id platform, cl_device_id device, int index, ProgramCache& cache);
  // A device on the caller's command queue and its context (both retained): programs are built in that context
  // and every command goes to that queue (convtune/interop.h).
  OpenCLDevice(cl_command_queue queue, ProgramCache& cache);

  // A cl_mem of this device's context, used in place (retained); `bytes` 0 means its whole size.
  std::unique_ptr<Buffer> wrap_memory(cl_mem memory, size_t bytes);
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override;
  Queue& queue() override;
  std::shared_ptr<Program> build(const ProgramSource& source) override;

 private:
  // Contexts and queues are made on first use so that listing devices touches no device.
  OpenCLQueue& runtime();
  cl_context context() {
    runtime();
    return context_.get();
  }
  std::string describe() const;  // "opencl:0 (name)"
  // Source -> built program; throws BackendError with the build log when it does not compile.
  ClHandle<cl_program> compile_source(cl_context context, const std::string& text, const std::string& options,
                                      const ProgramSource& source);
  // A context of this device for one compile on a worker thread, and its return once the compile is done. PoCL
  // compiles under one lock per context, so builds in the device's own context run one at a time whatever the
  // number of threads; a context per concurrent build lets them run in parallel. Only for CPU devices, whose
  // contexts cost no device memory.
  ClHandle<cl_context> take_compile_context();
  void return_compile_context(ClHandle<cl_context> context);
  // Empty handle and `problem` set when the driver rejects the binary.
  ClHandle<cl_program> load_binary(const std::vector<std::byte>& binary, const std::string& options,
                                   std::string& problem);

  cl_platform_id platform_;
  cl_device_id device_;
  DeviceInfo info_;
  uint64_t max_allocation_bytes_ = 0;
  ProgramCache& cache_;

  std::mutex runtime_mutex_;  // guards context_ and queue_ while they are created
  ClHandle<cl_context> context_;
  std::unique_ptr<OpenCLQueue> queue_;
  // Held through a whole build so one program is not compiled twice at once; separate from runtime_mutex_
  // so a long compile does not stall allocations on another thread.
  std::mutex programs_mutex_;
  // Built programs by ProgramCacheKey hash, so building the same source and parameters again is free.
  std::map<std::string, std::shared_ptr<const ClHandle<cl_program>>> programs_;
  std::atomic<bool> reported_rejected_binary_{false};  // builds run on several threads
  bool separate_compile_contexts_ = false;
  std::mutex compile_contexts_mutex_;
  std::vector<ClHandle<cl_context>> idle_compile_contexts_;  // made as concurrent builds need them, then reused
};

}  // namespace convtune::opencl
