// A built OpenCL program: hands out kernels; shares its cl_program with later builds of the same source.
#pragma once

#include <CL/cl.h>

#include <memory>
#include <string>

#include "convtune/backend.h"
#include "src/backend/opencl/opencl_handle.h"

namespace convtune::opencl {

class OpenCLProgram final : public Program {
 public:
  OpenCLProgram(std::shared_ptr<const ClHandle<cl_program>> program, bool from_cache, std::string file,
                std::string device_id, cl_context context, cl_device_id device);
  std::unique_ptr<Kernel> kernel(const std::string& name) override;
  bool from_cache() const override { return from_cache_; }

 private:
  std::string kernel_names() const;  // for the message when a kernel is not found

  std::shared_ptr<const ClHandle<cl_program>> program_;
  bool from_cache_;
  std::string file_;
  std::string device_id_;
  cl_context context_;
  cl_device_id device_;
};

}  // namespace convtune::opencl
