// The CPU backend's host program for BatchNormPlan (batch_norm_host.cpp).
#pragma once

namespace convtune {

inline constexpr const char* kBatchNormHostProgram = "host/batch_norm";
// Registers kBatchNormHostProgram with the CPU backend, once.
void register_batch_norm_host_program();

}  // namespace convtune
