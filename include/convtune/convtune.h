// convtune's public API in one include (C++17): devices and buffers, problems (convolutions in three directions,
// GEMMs), plans (descriptor, then compiled plan), batch norm in training, interop with existing OpenCL/CUDA objects,
// the tuning database and the tuner, and one-call helpers for the common case. docs/LIBRARY.md walks through it; examples/ uses it.
// The API for writing kernel families (convtune/extension/) is left out on purpose: programs that run plans build
// against these headers alone, so family internals can change without touching them.
#pragma once

#include <array>
#include <string_view>

#include "convtune/backend.h"
#include "convtune/batch_norm.h"
#include "convtune/config.h"
#include "convtune/conv_problem.h"
#include "convtune/epilogue.h"
#include "convtune/error.h"
#include "convtune/gemm_problem.h"
#include "convtune/interop.h"
#include "convtune/plan.h"
#include "convtune/problem.h"
#include "convtune/tuning.h"
#include "convtune/types.h"

namespace convtune {

// The library's version ("0.1.0") and the backends this build has ("opencl cuda").
std::string_view version();
std::string_view built_backends();

// Checks every CONVTUNE_* environment variable convtune reads (docs/RELIABILITY.md lists them): throws
// InvalidArgument naming the first whose value is unusable and what it must be. The command line runs it before
// any work and the Python package on import; where a variable is read it is checked again.
void check_environment();

// A device by name: "best" (a CUDA GPU, else an OpenCL GPU, else any OpenCL device such as PoCL, else the CPU
// backend), "cpu", "opencl", "opencl:1", "cuda", "cuda:0". Throws InvalidArgument listing the devices otherwise.
Device& device(std::string_view spec = "best");

// The common case in one call: `problem` on host arrays in Problem::operand order (a convolution's x, w, y; a
// GEMM's a, b, c). Each operand is uploaded, the plan the tuning database picks runs, and the written operand is
// read back into its array. Plans are made once per problem and device and kept for later calls.
void compute(Device& device, const Problem& problem, const std::array<float*, Problem::kOperands>& host_operands);

}  // namespace convtune
