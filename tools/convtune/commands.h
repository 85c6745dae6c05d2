// Each subcommand registers itself on the CLI11 app; main() only wires them up.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace convtune::cli {

void add_devices_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_peak_command(CLI::App& app);

// The exact command line this process was started with, shell-quoted where needed: reports print it so a
// table can be reproduced.
void remember_command_line(int argc, char** argv);
const std::string& command_line();

}  // namespace convtune::cli
