// Kernel arguments: buffers become their cl_mem, scalars and raw structs are passed by value.
#include "src/backend/opencl/opencl_kernel.h"

#include <fmt/format.h>

#include <type_traits>

#include "convtune/error.h"
#include "src/backend/opencl/opencl_buffer.h"
#include "src/backend/opencl/opencl_error.h"

namespace convtune::opencl {

OpenCLKernel::OpenCLKernel(ClHandle<cl_kernel> kernel, std::string name, std::string file, std::string device_id,
                           cl_context context, cl_device_id device)
    : kernel_(std::move(kernel)),
      name_(std::move(name)),
      file_(std::move(file)),
      device_id_(std::move(device_id)),
      context_(context),
      device_(device) {}

std::string OpenCLKernel::describe() const {
  return fmt::format("kernel {} of {} on {}", name_, file_, device_id_);
}

size_t OpenCLKernel::max_work_group_size() const {
  size_t size = 0;
  check_cl(cl().clGetKernelWorkGroupInfo(kernel_.get(), device_, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size), &size,
                                         nullptr),
           "clGetKernelWorkGroupInfo", "reading CL_KERNEL_WORK_GROUP_SIZE of " + describe());
  return size;
}

void OpenCLKernel::set_arg(int index, const KernelArg& value) {
  const void* data = nullptr;
  size_t size = 0;
  cl_mem memory = nullptr;
  std::string shown;  // the argument as a message shows it
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, const Buffer*>) {
          if (v) {
            const auto* buffer = dynamic_cast<const OpenCLBuffer*>(v);
            if (!buffer) {
              throw InvalidArgument(fmt::format("argument {} of {}: the buffer was not allocated by an OpenCL device",
                                                index, describe()));
            }
            if (buffer->context() != context_) {
              throw InvalidArgument(fmt::format("argument {} of {}: the buffer belongs to another OpenCL device", index,
                                                describe()));
            }
            memory = buffer->memory();
          }
          data = &memory;  // a null cl_mem is OpenCL's null pointer argument
          size = sizeof(cl_mem);
          shown = fmt::format("a {}-byte buffer", v ? v->bytes() : 0);
        } else if constexpr (std::is_same_v<T, RawArg>) {
          data = v.bytes.data();
          size = v.bytes.size();
          shown = fmt::format("{} raw bytes", size);
        } else {
          data = &v;
          size = sizeof(v);
          shown = fmt::format("{} ({} bytes)", v, size);
        }
      },
      value);
  check_cl(cl().clSetKernelArg(kernel_.get(), static_cast<cl_uint>(index), size, data), "clSetKernelArg",
           fmt::format("setting argument {} of {} to {}", index, describe(), shown));
}

}  // namespace convtune::opencl
