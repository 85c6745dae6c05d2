// The `convtune` command line: subcommands devices, bench, peak, tune, db, report, train, eval.
#include <iostream>

#include "convtune/error.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

namespace {
std::string& stored_command_line() {
  static std::string line;
  return line;
}
}  // namespace

void remember_command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.find_first_of(" \t'\"$;&|<>*?") != std::string::npos) {
      std::string quoted = "'";
      for (char ch : arg) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      arg = quoted + "'";
    }
    line += (i ? " " : "") + arg;
  }
  stored_command_line() = line;
}

const std::string& command_line() { return stored_command_line(); }

}  // namespace convtune::cli

int main(int argc, char** argv) {
  convtune::cli::remember_command_line(argc, argv);
  CLI::App app{"convtune: autotuned convolution kernels for any GPU or CPU"};
  app.require_subcommand(1);
  convtune::cli::add_devices_command(app);
  convtune::cli::add_bench_command(app);
  convtune::cli::add_peak_command(app);
  convtune::cli::add_tune_command(app);
  convtune::cli::add_db_command(app);
  convtune::cli::add_report_command(app);
  convtune::cli::add_train_command(app);
  convtune::cli::add_eval_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const convtune::Error& e) {
    std::cerr << "convtune: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "convtune: unexpected error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
