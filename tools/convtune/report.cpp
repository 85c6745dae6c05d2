// Report content (report.h): seed 004's pictures and tables built from a tuning log.
#include "tools/convtune/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "convtune/error.h"
#include "tools/convtune/svg_chart.h"

namespace convtune::cli {

namespace {

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
  for (const auto& [name, values] : {std::pair{a, xs.size()}, std::pair{b, ys.size()}}) {
    if (values > kMaxHeatmapAxisValues) {
      throw InvalidArgument(fmt::format("{}: parameter {} takes {} values among the working candidates: a heatmap "
                                        "draws at most {} (is this a convtune tuning log?)",
                                        title, name, values, kMaxHeatmapAxisValues));
    }
  }
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

}  // namespace

double metadata_number(const nlohmann::json& metadata, const char* key, double otherwise) {
  if (!metadata.is_object()) return otherwise;
  const auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number()) return otherwise;
  const double v = it->get<double>();
  return std::isfinite(v) && v >= 0 ? v : otherwise;
}

std::string metadata_text(const nlohmann::json& metadata, const char* key, const std::string& otherwise) {
  if (!metadata.is_object()) return otherwise;
  const auto it = metadata.find(key);
  return it != metadata.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

Report build_report(const TuneLog& log, const std::vector<std::pair<std::string, std::string>>& heatmaps,
                    double peak_gflops) {
  Report report;
  const double peak = peak_gflops > 0 ? peak_gflops : metadata_number(log.metadata, "peak_gflops", 0.0);
  report.peak_gflops = peak;
  // Pictures per task (layer x direction x family), in the order the log ran them.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const LoggedTrial*>> ok_by_task;
  for (const LoggedTrial& t : log.trials) {
    const std::string key = fmt::format("{}-{}-{}", t.layer, t.problem.operation(), t.family);
    if (!ok_by_task.count(key)) {
      keys.push_back(key);
      if (keys.size() > kMaxReportTasks) {
        throw InvalidArgument(fmt::format("tuning log {}: more than {} tasks (layer x direction x family): a report "
                                          "draws at most that many", log.path().string(), kMaxReportTasks));
      }
    }
    auto& list = ok_by_task[key];
    if (t.status == "ok") list.push_back(&t);
  }
  for (const std::string& key : keys) {
    const auto& ok = ok_by_task[key];
    std::vector<double> gflops;
    for (const auto* t : ok) gflops.push_back(t->gflops);
    report.charts.emplace_back(file_safe(key) + "-histogram.svg",
                               svg_histogram(gflops, 20, fmt::format("{}: GFLOP/s of the working kernels", key),
                                             "GFLOP/s"));
    if (ok.empty()) continue;
    for (const auto& [a, b] : heatmaps.empty() ? default_pairs(ok) : heatmaps) {
      bool present = false;
      for (const auto* t : ok) present = present || (t->config.count(a) && t->config.count(b));
      if (!present) continue;  // another family's parameters
      report.charts.emplace_back(
          fmt::format("{}-heatmap-{}-{}.svg", file_safe(key), file_safe(a), file_safe(b)),
          svg_heatmap(make_heatmap(ok, a, b, fmt::format("{}: best GFLOP/s by {} x {}", key, a, b))));
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
  ReportTable& table = report.table;
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
  return report;
}

}  // namespace convtune::cli
