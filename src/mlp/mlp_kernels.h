// How the MLP's kernels are shaped for a device (work-group size, groups of the per-sample kernel, -D values):
// one place, shared by the trainer and the GPU-less NVRTC compile test.
#pragma once

#include "convtune/backend.h"
#include "convtune/types.h"

namespace convtune::mlp {

struct MlpKernelShape {
  int work_group = 256;        // threads per work-group of every MLP kernel
  int groups = 1;              // work-groups of the persistent per-sample kernel
  int hidden_per_group = 150;  // hidden neurons each of those groups owns
  int tile = 16;               // mini-batch forward tile
  bool w1_local = false;       // the per-sample kernel keeps each group's W1/dW1 rows in local memory
  ProgramSource source;        // src/kernels/mlp/mlp.cl with these values as defines
};

// groups_option: 0 picks (one group per compute unit on a GPU, at most one per hidden neuron; 1 elsewhere), 1 the
// single-group kernel, N > 1 that many (InvalidArgument when the device has fewer than N compute units, since the
// grid barrier needs every group running at once).
// `precision`: the math mode's define (MLP_MATH).
MlpKernelShape mlp_kernel_shape(const DeviceInfo& device, int inputs, int hidden, int outputs, int groups_option,
                                Precision precision = {});

}  // namespace convtune::mlp
