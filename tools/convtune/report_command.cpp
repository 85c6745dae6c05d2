// `convtune report LOG`: seed 004's pictures and tables from a tuning log — a histogram of the GFLOP/s of every
// working kernel (its figure 7), heatmaps over parameter pairs (figures 8 and 9), and per-layer GFLOP/s, ms and
// % of the measured peak for the three directions with combined rows (tables 2 and 3).
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <set>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/report_table.h"
#include "tools/convtune/svg_chart.h"
#include "tools/convtune/tune_log.h"

namespace convtune::cli {

namespace {

struct ReportOptions {
  std::string log;
  std::string out_dir;
  std::vector<std::string> heatmaps;  // "A,B"
  double peak_gflops = 0;
};

std::string file_safe(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return text;
}

// The two parameter pairs to draw when none are named: the first four parameters (in the family's order) that
// took more than one value among the working candidates.
std::vector<std::pair<std::string, std::string>> default_pairs(const std::vector<const LoggedTrial*>& ok) {
  std::map<std::string, std::set<int64_t>> values;
  std::vector<std::string> order;
  for (const auto* t : ok)
    for (const auto& [name, value] : t->config) {
      if (!values.count(name)) order.push_back(name);
      values[name].insert(value);
    }
  std::vector<std::string> varied;
  for (const auto& name : order)
    if (values[name].size() > 1) varied.push_back(name);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i + 1 < varied.size() && pairs.size() < 2; i += 2) pairs.emplace_back(varied[i], varied[i + 1]);
  return pairs;
}

Heatmap make_heatmap(const std::vector<const LoggedTrial*>& ok, const std::string& a, const std::string& b,
                     const std::string& title) {
  std::set<int64_t> xs, ys;
  for (const auto* t : ok) {
    if (t->config.count(a)) xs.insert(t->config.at(a));
    if (t->config.count(b)) ys.insert(t->config.at(b));
  }
  if (xs.empty() || ys.empty()) throw InvalidArgument(fmt::format("--heatmap {},{}: no working candidate has both", a, b));
  Heatmap map{title, a, b, "best GFLOP/s", {}, {}, {}};
  const std::vector<int64_t> xv(xs.begin(), xs.end()), yv(ys.begin(), ys.end());
  for (auto v : xv) map.x_ticks.push_back(std::to_string(v));
  for (auto v : yv) map.y_ticks.push_back(std::to_string(v));
  map.cells.assign(yv.size(), std::vector<std::optional<double>>(xv.size()));
  for (const auto* t : ok) {
    if (!t->config.count(a) || !t->config.count(b)) continue;
    const size_t x = std::lower_bound(xv.begin(), xv.end(), t->config.at(a)) - xv.begin();
    const size_t y = std::lower_bound(yv.begin(), yv.end(), t->config.at(b)) - yv.begin();
    auto& cell = map.cells[y][x];
    // Each cell shows the best the rest of the parameters achieved with this pair fixed.
    if (!cell || t->gflops > *cell) cell = t->gflops;
  }
  return map;
}

void run_report(const ReportOptions& opt) {
  const TuneLog log = TuneLog::load(opt.log);
  const std::filesystem::path log_path(opt.log);
  const std::filesystem::path out = !opt.out_dir.empty() ? std::filesystem::path(opt.out_dir)
                                                         : log_path.parent_path() / (log_path.stem().string() + "-report");
  std::filesystem::create_directories(out);
  double peak = opt.peak_gflops;
  if (peak <= 0) peak = log.metadata.value("peak_gflops", 0.0);

  // Pictures per task (layer x direction x family), in the order the log ran them.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const LoggedTrial*>> ok_by_task;
  for (const LoggedTrial& t : log.trials) {
    const std::string key = fmt::format("{}-{}-{}", t.layer, t.problem.operation(), t.family);
    if (!ok_by_task.count(key)) keys.push_back(key);
    auto& list = ok_by_task[key];
    if (t.status == "ok") list.push_back(&t);
  }
  std::vector<std::pair<std::string, std::string>> asked;
  for (const std::string& text : opt.heatmaps) {
    const auto comma = text.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == text.size()) {
      throw InvalidArgument(fmt::format("--heatmap '{}': expected two parameter names, e.g. TILE_M,TILE_N", text));
    }
    asked.emplace_back(text.substr(0, comma), text.substr(comma + 1));
  }
  size_t files = 0;
  for (const std::string& key : keys) {
    const auto& ok = ok_by_task[key];
    std::vector<double> gflops;
    for (const auto* t : ok) gflops.push_back(t->gflops);
    write_file_atomic(out / (file_safe(key) + "-histogram.svg"),
                      svg_histogram(gflops, 20, fmt::format("{}: GFLOP/s of the working kernels", key), "GFLOP/s"));
    ++files;
    if (ok.empty()) continue;
    for (const auto& [a, b] : asked.empty() ? default_pairs(ok) : asked) {
      bool present = false;
      for (const auto* t : ok) present = present || (t->config.count(a) && t->config.count(b));
      if (!present) continue;  // another family's parameters
      write_file_atomic(out / fmt::format("{}-heatmap-{}-{}.svg", file_safe(key), a, b),
                        svg_heatmap(make_heatmap(ok, a, b, fmt::format("{}: best GFLOP/s by {} x {}", key, a, b))));
      ++files;
    }
  }

  // Tables 2/3: the best of any family per layer and direction, then per layer and over all layers combined.
  struct Best {
    double ms = 0;
    double flops = 0;
    std::string family;
  };
  std::vector<std::string> layers;
  std::map<std::string, std::map<std::string, Best>> best;
  for (const LoggedTrial& t : log.trials) {
    if (t.status != "ok") continue;
    if (!best.count(t.layer)) layers.push_back(t.layer);
    Best& b = best[t.layer][std::string(t.problem.operation())];
    if (b.ms == 0 || t.ms < b.ms) b = {t.ms, t.problem.flops(), t.family};
  }
  ReportTable table({"layer", "direction", "ms", "GFLOP/s", "% of peak", "family"});
  auto add = [&](const std::string& layer, const std::string& dir, double ms, double flops, const std::string& family) {
    const double gflops = flops / (ms * 1e6);
    table.add_row({layer, dir, fmt::format("{:.3f}", ms), fmt::format("{:.1f}", gflops),
                   peak > 0 ? fmt::format("{:.1f}", 100 * gflops / peak) : "-", family},
                  {{"layer", layer}, {"direction", dir}, {"ms", ms}, {"gflops", gflops},
                   {"percent_of_peak", peak > 0 ? 100 * gflops / peak : 0.0}, {"family", family}});
  };
  std::map<std::string, Best> totals;
  double all_ms = 0, all_flops = 0;
  for (const std::string& layer : layers) {
    double ms = 0, flops = 0;
    for (const auto& [dir, b] : best[layer]) {
      add(layer, dir, b.ms, b.flops, b.family);
      ms += b.ms, flops += b.flops;
      totals[dir].ms += b.ms, totals[dir].flops += b.flops;
    }
    if (best[layer].size() > 1) add(layer, "combined", ms, flops, "");
    all_ms += ms, all_flops += flops;
  }
  if (layers.size() > 1) {
    for (const auto& [dir, b] : totals) add("all layers", dir, b.ms, b.flops, "");
    add("all layers", "combined", all_ms, all_flops, "");
  }
  std::cout << fmt::format("tuning log {}: {} candidates on {}; peak {}\n", opt.log, log.trials.size(),
                           log.metadata.value("device", std::string("?")),
                           peak > 0 ? fmt::format("{:.0f} GFLOP/s (measured FP32 FMA)", peak) : std::string("unknown (give --peak)"));
  table.print(std::cout);
  table.write(out / "table.md", log.metadata);
  table.write(out / "table.json", log.metadata);
  std::cout << fmt::format("wrote {} SVG chart(s), table.md and table.json to {}\n", files, out.string());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto opt = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "Histogram, heatmaps and per-layer tables from a tuning log");
  cmd->add_option("log", opt->log, "Tuning log written by `convtune tune` (JSON)")->required();
  cmd->add_option("--out-dir", opt->out_dir, "Folder for the SVG files and tables (default: LOG-report next to the log)");
  cmd->add_option("--heatmap", opt->heatmaps, "Parameter pair to draw, e.g. TILE_M,TILE_N; repeatable "
                                              "(default: the first two pairs of parameters that varied)");
  cmd->add_option("--peak", opt->peak_gflops, "FP32 peak in GFLOP/s for % of peak (default: the one the log measured)");
  cmd->callback([opt] { run_report(*opt); });
}

}  // namespace convtune::cli
