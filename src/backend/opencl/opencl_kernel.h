// One cl_kernel of a built program: arguments set from KernelArg values, launched by OpenCLQueue.
#pragma once

#include <CL/cl.h>

#include <string>

#include "convtune/backend.h"
#include "src/backend/opencl/opencl_handle.h"

namespace convtune::opencl {

class OpenCLKernel final : public Kernel {
 public:
  // `file` and `device_id` only label error messages.
  OpenCLKernel(ClHandle<cl_kernel> kernel, std::string name, std::string file, std::string device_id,
               cl_context context, cl_device_id device);
  const std::string& name() const override { return name_; }
  void set_arg(int index, const KernelArg& value) override;

  cl_kernel handle() const { return kernel_.get(); }
  cl_context context() const { return context_; }
  // "kernel axpy of test/axpy.cl on opencl:0", for messages.
  std::string describe() const;
  // CL_KERNEL_WORK_GROUP_SIZE: the largest work-group this kernel can launch with (registers, local memory).
  size_t max_work_group_size() const;

 private:
  ClHandle<cl_kernel> kernel_;
  std::string name_;
  std::string file_;
  std::string device_id_;
  cl_context context_;
  cl_device_id device_;
};

}  // namespace convtune::opencl
