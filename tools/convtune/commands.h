// Each subcommand registers itself on the CLI11 app; main() only wires them up.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
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

// Subcommands of `train`, each in its own file.
void add_train_mlp_command(CLI::App& train);
void add_train_cnn_command(CLI::App& train);

// The exact command line this process was started with, shell-quoted where needed: reports print it so a
// table can be reproduced.
void remember_command_line(int argc, char** argv);
const std::string& command_line();

// For options that must be > 0: CLI::PositiveNumber's message ("Value 0 not in range 0.000000 to 1797...") names
// a range that holds the refused value; this one says what was expected.
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (CLI::detail::lexical_cast(text, value) && value > 0 && std::isfinite(value)) return {};
        return "'" + text + "' is invalid: expected a number > 0";
      },
      "POSITIVE");
}

}  // namespace convtune::cli
