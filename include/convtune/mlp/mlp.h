// Seed 002's MLP: a 784-150-10 network (sizes configurable), sigmoid everywhere, squared error, SGD with momentum,
// trained per sample (seed 002) or in mini-batches, on the CPU backend (host loops, the reference) or on a GPU
// (the whole epoch on the device: a persistent per-sample kernel, or three fused kernels per mini-batch).
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/data/idx.h"
#include "convtune/types.h"

namespace convtune::mlp {

// The bias neurons' value: seed 002's network (after Bobby Anguelov's) feeds -1 through a weight like any input.
constexpr float kBiasValue = -1.0f;

// Weights and their momentum terms ("deltas" in seed 002). input_hidden[j * (inputs + 1) + i] connects input i to
// hidden neuron j (i == inputs: the bias); hidden_output[j * outputs + k] hidden j to output k (j == hidden: bias).
struct MlpWeights {
  int inputs = 784, hidden = 150, outputs = 10;
  std::vector<float> input_hidden, hidden_output;
  std::vector<float> input_hidden_delta, hidden_output_delta;  // momentum terms, zero at the start
};

// Seed 002's initialisation: uniform in [-1/sqrt(inputs), 1/sqrt(inputs)] for input->hidden and
// [-1/sqrt(hidden), 1/sqrt(hidden)] for hidden->output, from a seeded generator (same seed, same weights).
MlpWeights initial_weights(int inputs, int hidden, int outputs, uint64_t seed);

struct TrainOptions {
  float learning_rate = 0.001f;  // seed 002's
  float momentum = 0.9f;         // seed 002's
  int batch = 1;                 // 1: seed 002's per-sample updates; B > 1: mean gradient of B images per update
  // Persistent per-sample kernel: work-groups sharing the hidden layer; 0 picks (see mlp_trainer.cpp), 1 is the
  // single-group kernel that runs on any OpenCL device.
  int groups = 0;
  // The math mode (--math): every product's operands rounded to the mode's type first (the image, activations,
  // weights as read, and the gradients; FP16's at a fixed loss scale of 4096), sums and master weights in FP32.
  // fp32 and 3xtf32 (FP32-accurate) compute in FP32; tf32, bf16 and fp16 round. src/kernels/mlp/mlp.cl says why.
  Precision precision;
};

// What one pass over a data set measured. loss: seed 002's mean squared error, sum over samples and outputs of
// (o - t)^2 / (count * outputs); accuracy: fraction whose largest output is the label. During training both are
// taken before each sample's (or batch's) update, as seed 002 does.
struct EpochStats {
  double ms = 0;  // device time (host clock on the CPU backend), excluding the dataset upload
  double loss = 0;
  double accuracy = 0;
};

void validate(const TrainOptions& options);  // InvalidArgument naming the option when out of range

class MlpTrainer {
 public:
  virtual ~MlpTrainer() = default;
  // Builds the trainer for `device`: uploads `train` once (kernel devices), compiles the kernels.
  static std::unique_ptr<MlpTrainer> create(Device& device, const data::LabelledImages& train,
                                            const MlpWeights& initial, const TrainOptions& options);
  virtual EpochStats train_epoch() = 0;
  // Loss and accuracy of the current weights on `test` (uploaded on first use and kept), no updates.
  virtual EpochStats evaluate(const data::LabelledImages& test) = 0;
  virtual MlpWeights weights() = 0;  // a copy, read back from the device where there is one
  virtual std::string describe() const = 0;  // "persistent kernel, 75 groups x 256 threads" and the like
};

}  // namespace convtune::mlp
