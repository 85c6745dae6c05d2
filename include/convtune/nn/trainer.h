// Mini-batch training and batched evaluation of a Network on labelled images (the CLI's train cnn and eval,
// and the tests, share these loops).
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "convtune/data/idx.h"
#include "convtune/nn/loss.h"
#include "convtune/nn/network.h"
#include "convtune/nn/optimizer.h"

namespace convtune::nn {

struct EpochResult {
  double ms = 0;              // host wall time of the epoch, device work included
  double loss = 0;            // mean of the batches' mean losses
  double train_accuracy = 0;  // on the batches as they were trained (before each update)
  int64_t images = 0;
};

// One epoch over `data` in shuffled order (rng), batches of `batch`; a final partial batch is dropped so every
// step has the same shape (and plan). progress(done_images, running_loss) after each batch, if given.
EpochResult train_epoch(Network& network, Loss& loss, Optimizer& optimizer, const data::LabelledImages& data,
                        int64_t batch, std::mt19937_64& rng,
                        const std::function<void(int64_t, double)>& progress = {});

struct EvalResult {
  double accuracy = 0;
  int64_t images = 0;
  std::vector<std::string> steps;  // Network::steps()
  std::vector<double> step_ms;     // device time per step summed over the batches (time_layers only)
  double ms = 0;                   // host wall time of the whole evaluation
};

// Forward passes over `data` in order, batches of `batch` (the last one may be smaller). time_layers: each
// step timed with device events (serialises the steps; the totals are op times, as in seed 003).
EvalResult evaluate(Network& network, const data::LabelledImages& data, int64_t batch, bool time_layers,
                    const std::function<void(int64_t)>& progress = {});

}  // namespace convtune::nn
