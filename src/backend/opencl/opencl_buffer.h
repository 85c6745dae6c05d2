// Device memory of the OpenCL backend: one cl_mem, tagged with its context so misuse across devices is caught.
#pragma once

#include <CL/cl.h>

#include <cstddef>

#include "convtune/backend.h"
#include "src/backend/opencl/opencl_handle.h"

namespace convtune::opencl {

class OpenCLBuffer final : public Buffer {
 public:
  OpenCLBuffer(ClHandle<cl_mem> memory, size_t bytes, cl_context context)
      : memory_(std::move(memory)), bytes_(bytes), context_(context) {}
  size_t bytes() const override { return bytes_; }
  cl_mem memory() const { return memory_.get(); }
  cl_context context() const { return context_; }

 private:
  ClHandle<cl_mem> memory_;
  size_t bytes_;  // as requested; a zero-byte buffer holds one byte because OpenCL forbids empty buffers
  cl_context context_;
};

}  // namespace convtune::opencl
