// Host programs: what the CPU backend builds and launches where other backends compile kernels. A family of the
// CPU backend registers a factory under a program name; building the program hands the factory the recipe's
// defines once (its parameters, as a compiled kernel would see them), and each launch calls the host function with
// the arguments the plan set.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "convtune/backend.h"

namespace convtune::cpu {

using HostKernel = std::function<void(const std::vector<KernelArg>& args)>;
using HostProgramFactory = std::function<std::map<std::string, HostKernel>(const ProgramSource& source)>;

// Registers (or replaces) the program built for ProgramSource::file == `file` on the CPU backend.
void register_host_program(const std::string& file, HostProgramFactory factory);

// The float memory of a buffer argument (a CPU-backend buffer); throws InvalidArgument naming `what` otherwise.
float* host_floats(const KernelArg& arg, const char* what);
// An integer define of a host program's source; throws InvalidArgument naming the program and define.
int64_t define_int(const ProgramSource& source, const std::string& name);

}  // namespace convtune::cpu
