// The OpenCL backend: finds every platform's devices on first use and says why when there are none.
#include "src/backend/opencl/opencl_backend.h"

#include <CL/cl_ext.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <mutex>
#include <vector>

#include "convtune/error.h"
#include "src/backend/opencl/opencl_device.h"
#include "src/backend/opencl/opencl_device_info.h"
#include "src/backend/opencl/opencl_error.h"
#include "src/backend/opencl/opencl_loader.h"
#include "src/backend/program_cache.h"

namespace convtune::opencl {

namespace {

class OpenCLBackend final : public Backend {
 public:
  explicit OpenCLBackend(ProgramCache& cache) : cache_(cache) {}
  BackendKind kind() const override { return BackendKind::OpenCL; }
  std::string unavailable_reason() const override { return state().unavailable_reason; }
  size_t device_count() const override { return state().devices.size(); }
  Device& device(size_t index) override {
    auto& devices = state().devices;
    if (index >= devices.size()) {
      throw InvalidArgument(fmt::format("opencl:{} does not exist: the OpenCL backend has {} device(s)", index,
                                        devices.size()));
    }
    return *devices[index];
  }

 private:
  struct State {
    std::string unavailable_reason;
    std::vector<std::unique_ptr<OpenCLDevice>> devices;
  };

  // Enumerating loads libOpenCL and every ICD, which is slow and may print driver noise: only on first use.
  State& state() const {
    std::call_once(once_, [this] { discover(); });
    return state_;
  }

  void discover() const {
    const OpenCLLibrary& library = OpenCLLibrary::instance();
    if (!library.loaded()) {
      state_.unavailable_reason = library.load_error();
      return;
    }
    cl_uint platform_count = 0;
    const cl_int status = cl().clGetPlatformIDs(0, nullptr, &platform_count);
    // The Khronos and ocl-icd loaders answer CL_PLATFORM_NOT_FOUND_KHR when no ICD is registered.
    if (status == CL_PLATFORM_NOT_FOUND_KHR || (status == CL_SUCCESS && platform_count == 0)) {
      state_.unavailable_reason = fmt::format(
          "no OpenCL platform found: {} is installed but no platform is registered in /etc/OpenCL/vendors or "
          "$OCL_ICD_VENDORS (install one, e.g. Debian's pocl-opencl-icd)",
          library.library_name());
      return;
    }
    if (status != CL_SUCCESS) {
      state_.unavailable_reason = fmt::format("clGetPlatformIDs failed with {}", cl_error_name(status));
      return;
    }
    std::vector<cl_platform_id> platforms(platform_count);
    if (const cl_int s = cl().clGetPlatformIDs(platform_count, platforms.data(), nullptr); s != CL_SUCCESS) {
      state_.unavailable_reason = fmt::format("clGetPlatformIDs failed with {}", cl_error_name(s));
      return;
    }
    std::vector<std::string> problems;
    for (cl_platform_id platform : platforms) {
      // One broken platform must not hide the devices of the others, but it is reported.
      try {
        add_devices(platform);
      } catch (const Error& e) {
        problems.push_back(e.what());
      }
    }
    if (state_.devices.empty()) {
      state_.unavailable_reason = fmt::format("{} OpenCL platform(s) found, but no device{}{}", platforms.size(),
                                              problems.empty() ? "" : ": ", fmt::join(problems, "; "));
    } else {
      for (const auto& problem : problems) std::cerr << "convtune: an OpenCL platform was skipped: " << problem << "\n";
    }
  }

  void add_devices(cl_platform_id platform) const {
    cl_uint count = 0;
    cl_int status = cl().clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
    if (status == CL_DEVICE_NOT_FOUND || count == 0) return;
    const std::string platform_name = platform_text(platform, CL_PLATFORM_NAME);
    check_cl(status, "clGetDeviceIDs", "listing the devices of " + platform_name);
    std::vector<cl_device_id> ids(count);
    check_cl(cl().clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr), "clGetDeviceIDs",
             "listing the devices of " + platform_name);
    // Describe them all before adding any, so a failure leaves no half-listed platform behind.
    std::vector<std::unique_ptr<OpenCLDevice>> found;
    for (cl_device_id id : ids) {
      found.push_back(std::make_unique<OpenCLDevice>(platform, id, static_cast<int>(state_.devices.size() + found.size()),
                                                     cache_));
    }
    for (auto& device : found) state_.devices.push_back(std::move(device));
  }

  ProgramCache& cache_;
  mutable std::once_flag once_;
  mutable State state_;
};

}  // namespace

std::unique_ptr<Backend> make_opencl_backend() { return make_opencl_backend(ProgramCache::instance()); }

std::unique_ptr<Backend> make_opencl_backend(ProgramCache& cache) { return std::make_unique<OpenCLBackend>(cache); }

}  // namespace convtune::opencl
