// `convtune train mlp`: a 784-150-10 sigmoid MLP (the second seed document's, docs/MLP.md) with SGD + momentum, per sample or in mini-batches,
// on the CPU backend or with the whole epoch on a GPU; prints device ms, loss and accuracy per epoch.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "convtune/data/idx.h"
#include "convtune/error.h"
#include "convtune/mlp/mlp.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/options.h"
#include "tools/convtune/progress.h"

namespace convtune::cli {
namespace {

struct TrainMlpOptions {
  std::string data = data::default_data_dir();
  int64_t limit = 4000;  // the seed document trains on 4000 images per epoch (docs/MLP.md)
  int64_t test_limit = -1;
  int epochs = 5;
  int hidden = 150;
  uint64_t seed = 1;
  std::string device = kDefaultDevice;
  bool verify = false;
  std::string math;
  mlp::TrainOptions train;
};

// One epoch on the host and on `device` from the same weights; throws when the weights disagree beyond rounding
// (the tolerance of tests/mlp/mlp_test.cpp: 1e-3 of the largest weight change).
void verify_against_host(Device& device, const data::LabelledImages& train, const mlp::MlpWeights& initial,
                         const mlp::TrainOptions& options) {
  auto host = mlp::MlpTrainer::create(Registry::instance().find("cpu"), train, initial, options);
  auto other = mlp::MlpTrainer::create(device, train, initial, options);
  host->train_epoch();
  other->train_epoch();
  const auto h = host->weights();
  const auto d = other->weights();
  float change = 0, difference = 0;
  auto compare = [&](const std::vector<float>& start, const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      change = std::max(change, std::fabs(a[i] - start[i]));
      difference = std::max(difference, std::fabs(a[i] - b[i]));
    }
  };
  compare(initial.input_hidden, h.input_hidden, d.input_hidden);
  compare(initial.hidden_output, h.hidden_output, d.hidden_output);
  const float tolerance = 1e-6f + 1e-3f * change;
  std::cout << fmt::format("verify: one epoch on {} vs the host: largest weight difference {:.3g}, largest change "
                           "{:.3g}, tolerance {:.3g}: {}\n",
                           device.info().id, difference, change, tolerance, difference <= tolerance ? "ok" : "FAILED");
  if (!(difference <= tolerance)) {
    throw Error(fmt::format("train mlp --verify: the weights after one epoch on {} differ from the host's by {:.3g}, "
                            "more than the tolerance {:.3g}",
                            device.info().id, difference, tolerance));
  }
}

void run_train_mlp(TrainMlpOptions opt, bool groups_given) {
  if (!opt.math.empty()) opt.train.precision = parse_precision(opt.math);
  mlp::validate(opt.train);
  if (opt.epochs < 1) throw InvalidArgument(fmt::format("--epochs={} is invalid: expected 1 or more", opt.epochs));
  if (opt.limit == 0 || opt.limit < -1) {
    throw InvalidArgument(
        fmt::format("--limit={} is invalid: expected a positive image count (or -1: all)", opt.limit));
  }
  if (opt.test_limit == 0 || opt.test_limit < -1) {
    throw InvalidArgument(
        fmt::format("--test-limit={} is invalid: expected a positive image count (or -1: all)", opt.test_limit));
  }
  if (opt.hidden < 1) throw InvalidArgument(fmt::format("--hidden={} is invalid: expected 1 or more", opt.hidden));
  Device& device = choose_device(opt.device, "train mlp");
  if (groups_given && device.info().backend == BackendKind::Cpu) {
    throw InvalidArgument(fmt::format("--groups sets the work-groups of the GPU per-sample kernel, but {} runs the "
                                      "host loops", device.info().id));
  }

  const auto files = data::find_dataset_files(opt.data);
  const auto load_start = std::chrono::steady_clock::now();
  const auto train = data::load_idx_pair(files.train_images, files.train_labels, 10, opt.limit);
  const auto test = data::load_idx_pair(files.test_images, files.test_labels, 10, opt.test_limit);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const auto initial = mlp::initial_weights(train.rows * train.cols, opt.hidden, 10, opt.seed);

  std::cout << fmt::format("train mlp: {}-{}-10 sigmoid, squared error, lr {} momentum {}, {}, math {} on {} ({})\n",
                           initial.inputs, initial.hidden, opt.train.learning_rate, opt.train.momentum,
                           opt.train.batch == 1 ? "per-sample updates" : fmt::format("batch {}", opt.train.batch),
                           to_string(opt.train.precision), device.info().id, device.info().name);
  std::cout << fmt::format("data: {} training and {} test images of {}x{} from {} (read in {:.2f} s)\n", train.count,
                           test.count, train.rows, train.cols, opt.data, load_s);
  if (opt.verify) verify_against_host(device, train, initial, opt.train);

  const auto setup_start = std::chrono::steady_clock::now();
  auto trainer = mlp::MlpTrainer::create(device, train, initial, opt.train);
  const double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
  std::cout << fmt::format("path: {} (setup: compile and upload in {:.2f} s, not in the epoch times)\n",
                           trainer->describe(), setup_s);
  std::cout << fmt::format("{:>5}  {:>10}  {:>9}  {:>9}  {:>9}  {:>9}  {:>10}\n", "epoch", "ms", "us/image", "loss",
                           "train acc", "test loss", "test acc");

  Progress progress("train mlp", opt.epochs);
  double total_ms = 0, best_ms = 0;
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    const auto stats = trainer->train_epoch();
    const auto tested = trainer->evaluate(test);
    total_ms += stats.ms;
    best_ms = epoch == 1 ? stats.ms : std::min(best_ms, stats.ms);
    progress.update(epoch, fmt::format("loss {:.4f} test acc {:.4f}", stats.loss, tested.accuracy));
    std::cout << fmt::format("{:>5}  {:>10.3f}  {:>9.2f}  {:>9.5f}  {:>9.4f}  {:>9.5f}  {:>10.4f}\n", epoch, stats.ms,
                             1000.0 * stats.ms / static_cast<double>(train.count), stats.loss, stats.accuracy,
                             tested.loss, tested.accuracy)
              << std::flush;
  }
  progress.finish();
  std::cout << fmt::format("epoch ms: best {:.3f}, mean {:.3f} over {} epochs of {} images ({})\n", best_ms,
                           total_ms / opt.epochs, opt.epochs, train.count, trainer->describe());
}

}  // namespace

void add_train_mlp_command(CLI::App& train) {
  auto opt = std::make_shared<TrainMlpOptions>();
  CLI::App* cmd = train.add_subcommand("mlp", "Train a 784-150-10 sigmoid MLP on Fashion-MNIST (SGD with momentum)");
  cmd->add_option("--data", opt->data, "Folder with the four IDX files (raw or .gz); default $CONVTUNE_DATA or "
                                       "/usr/share/datasets/fashion-mnist")
      ->capture_default_str();
  cmd->add_option("--limit", opt->limit, "Training images per epoch (the first N; -1: all)")->capture_default_str();
  cmd->add_option("--test-limit", opt->test_limit, "Test images evaluated after each epoch (-1: all)")
      ->capture_default_str();
  cmd->add_option("--epochs", opt->epochs, "Epochs")->capture_default_str()->check(positive_integer());
  cmd->add_option("--lr", opt->train.learning_rate, "Learning rate")->capture_default_str();
  cmd->add_option("--momentum", opt->train.momentum, "Momentum")->capture_default_str();
  cmd->add_option("--batch", opt->train.batch, "Images per update: 1 = per-sample updates, B > 1 mini-batches")
      ->capture_default_str();
  cmd->add_option("--hidden", opt->hidden, "Hidden neurons")->capture_default_str()->check(positive_integer());
  cmd->add_option("--seed", opt->seed, "Weight initialisation seed")->capture_default_str();
  cmd->add_option("--groups", opt->train.groups,
                  "Per-sample GPU kernel: work-groups sharing the hidden layer (0: one per compute unit on a GPU, "
                  "1: single group)")
      ->capture_default_str();
  add_device_option(cmd, opt->device);
  add_math_option(cmd, opt->math,
                  ". The MLP (batch-1 dot products: no tensor-core kernel would pay) rounds every product's operands "
                  "to the mode's type (tf32, bf16, fp16; FP16 gradients at a loss scale of 4096) and keeps FP32 sums "
                  "and master weights; fp32, 3xtf32 and fp32-fast compute in FP32");
  cmd->add_flag("--verify", opt->verify, "First train one epoch on the device and on the host and compare weights");
  cmd->callback([opt, cmd] { run_train_mlp(*opt, cmd->count("--groups") > 0); });
}

}  // namespace convtune::cli
