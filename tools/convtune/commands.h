// Each subcommand registers itself on the CLI11 app; main() only wires them up.
#pragma once

#include <CLI/CLI.hpp>

#include "tools/convtune/options.h"

#include <string>

namespace convtune::cli {

void add_devices_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_peak_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_db_command(CLI::App& app);
void add_report_command(CLI::App& app);

void add_train_command(CLI::App& app);  // `train mlp` and `train cnn`
void add_eval_command(CLI::App& app);
void add_completion_command(CLI::App& app);  // last: it lists every other command's options

// Subcommands of `train`, each in its own file.
void add_train_mlp_command(CLI::App& train);
void add_train_cnn_command(CLI::App& train);

// The exact command line this process was started with, shell-quoted where needed: reports print it so a
// table can be reproduced.
void remember_command_line(int argc, char** argv);
const std::string& command_line();

// "convtune 0.1.0, git REVISION; backends compiled in: cpu, opencl, cuda": --version and the outputs' metadata.
std::string version_text();

}  // namespace convtune::cli
