// `convtune train mlp`: seed 002's 784-150-10 sigmoid MLP with SGD + momentum (placeholder until implemented).
#include "convtune/error.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

void add_train_mlp_command(CLI::App& train) {
  CLI::App* cmd = train.add_subcommand("mlp", "Train seed 002's 784-150-10 sigmoid MLP");
  cmd->callback([] { throw Unsupported("train mlp is not implemented yet"); });
}

}  // namespace convtune::cli
