// The content of `convtune report LOG` built in memory (charts and the per-layer table), so the command only
// writes it and the fuzz harness can build it from any log without touching the disk.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/convtune/report_table.h"
#include "tools/convtune/tune_log.h"

namespace convtune::cli {

// Limits that keep a hostile or damaged log from asking for millions of files or a gigantic SVG: real logs have a
// few dozen tasks and parameters of at most a dozen candidate values.
inline constexpr size_t kMaxReportTasks = 4096;
inline constexpr size_t kMaxHeatmapAxisValues = 64;
// Heatmaps drawn per task when none are asked for: the pairs whose best cells differ most.
inline constexpr size_t kMaxHeatmapsPerTask = 6;

struct Report {
  std::vector<std::pair<std::string, std::string>> charts;  // file name, SVG text
  ReportTable table{{"layer", "direction", "ms", "GFLOP/s", "% of peak", "family"}};
  double peak_gflops = 0;  // the one used for "% of peak": given, else the log's measured one, else 0
  std::string index_html;  // index.html: every chart by task, with its best and default, and the tables
};

// Per task (layer x direction x family) a histogram of GFLOP/s and heatmaps over `heatmaps` (parameter pairs;
// empty: each pair that varied meaningfully, at most kMaxHeatmapsPerTask), the best and the default configuration
// marked; an index page; then the best of any family per layer and direction, with combined rows. Throws
// InvalidArgument naming the log when it holds more than kMaxReportTasks tasks, a heatmap axis would hold more
// than kMaxHeatmapAxisValues values, or no task has both parameters of an asked pair.
Report build_report(const TuneLog& log, const std::vector<std::pair<std::string, std::string>>& heatmaps,
                    double peak_gflops);

// A number the log's metadata holds under `key` (say peak_gflops), or `otherwise` when it is absent or not a
// finite number of 0 or more.
double metadata_number(const nlohmann::json& metadata, const char* key, double otherwise);
// A string the log's metadata holds under `key`, or `otherwise`.
std::string metadata_text(const nlohmann::json& metadata, const char* key, const std::string& otherwise);

}  // namespace convtune::cli
