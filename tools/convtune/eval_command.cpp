// `convtune eval MODEL`: accuracy and per-layer op times of a trained model (placeholder until implemented).
#include "convtune/error.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

void add_eval_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a trained model on the Fashion-MNIST test images");
  cmd->callback([] { throw Unsupported("eval is not implemented yet"); });
}

}  // namespace convtune::cli
