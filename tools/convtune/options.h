// The options several subcommands share, declared once so that their names, help texts, defaults and checks agree.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convtune/problem.h"

namespace convtune::cli {

// The device every command picks when none is named; choose_device() says what `best` means.
inline constexpr const char* kDefaultDevice = "best";

// --device (alias --backend): best, cpu, opencl[:N] or cuda[:N]. `more_help` is appended to the shared text.
CLI::Option* add_device_option(CLI::App* cmd, std::string& device, const std::string& more_help = "");

// --db FILE: the tuning database (default: $CONVTUNE_TUNING_DB or the user's file).
CLI::Option* add_db_option(CLI::App* cmd, std::string& db);

// --warmup (0 or more) and --repeats (1 or more), with `what` naming what is timed ("each row", "each candidate").
void add_timing_options(CLI::App* cmd, int& warmup, int& repeats, const std::string& what);

// --suite, --layer (a problem, or with --suite the name of one of its layers) and --gemm.
void add_problem_options(CLI::App* cmd, std::string& suite, std::vector<std::string>& layers,
                         std::vector<std::string>& gemms);
// --direction fwd|bwd-data|bwd-filter|all.
CLI::Option* add_direction_option(CLI::App* cmd, std::string& direction);
// --batch-scale: a number > 0 multiplying each convolution's N.
CLI::Option* add_batch_scale_option(CLI::App* cmd, double& batch_scale);

// --family NAME: `values_help` says which of auto/all this command takes besides the family names.
CLI::Option* add_family_option(CLI::App* cmd, std::string& family, const std::string& values_help);
// --config NAME=V,...: needs one --family.
CLI::Option* add_config_option(CLI::App* cmd, std::string& config);
// --math fp32|tf32|3xtf32|fp32-fast|bf16|fp16 (parse_precision reads it).
CLI::Option* add_math_option(CLI::App* cmd, std::string& math, const std::string& more_help);

// --layout nchw|nhwc: how every convolution's tensors lie in memory (empty: each problem's own).
CLI::Option* add_layout_option(CLI::App* cmd, std::string& layout);
// The layers with `layout` applied to every convolution (GEMMs unchanged); unchanged when `layout` is empty.
void apply_layout(std::vector<Problem*> problems, const std::string& layout);

// --workspace-limit SIZE: the scratch memory each plan may take: bytes or K/M/G/T (binary) suffixed, 0 for none,
// `device` (the default) for the device's own limit. The text stays in `limit`; workspace_limit_bytes() reads it.
CLI::Option* add_workspace_limit_option(CLI::App* cmd, std::string& limit);
// The option's text as PlanRequest::workspace_limit takes it: empty for `device`. Throws InvalidArgument naming the
// option and what was expected.
std::optional<uint64_t> workspace_limit_bytes(const std::string& text);

// --json: JSON on standard output instead of the text.
CLI::Option* add_json_flag(CLI::App* cmd, bool& json);

// An option given where it cannot apply would be silently ignored: throws InvalidArgument "OPTION: WHY" when
// `option` was given on `cmd` and `applies` is false (`why` names what it needs and what was chosen instead).
void refuse_inapplicable(const CLI::App* cmd, const std::string& option, bool applies, const std::string& why);

// Every family's name, comma-separated, for help texts and messages.
std::string family_names();

// Validators with messages that say what was expected (CLI11's own name a range of doubles).
CLI::Validator positive_number();
CLI::Validator non_negative_integer();
CLI::Validator positive_integer();

// The global flags: --verbose (compiler warnings and details on the terminal) and --wide (every table column).
struct GlobalFlags {
  bool verbose = false;
  bool wide = false;
};
GlobalFlags& global_flags();
// The width printed tables fit: the terminal's columns, 0 (no limit) with --wide or into a file or pipe.
size_t table_width();
void add_global_flags(CLI::App& app);

}  // namespace convtune::cli
