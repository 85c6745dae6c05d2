// Queries of OpenCL platform and device properties, and the DeviceInfo built from them.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <string>

#include "convtune/backend.h"

namespace convtune::opencl {

std::string platform_text(cl_platform_id platform, cl_platform_info what);
std::string device_text(cl_device_id device, cl_device_info what);
uint64_t device_u64(cl_device_id device, cl_device_info what);  // for cl_ulong, cl_uint, size_t and cl_bool

// Everything DeviceInfo holds for the device numbered `index` across all platforms ("opencl:index").
DeviceInfo describe_device(cl_platform_id platform, cl_device_id device, int index);

}  // namespace convtune::opencl
