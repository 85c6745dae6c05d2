// Each subcommand registers itself on the CLI11 app; main() only wires them up.
#pragma once

#include <CLI/CLI.hpp>

namespace convtune::cli {

void add_devices_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_peak_command(CLI::App& app);

}  // namespace convtune::cli
