// The shared option declarations (options.h).
#include "tools/convtune/options.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <unistd.h>

#include <fmt/format.h>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "tools/convtune/progress.h"

namespace convtune::cli {

namespace {

// A validator accepting a number for which `accept` holds; otherwise "'TEXT' is invalid: expected EXPECTED".
template <typename Number, typename Accept>
CLI::Validator number_validator(const char* name, const char* expected, Accept accept) {
  return CLI::Validator(
      [accept, expected](std::string& text) -> std::string {
        Number value{};
        if (CLI::detail::lexical_cast(text, value) && accept(value)) return {};
        return "'" + text + "' is invalid: expected " + expected;
      },
      name);
}

}  // namespace

CLI::Validator positive_number() {
  return number_validator<double>("POSITIVE", "a number > 0", [](double v) { return v > 0 && std::isfinite(v); });
}
CLI::Validator non_negative_integer() {
  return number_validator<int64_t>("INT>=0", "an integer >= 0", [](int64_t v) { return v >= 0; });
}
CLI::Validator positive_integer() {
  return number_validator<int64_t>("INT>=1", "an integer >= 1", [](int64_t v) { return v >= 1; });
}

void refuse_inapplicable(const CLI::App* cmd, const std::string& option, bool applies, const std::string& why) {
  if (!applies && cmd->count(option) > 0) throw InvalidArgument(option + ": " + why);
}

std::string family_names() {
  std::string names;
  for (const auto& family : kernel_families()) names += (names.empty() ? "" : ", ") + family->name();
  return names;
}

CLI::Option* add_device_option(CLI::App* cmd, std::string& device, const std::string& more_help) {
  device = kDefaultDevice;
  return cmd
      ->add_option("--device,--backend", device,
                   "Device: best (a CUDA GPU, else an OpenCL GPU, else the CPU backend), cpu, opencl[:N] or "
                   "cuda[:N]" + more_help)
      ->capture_default_str();
}

CLI::Option* add_db_option(CLI::App* cmd, std::string& db) {
  return cmd->add_option("--db", db,
                         "Tuning database file (default: $CONVTUNE_TUNING_DB or ~/.local/share/convtune/tuning.json)");
}

void add_timing_options(CLI::App* cmd, int& warmup, int& repeats, const std::string& what) {
  cmd->add_option("--warmup", warmup, "Untimed runs before timing " + what)
      ->capture_default_str()
      ->check(non_negative_integer());
  cmd->add_option("--repeats", repeats, "Timed runs of " + what + "; the median counts")
      ->capture_default_str()
      ->check(positive_integer());
}

void add_problem_options(CLI::App* cmd, std::string& suite, std::vector<std::string>& layers,
                         std::vector<std::string>& gemms) {
  cmd->add_option("--suite", suite, "Suite name (alexnet, seeds, resnet18, resnet50, cpu_shapes, stride1) or path of a suite file");
  cmd->add_option("--layer", layers,
                  "One layer, e.g. N=1,C=64,H=27,K=192,R=5,pad=2 (W defaults to H, S to R); with --suite, the name "
                  "of a layer of the suite to run (the others are left out); repeatable");
  cmd->add_option("--gemm", gemms,
                  "One matrix product C = op(A) op(B), e.g. M=100,N=256,K=3136,trans_b=1 (also batch, lda..., "
                  "stride_a...); repeatable");
}

CLI::Option* add_direction_option(CLI::App* cmd, std::string& direction) {
  return cmd->add_option("--direction", direction, "fwd, bwd-data, bwd-filter or all")
      ->capture_default_str()
      ->check(CLI::IsMember({"fwd", "bwd-data", "bwd-filter", "all"}));
}

CLI::Option* add_batch_scale_option(CLI::App* cmd, double& batch_scale) {
  return cmd
      ->add_option("--batch-scale", batch_scale,
                   "Multiply every convolution's N by this (at least 1 remains: a layer whose N cannot shrink is "
                   "named before the run)")
      ->capture_default_str()
      ->check(positive_number());
}

CLI::Option* add_family_option(CLI::App* cmd, std::string& family, const std::string& values_help) {
  return cmd->add_option("--family", family, values_help + ", or one family: " + family_names())
      ->capture_default_str();
}

CLI::Option* add_config_option(CLI::App* cmd, std::string& config) {
  return cmd->add_option("--config", config,
                         "Parameters of the one --family, e.g. TILE_M=64,TILE_N=64; those left out keep the family's "
                         "default for each layer");
}

CLI::Option* add_math_option(CLI::App* cmd, std::string& math, const std::string& more_help) {
  return cmd
      ->add_option("--math", math,
                   "Math mode of every problem: fp32 (tensor cores off), tf32 (TF32 tensor cores), 3xtf32 (split "
                   "TF32 at FP32 accuracy), fp32-fast (FP32, and Winograd's alpha-8 tiles within 4x the FP32 "
                   "tolerance), or bf16 / fp16 (16-bit tensors on tensor cores, FP32 accumulation) (default: each "
                   "problem's own, fp32 unless its text names one)" + more_help)
      ->check(CLI::IsMember({"fp32", "tf32", "3xtf32", "fp32-fast", "bf16", "fp16"}));
}

CLI::Option* add_layout_option(CLI::App* cmd, std::string& layout) {
  return cmd
      ->add_option("--layout", layout,
                   "Memory layout of every convolution's tensors: nchw, or nhwc (channels-last, PyTorch's "
                   "channels_last) (default: each problem's own, nchw unless its text says layout=nhwc)")
      ->check(CLI::IsMember({"nchw", "nhwc"}));
}

void apply_layout(std::vector<Problem*> problems, const std::string& layout) {
  if (layout.empty()) return;
  for (Problem* p : problems)
    if (p->is_conv()) *p = Problem(p->conv().with_layout(parse_layout(layout)));
}

std::optional<uint64_t> workspace_limit_bytes(const std::string& text) {
  if (text == "device") return std::nullopt;
  const auto fail = [&] {
    return InvalidArgument(fmt::format("--workspace-limit: '{}' is invalid: expected a size in bytes, optionally with "
                                       "K, M, G or T (64M, 1G), 0 for no workspace, or device (the device's default)",
                                       text));
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 19) throw fail();
  uint64_t value = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  // "64M", "64MB" and "64MiB" all mean 64 x 2^20: memory sizes, as the device reports them.
  for (const char* suffix : {"iB", "B"}) {
    if (unit.size() > 1 && unit.size() >= std::strlen(suffix) && unit.ends_with(suffix)) {
      unit.resize(unit.size() - std::strlen(suffix));
      break;
    }
  }
  int shift = 0;
  if (unit.size() == 1) {
    const char* units = "KMGT";
    const char* at = std::strchr(units, std::toupper(static_cast<unsigned char>(unit[0])));
    if (!at || !*at) throw fail();
    shift = 10 * static_cast<int>(at - units + 1);
  } else if (!unit.empty()) {
    throw fail();
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) throw fail();
  return value << shift;
}

CLI::Option* add_workspace_limit_option(CLI::App* cmd, std::string& limit) {
  limit = "device";
  return cmd
      ->add_option("--workspace-limit", limit,
                   "Scratch memory each plan may take: bytes, or with K, M, G or T (64M, 1G); 0 allows none; device: "
                   "min(1 GiB, device memory / 8) on GPUs, min(256 MiB, memory / 4) on other OpenCL devices, host memory on "
                   "the CPU backend. A variant over it is skipped, "
                   "and the plan says so")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              workspace_limit_bytes(text);
              return {};
            } catch (const InvalidArgument& e) {
              // CLI11 names the option itself.
              return std::string(e.what()).substr(std::string("--workspace-limit: ").size());
            }
          },
          "SIZE"));
}

CLI::Option* add_json_flag(CLI::App* cmd, bool& json) {
  return cmd->add_flag("--json", json, "Print JSON on standard output instead of text");
}

GlobalFlags& global_flags() {
  static GlobalFlags flags;
  return flags;
}

size_t table_width() { return global_flags().wide ? 0 : terminal_columns(STDOUT_FILENO); }

void add_global_flags(CLI::App& app) {
  GlobalFlags& flags = global_flags();
  app.add_flag_callback(
      "--verbose",
      [] {
        global_flags().verbose = true;
        // The OpenCL backend passes -w to the kernel compiler unless asked not to: compiler warnings would land in
        // the middle of the progress lines.
        setenv("CONVTUNE_KERNEL_WARNINGS", "1", 1);
      },
      "Show the kernel compiler's warnings and other details on the terminal");
  app.add_flag("--wide", flags.wide, "Print every table column, however wide the terminal");
  // The subcommands accept these after their own options too: `convtune bench ... --wide`.
  app.fallthrough();
}

}  // namespace convtune::cli
