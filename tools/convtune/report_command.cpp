// `convtune report LOG`: charts and tables from a tuning log — a histogram of the GFLOP/s of every working kernel,
// heatmaps over parameter pairs, an index page, and per-layer GFLOP/s, ms and % of the measured peak for the three
// directions with combined rows (the figures and tables of the fourth seed document).
#include <fmt/format.h>

#include <iostream>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/report.h"

namespace convtune::cli {

namespace {

struct ReportOptions {
  std::string log;
  std::string out_dir;
  std::vector<std::string> heatmaps;  // "A,B"
  double peak_gflops = 0;
};

void run_report(const ReportOptions& opt) {
  const TuneLog log = TuneLog::load(opt.log);
  std::vector<std::pair<std::string, std::string>> asked;
  for (const std::string& text : opt.heatmaps) {
    const auto comma = text.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == text.size()) {
      throw InvalidArgument(fmt::format("--heatmap '{}': expected two parameter names, e.g. TILE_M,TILE_N", text));
    }
    asked.emplace_back(text.substr(0, comma), text.substr(comma + 1));
  }
  const Report report = build_report(log, asked, opt.peak_gflops);
  // The report's own folder is created (by default LOG-report beside the log), but never its parents: a mistyped
  // --out-dir is an error, not a new tree of folders.
  const std::filesystem::path log_path(opt.log);
  const std::filesystem::path out = !opt.out_dir.empty() ? std::filesystem::path(opt.out_dir)
                                                         : log_path.parent_path() / (log_path.stem().string() + "-report");
  const std::filesystem::path parent = out.has_parent_path() ? out.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(parent)) {
    throw InvalidArgument(fmt::format("--out-dir {}: the folder {} does not exist (convtune creates no folders it was "
                                      "not asked for: create it first)", out.string(), parent.string()));
  }
  ensure_directory(out);
  for (const auto& [name, svg] : report.charts) write_file_atomic(out / name, svg);
  write_file_atomic(out / "index.html", report.index_html);
  const double peak = report.peak_gflops;
  std::cout << fmt::format("tuning log {}: {} candidates on {}; peak {}\n", opt.log, log.trials.size(),
                           metadata_text(log.metadata, "device", "?"),
                           peak > 0 ? fmt::format("{:.0f} GFLOP/s (measured FP32 FMA)", peak) : std::string("unknown (give --peak)"));
  report.table.print(std::cout, table_width());
  report.table.write(out / "table.md", log.metadata);
  report.table.write(out / "table.json", log.metadata);
  std::cout << fmt::format("wrote {} SVG chart(s), table.md, table.json and index.html (every chart) to {}\n",
                           report.charts.size(), out.string());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto opt = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "Histogram, heatmaps and per-layer tables from a tuning log");
  cmd->add_option("log", opt->log, "Tuning log written by `convtune tune` (JSON)")->required();
  cmd->add_option("--out-dir", opt->out_dir, "Folder for the SVG files and tables (default: LOG-report next to the log)");
  cmd->add_option("--heatmap", opt->heatmaps, "Parameter pair to draw, e.g. TILE_M,TILE_N; repeatable "
                                              "(default: each pair whose values changed the GFLOP/s, at most 6 a task)");
  cmd->add_option("--peak", opt->peak_gflops, "FP32 peak in GFLOP/s for % of peak (default: the one the log measured)");
  cmd->callback([opt] { run_report(*opt); });
}

}  // namespace convtune::cli
