// The `convtune` command line: subcommands devices, bench, peak, tune, db, report, train, eval, completion.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <new>
#include <streambuf>
#include <string>

#include "convtune/error.h"
#include "convtune_git_revision.h"
#include "src/core/environment.h"
#include "src/core/printable.h"
#include "src/core/resources.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

namespace {

// What the command prints to std::cout and std::cerr passes through printable(): a device name, a layer name or a
// path from a file or the environment cannot move the cursor, recolour the terminal or hide text. Kept in pieces
// until a newline or a flush, so a character split between two writes is judged whole.
class PrintableBuffer final : public std::streambuf {
 public:
  explicit PrintableBuffer(std::streambuf* target) : target_(target) {}
  ~PrintableBuffer() override { flush(true); }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    pending_ += traits_type::to_char_type(ch);
    if (ch == '\n' || pending_.size() >= 4096) flush(false);
    return ch;
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    pending_.append(text, static_cast<size_t>(count));
    if (pending_.find('\n') != std::string::npos || pending_.size() >= 4096) flush(false);
    return count;
  }
  int sync() override {
    flush(false);
    return target_->pubsync();
  }

 private:
  void flush(bool complete) {
    std::string out;
    const size_t used = append_printable(pending_, out, complete);
    pending_.erase(0, used);
    target_->sputn(out.data(), static_cast<std::streamsize>(out.size()));
  }

  std::streambuf* target_;
  std::string pending_;
};

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
  convtune::cli::PrintableBuffer out(std::cout.rdbuf()), err(std::cerr.rdbuf());
  std::streambuf* const original_out = std::cout.rdbuf(&out);
  std::streambuf* const original_err = std::cerr.rdbuf(&err);
  // Back to the originals before the filters go (static destructors may still print).
  struct Restore {
    std::streambuf* out;
    std::streambuf* err;
    ~Restore() {
      std::cout.flush(), std::cerr.flush();
      std::cout.rdbuf(out), std::cerr.rdbuf(err);
    }
  } restore{original_out, original_err};
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
    // Before any work: a variable set to an unusable value is named now, not found out halfway (or ignored).
    convtune::check_environment();
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
