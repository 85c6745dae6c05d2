// `convtune train cnn`: mini-batch training of a LeNet-style CNN on Fashion-MNIST, saving a model file.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <random>

#include "convtune/data/idx.h"
#include "convtune/error.h"
#include "convtune/nn/model_file.h"
#include "convtune/nn/trainer.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/output_path.h"
#include "tools/convtune/progress.h"

namespace convtune::cli {

namespace {

struct TrainCnnOptions {
  std::string data;
  std::string device = kDefaultDevice;
  std::string architecture = "lenet";
  std::string family = "auto";
  std::string optimizer = "adam";
  std::string out = "cnn.model";
  std::string math;
  int epochs = 3;
  int64_t batch = 64;
  double lr = 1e-3;
  double momentum = 0.9;
  uint64_t seed = 1;
  int64_t limit = -1;
  int64_t test_limit = -1;
  std::string workspace_limit;  // --workspace-limit's text
};

void run_train_cnn(const TrainCnnOptions& opt) {
  for (const auto& [option, value] : {std::pair{"--limit", opt.limit}, std::pair{"--test-limit", opt.test_limit}}) {
    if (value == 0 || value < -1) {
      throw InvalidArgument(fmt::format("{}={} is invalid: expected a positive image count (or -1: all)", option, value));
    }
  }
  const std::string dir = opt.data.empty() ? data::default_data_dir() : opt.data;
  const data::DatasetFiles files = data::find_dataset_files(dir);
  const data::LabelledImages train = data::load_idx_pair(files.train_images, files.train_labels, 10, opt.limit);
  const data::LabelledImages test = data::load_idx_pair(files.test_images, files.test_labels, 10, opt.test_limit);
  Device& device = choose_device(opt.device, "train cnn");
  nn::Runtime runtime(device, parse_precision(opt.math.empty() ? "fp32" : opt.math));
  runtime.set_workspace_limit(workspace_limit_bytes(opt.workspace_limit));
  auto network = nn::make_network(runtime, opt.architecture, opt.family == "auto" ? "" : opt.family);
  network->initialize(opt.seed);
  // The model's place is checked before the training, not after it: a mistyped folder, a read-only or full disk.
  uint64_t model_bytes = 1 << 20;  // the header and the file's framing, generously
  for (const nn::Parameter* p : network->parameters()) model_bytes += p->value.bytes();
  prepare_output(opt.out, false, "--out", model_bytes);
  auto loss = nn::make_softmax_cross_entropy();
  std::unique_ptr<nn::Optimizer> optimizer;
  if (opt.optimizer == "adam") {
    optimizer = nn::make_adam(opt.lr);
  } else if (opt.optimizer == "sgd") {
    optimizer = nn::make_sgd(opt.lr, opt.momentum);
  } else {
    throw InvalidArgument(fmt::format("--optimizer {}: expected adam or sgd", opt.optimizer));
  }
  std::cout << fmt::format("train cnn: {} on {} ({}), {} train / {} test images from {}, batch {}, {} lr {}{}, math {}\n",
                           opt.architecture, device.info().id, device.info().name, train.count, test.count, dir,
                           opt.batch, opt.optimizer, opt.lr,
                           opt.optimizer == "sgd" ? fmt::format(" momentum {}", opt.momentum) : "",
                           to_string(runtime.precision()));
  std::mt19937_64 rng(opt.seed);
  double test_accuracy = 0;
  nn::EpochResult last;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    // Each epoch's bar has its own ETA; from the second epoch on, the status says what the later ones will add.
    std::string later;
    if (epoch > 1 && epoch < opt.epochs) {
      const double per_epoch =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / (epoch - 1);
      later = fmt::format("{} more epoch{} ~{}; ", opt.epochs - epoch, opt.epochs - epoch == 1 ? "" : "s",
                          format_duration(per_epoch * (opt.epochs - epoch)));
    }
    Progress bar(fmt::format("epoch {}/{}", epoch, opt.epochs), train.count);
    last = nn::train_epoch(*network, *loss, *optimizer, train, opt.batch, rng, [&](int64_t done, double running) {
      bar.update(done, fmt::format("{}loss {:.4f}", later, running));
    });
    bar.finish(fmt::format("loss {:.4f}", last.loss));
    const nn::EvalResult eval = nn::evaluate(*network, test, 256, false);
    test_accuracy = eval.accuracy;
    std::cout << fmt::format("epoch {}: {:.1f} ms ({:.1f} us/image), loss {:.4f}, train accuracy {:.4f}, "
                             "test accuracy {:.4f}\n",
                             epoch, last.ms, last.ms * 1000.0 / std::max<int64_t>(last.images, 1), last.loss,
                             last.train_accuracy, test_accuracy);
  }
  nlohmann::json metadata = {{"device", device.info().id},     {"epochs", opt.epochs},
                             {"batch", opt.batch},             {"optimizer", opt.optimizer},
                             {"learning_rate", opt.lr},        {"seed", opt.seed},
                             {"train_images", train.count},    {"test_images", test.count},
                             {"test_accuracy", test_accuracy}, {"final_loss", last.loss}};
  nn::save_model(opt.out, *network, metadata);
  std::cout << fmt::format("saved {} (test accuracy {:.4f})\n", opt.out, test_accuracy);
}

}  // namespace

void add_train_cnn_command(CLI::App& train) {
  auto opt = std::make_shared<TrainCnnOptions>();
  CLI::App* cmd = train.add_subcommand("cnn", "Train a LeNet-style CNN on Fashion-MNIST and save a model file");
  cmd->add_option("--data", opt->data, "Folder with the four IDX files (default: $CONVTUNE_DATA or "
                                       "/usr/share/datasets/fashion-mnist)");
  add_device_option(cmd, opt->device);
  add_workspace_limit_option(cmd, opt->workspace_limit);
  cmd->add_option("--arch", opt->architecture, "Architecture: lenet or lenet-small")
      ->capture_default_str()
      ->check(CLI::IsMember({"lenet", "lenet-small"}));
  add_family_option(cmd, opt->family, "Kernel family of the convolutions: auto (the plan's choice per layer: the "
                                      "tuning database's entry, else the built-in default)");
  add_math_option(cmd, opt->math, "; weights, activations and gradients stay FP32 tensors between layers (bf16/fp16: the convolutions convert to and from 16-bit tensors, gradients scaled per tensor)");
  cmd->add_option("--epochs", opt->epochs, "Passes over the training set")->capture_default_str()->check(positive_integer());
  cmd->add_option("--batch", opt->batch, "Images per step")->capture_default_str()->check(positive_integer());
  cmd->add_option("--lr", opt->lr, "Learning rate")->capture_default_str()->check(positive_number());
  cmd->add_option("--optimizer", opt->optimizer, "adam or sgd")->capture_default_str()->check(CLI::IsMember({"adam", "sgd"}));
  cmd->add_option("--momentum", opt->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "Seed of the weights and the shuffling")->capture_default_str();
  cmd->add_option("--limit", opt->limit, "Use the first N training images (default: all)");
  cmd->add_option("--test-limit", opt->test_limit, "Use the first N test images (default: all)");
  cmd->add_option("--model", opt->out, "Model file to write")->capture_default_str();
  // The old spelling, kept for scripts; hidden: --out is a results file (CSV/JSON) in the other commands.
  cmd->add_option("--out", opt->out, "Model file to write (old name of --model)")->group("");
  cmd->callback([opt, cmd] {
    refuse_inapplicable(cmd, "--momentum", opt->optimizer == "sgd",
                        "applies to --optimizer sgd, not " + opt->optimizer + " (Adam has no momentum setting here)");
    run_train_cnn(*opt);
  });
}

}  // namespace convtune::cli
