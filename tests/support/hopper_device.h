// A Hopper GPU (H100/H200) as the CUDA backend describes it, for tests that check constraints, launch shapes
// and NVRTC compiles against the real limits without a GPU present.
#pragma once

#include "convtune/backend.h"

namespace convtune::test {

inline DeviceInfo described_hopper() {
  DeviceInfo d;
  d.backend = BackendKind::Cuda;
  d.id = "cuda:0";
  d.name = "NVIDIA H100/H200 (described)";
  d.architecture = "sm_90";
  d.is_gpu = true;
  d.compute_units = 132;
  d.global_memory_bytes = 80ull << 30;
  d.local_memory_bytes = 48 << 10;
  d.local_memory_optin_bytes = 227 << 10;
  d.max_work_group_size = 1024;
  d.can_run_kernels = true;
  return d;
}

}  // namespace convtune::test
