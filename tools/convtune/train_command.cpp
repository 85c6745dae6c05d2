// `convtune train`: the parent of `train mlp` (a 784-150-10 MLP) and `train cnn` (a LeNet-style CNN).
#include "tools/convtune/commands.h"

namespace convtune::cli {

void add_train_command(CLI::App& app) {
  CLI::App* train = app.add_subcommand("train", "Train a network on Fashion-MNIST: mlp (784-150-10 sigmoid) or cnn (LeNet-style)");
  train->require_subcommand(1);
  add_train_mlp_command(*train);
  add_train_cnn_command(*train);
}

}  // namespace convtune::cli
