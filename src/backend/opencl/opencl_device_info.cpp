// Reads what convtune needs to know about an OpenCL device: identity, compiler, sizes, and whether it can run.
#include "src/backend/opencl/opencl_device_info.h"

#include <CL/cl_ext.h>
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "convtune/error.h"
#include "src/backend/opencl/opencl_error.h"
#include "src/backend/opencl/opencl_loader.h"

namespace convtune::opencl {

namespace {

// OpenCL strings end in a NUL and some drivers pad them with spaces.
std::string trimmed(std::vector<char> bytes) {
  std::string text(bytes.begin(), bytes.end());
  const auto end = text.find_last_not_of(std::string_view(" \t\n\0", 4));
  return end == std::string::npos ? std::string() : text.substr(0, end + 1);
}

// PoCL's platform version has runs of spaces ("3.1+debian  Linux"); one space reads better in listings.
std::string single_spaced(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != ' ' || out.empty() || out.back() != ' ') out.push_back(c);
  return out;
}

bool has_extension(const std::string& extensions, std::string_view name) {
  size_t pos = 0;
  while ((pos = extensions.find(name, pos)) != std::string::npos) {
    const size_t end = pos + name.size();
    if ((pos == 0 || extensions[pos - 1] == ' ') && (end == extensions.size() || extensions[end] == ' ')) return true;
    pos = end;
  }
  return false;
}

// A text property through the two calls clGet*Info takes: its size, then its bytes. `get(size, out, size_out)`
// calls `call` for the property `what` of a `kind` (platform, device).
template <typename Get>
std::string text_property(const Get& get, std::string_view call, std::string_view kind, cl_uint what) {
  size_t size = 0;
  check_cl(get(0, nullptr, &size), call, fmt::format("reading {} property {:#x}", kind, what));
  std::vector<char> bytes(size);
  check_cl(get(size, bytes.data(), nullptr), call, fmt::format("reading {} property {:#x}", kind, what));
  return trimmed(std::move(bytes));
}

}  // namespace

std::string platform_text(cl_platform_id platform, cl_platform_info what) {
  const auto get = [&](size_t size, void* out, size_t* size_out) {
    return cl().clGetPlatformInfo(platform, what, size, out, size_out);
  };
  return text_property(get, "clGetPlatformInfo", "platform", what);
}

std::string device_text(cl_device_id device, cl_device_info what) {
  const auto get = [&](size_t size, void* out, size_t* size_out) {
    return cl().clGetDeviceInfo(device, what, size, out, size_out);
  };
  return text_property(get, "clGetDeviceInfo", "device", what);
}

uint64_t device_u64(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  check_cl(cl().clGetDeviceInfo(device, what, 0, nullptr, &size), "clGetDeviceInfo",
           fmt::format("reading device property {:#x}", what));
  unsigned char bytes[8] = {};
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    throw BackendError(fmt::format("device property {:#x} has {} bytes, not an integer", what, size));
  }
  check_cl(cl().clGetDeviceInfo(device, what, size, bytes, nullptr), "clGetDeviceInfo",
           fmt::format("reading device property {:#x}", what));
  // Copy through the integer of the reported width so this is right on either byte order.
  switch (size) {
    case 1: { uint8_t v; std::memcpy(&v, bytes, 1); return v; }
    case 2: { uint16_t v; std::memcpy(&v, bytes, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, bytes, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, bytes, 8); return v; }
  }
}

DeviceInfo describe_device(cl_platform_id platform, cl_device_id device, int index) {
  DeviceInfo info;
  info.backend = BackendKind::OpenCL;
  info.index = index;
  info.id = fmt::format("opencl:{}", index);
  info.name = device_text(device, CL_DEVICE_NAME);
  info.vendor = device_text(device, CL_DEVICE_VENDOR);
  info.driver_version = device_text(device, CL_DRIVER_VERSION);
  info.compiler = single_spaced(fmt::format("{} {}", platform_text(platform, CL_PLATFORM_NAME),
                                            platform_text(platform, CL_PLATFORM_VERSION)));
  info.architecture = info.name;
  // NVIDIA names its devices by product ("NVIDIA H100 80GB HBM3"); the compute capability is what kernels
  // and tuning entries depend on.
  if (has_extension(device_text(device, CL_DEVICE_EXTENSIONS), "cl_nv_device_attribute_query")) {
    info.architecture = fmt::format("sm_{}{}", device_u64(device, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV),
                                    device_u64(device, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV));
  }
  info.is_gpu = (device_u64(device, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
  info.compute_units = static_cast<int>(device_u64(device, CL_DEVICE_MAX_COMPUTE_UNITS));
  info.clock_mhz = static_cast<int>(device_u64(device, CL_DEVICE_MAX_CLOCK_FREQUENCY));
  info.global_memory_bytes = device_u64(device, CL_DEVICE_GLOBAL_MEM_SIZE);
  info.local_memory_bytes = device_u64(device, CL_DEVICE_LOCAL_MEM_SIZE);
  info.max_work_group_size = static_cast<size_t>(device_u64(device, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  const bool available = device_u64(device, CL_DEVICE_AVAILABLE) != 0;
  const bool has_compiler = device_u64(device, CL_DEVICE_COMPILER_AVAILABLE) != 0;
  info.can_run_kernels = available && has_compiler;
  if (!available) {
    info.cannot_run_reason = "the driver reports the device unavailable (CL_DEVICE_AVAILABLE is false)";
  } else if (!has_compiler) {
    info.cannot_run_reason = "the platform has no OpenCL C compiler for it (CL_DEVICE_COMPILER_AVAILABLE is false)";
  }
  return info;
}

}  // namespace convtune::opencl
