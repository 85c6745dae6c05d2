// Kernel creation from a built program, with the program's kernel names when the one asked for is missing.
#include "src/backend/opencl/opencl_program.h"

#include <fmt/format.h>

#include <vector>

#include "convtune/error.h"
#include "src/backend/opencl/opencl_error.h"
#include "src/backend/opencl/opencl_kernel.h"

namespace convtune::opencl {

OpenCLProgram::OpenCLProgram(std::shared_ptr<const ClHandle<cl_program>> program, bool from_cache, std::string file,
                             std::string device_id, cl_context context, cl_device_id device)
    : program_(std::move(program)),
      from_cache_(from_cache),
      file_(std::move(file)),
      device_id_(std::move(device_id)),
      context_(context),
      device_(device) {}

std::string OpenCLProgram::kernel_names() const {
  size_t size = 0;
  if (cl().clGetProgramInfo(program_->get(), CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size) != CL_SUCCESS) return "?";
  std::vector<char> names(size);
  if (cl().clGetProgramInfo(program_->get(), CL_PROGRAM_KERNEL_NAMES, size, names.data(), nullptr) != CL_SUCCESS) {
    return "?";
  }
  std::string text(names.data());
  for (char& c : text)
    if (c == ';') c = ' ';
  return text.empty() ? "none" : text;
}

std::unique_ptr<Kernel> OpenCLProgram::kernel(const std::string& name) {
  cl_int status = CL_SUCCESS;
  ClHandle<cl_kernel> kernel(cl().clCreateKernel(program_->get(), name.c_str(), &status));
  if (status == CL_INVALID_KERNEL_NAME) {
    throw InvalidArgument(fmt::format("{} has no kernel named '{}' (it has: {})", file_, name, kernel_names()));
  }
  check_cl(status, "clCreateKernel", fmt::format("creating kernel {} of {} on {}", name, file_, device_id_));
  return std::make_unique<OpenCLKernel>(std::move(kernel), name, file_, device_id_, context_, device_);
}

}  // namespace convtune::opencl
