// Owning, move-only handles for OpenCL objects, released through the dlopen'd function table.
#pragma once

#include <CL/cl.h>

#include <utility>

#include "src/backend/opencl/opencl_loader.h"

namespace convtune::opencl {

inline void release_cl_object(cl_context object) { cl().clReleaseContext(object); }
inline void release_cl_object(cl_command_queue object) { cl().clReleaseCommandQueue(object); }
inline void release_cl_object(cl_mem object) { cl().clReleaseMemObject(object); }
inline void release_cl_object(cl_program object) { cl().clReleaseProgram(object); }
inline void release_cl_object(cl_kernel object) { cl().clReleaseKernel(object); }
inline void release_cl_object(cl_event object) { cl().clReleaseEvent(object); }

template <typename Object>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(Object object) : object_(object) {}
  ClHandle(const ClHandle&) = delete;
  ClHandle& operator=(const ClHandle&) = delete;
  ClHandle(ClHandle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  ClHandle& operator=(ClHandle&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }
  ~ClHandle() { reset(); }

  Object get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }
  void reset() {
    if (object_) release_cl_object(std::exchange(object_, nullptr));
  }

 private:
  Object object_ = nullptr;
};

}  // namespace convtune::opencl
