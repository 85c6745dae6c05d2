// The OpenCL library, opened at run time with dlopen: a table of every cl* entry point convtune calls.
#pragma once

#include <CL/cl.h>

#include <string>

namespace convtune::opencl {

// Every OpenCL function convtune uses. Adding a call means adding it here, and nowhere else.
#define CONVTUNE_OPENCL_FUNCTIONS(X) \
  X(clGetPlatformIDs)                \
  X(clGetPlatformInfo)               \
  X(clGetDeviceIDs)                  \
  X(clGetDeviceInfo)                 \
  X(clCreateContext)                 \
  X(clReleaseContext)                \
  X(clCreateCommandQueue)            \
  X(clReleaseCommandQueue)           \
  X(clRetainCommandQueue)            \
  X(clGetCommandQueueInfo)           \
  X(clRetainContext)                 \
  X(clRetainMemObject)               \
  X(clGetMemObjectInfo)              \
  X(clCreateBuffer)                  \
  X(clReleaseMemObject)              \
  X(clEnqueueWriteBuffer)            \
  X(clEnqueueReadBuffer)             \
  X(clEnqueueCopyBuffer)             \
  X(clEnqueueFillBuffer)             \
  X(clEnqueueNDRangeKernel)          \
  X(clEnqueueMarkerWithWaitList)     \
  X(clFinish)                        \
  X(clWaitForEvents)                 \
  X(clGetEventProfilingInfo)         \
  X(clReleaseEvent)                  \
  X(clCreateProgramWithSource)       \
  X(clCreateProgramWithBinary)       \
  X(clBuildProgram)                  \
  X(clGetProgramInfo)                \
  X(clGetProgramBuildInfo)           \
  X(clReleaseProgram)                \
  X(clRetainProgram)                 \
  X(clCreateKernel)                  \
  X(clReleaseKernel)                 \
  X(clSetKernelArg)                  \
  X(clGetKernelWorkGroupInfo)

class OpenCLLibrary {
 public:
  // Opened once per process and never closed: ICDs start threads and register exit handlers that would
  // point into unmapped code after a dlclose.
  static const OpenCLLibrary& instance();

  // Empty when every function resolved; otherwise what is missing and how to install it.
  const std::string& load_error() const { return load_error_; }
  bool loaded() const { return load_error_.empty(); }
  // The file that was opened ("libOpenCL.so.1"), for messages.
  const std::string& library_name() const { return library_name_; }

#define CONVTUNE_OPENCL_DECLARE(name) decltype(&::name) name = nullptr;
  CONVTUNE_OPENCL_FUNCTIONS(CONVTUNE_OPENCL_DECLARE)
#undef CONVTUNE_OPENCL_DECLARE

 private:
  OpenCLLibrary();
  std::string load_error_;
  std::string library_name_;
};

// The loaded table; only call once OpenCLLibrary::instance().loaded() has been checked.
inline const OpenCLLibrary& cl() { return OpenCLLibrary::instance(); }

}  // namespace convtune::opencl
