// `convtune train cnn`: a LeNet-style CNN on Fashion-MNIST (placeholder until implemented).
#include "convtune/error.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

void add_train_cnn_command(CLI::App& train) {
  CLI::App* cmd = train.add_subcommand("cnn", "Train a LeNet-style CNN on Fashion-MNIST");
  cmd->callback([] { throw Unsupported("train cnn is not implemented yet"); });
}

}  // namespace convtune::cli
