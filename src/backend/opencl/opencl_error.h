// OpenCL error codes as names, and the check that turns a failed cl* call into a BackendError.
#pragma once

#include <CL/cl.h>

#include <string>
#include <string_view>

namespace convtune::opencl {

// "CL_OUT_OF_RESOURCES (-5)"; unknown codes are shown as numbers.
std::string cl_error_name(cl_int code);

// Throws BackendError "<call> failed with <code name> while <doing>" unless code is CL_SUCCESS.
void check_cl(cl_int code, std::string_view call, std::string_view doing);

}  // namespace convtune::opencl
