// The `convtune` command line: subcommands devices, bench, peak, tune, db, report, train, eval, completion.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <new>

#include "convtune/error.h"
#include "convtune_git_revision.h"
#include "src/core/resources.h"
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

std::string version_text() {
  return fmt::format("convtune {}, git {}; backends compiled in: {}", CONVTUNE_VERSION_TEXT, CONVTUNE_GIT_REVISION,
                     CONVTUNE_BACKENDS_TEXT);
}

}  // namespace convtune::cli

int main(int argc, char** argv) {
  convtune::cli::remember_command_line(argc, argv);
  CLI::App app{"convtune: autotuned convolution kernels for any GPU or CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", convtune::cli::version_text(), "Print the version, git revision and backends");
  convtune::cli::add_global_flags(app);  // before the subcommands, which inherit that they accept them
  convtune::cli::add_devices_command(app);
  convtune::cli::add_bench_command(app);
  convtune::cli::add_peak_command(app);
  convtune::cli::add_tune_command(app);
  convtune::cli::add_db_command(app);
  convtune::cli::add_report_command(app);
  convtune::cli::add_train_command(app);
  convtune::cli::add_eval_command(app);
  convtune::cli::add_completion_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its own status codes (104, 109, ...) would hide that this is bad input, status 2.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const convtune::Error& e) {
    std::cerr << "convtune: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    // Large allocations are checked against the available memory first (ResourceError above); this is the rest.
    std::cerr << fmt::format("convtune: error: out of memory ({} of host memory available): a smaller problem, "
                             "--batch-scale or --limit needs less\n",
                             convtune::format_bytes(convtune::available_host_memory()));
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be used (permissions, a read-only or full disk): name it and why.
    std::cerr << fmt::format("convtune: error: {}{}: {}\n", e.path1().string(),
                             e.path2().empty() ? "" : " -> " + e.path2().string(), e.code().message());
    return 2;
  } catch (const std::exception& e) {
    // A bug in convtune, never something a file or an option can cause: those throw convtune::Error.
    std::cerr << "convtune: unexpected error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
