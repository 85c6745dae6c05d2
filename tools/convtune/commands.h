// Each subcommand registers itself on the CLI11 app; main() only wires them up.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace convtune::cli {

void add_devices_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_peak_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_db_command(CLI::App& app);
void add_report_command(CLI::App& app);

// The command line as typed (for the records a command writes); set by main().
const std::string& command_line();
void set_command_line(int argc, char** argv);

}  // namespace convtune::cli
