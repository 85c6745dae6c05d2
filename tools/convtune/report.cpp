// Report content (report.h): charts, an index page and tables built from a tuning log.
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

// The parameter pairs worth a heatmap when none are named: both took two values or more among the working
// candidates, at least four cells hold one, and the best per cell differs by 2% or more (less is timing noise).
// The pairs of the widest spread first, at most kMaxHeatmapsPerTask; `more` counts those left out.
std::vector<std::pair<std::string, std::string>> varied_pairs(const std::vector<const LoggedTrial*>& ok, size_t& more) {
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
  std::vector<std::pair<double, std::pair<std::string, std::string>>> scored;
  for (size_t i = 0; i < varied.size(); ++i) {
    for (size_t j = i + 1; j < varied.size(); ++j) {
      std::map<std::pair<int64_t, int64_t>, double> best;
      for (const auto* t : ok) {
        const auto a = t->config.find(varied[i]), b = t->config.find(varied[j]);
        if (a == t->config.end() || b == t->config.end()) continue;
        double& cell = best[{a->second, b->second}];
        cell = std::max(cell, t->gflops);
      }
      if (best.size() < 4) continue;
      double lo = INFINITY, hi = 0;
      for (const auto& [at, gflops] : best) lo = std::min(lo, gflops), hi = std::max(hi, gflops);
      if (!(hi > lo * 1.02)) continue;
      scored.push_back({hi / std::max(lo, 1e-300), {varied[i], varied[j]}});
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [spread, pair] : scored)
    if (pairs.size() < kMaxHeatmapsPerTask) pairs.push_back(pair);
  more = scored.size() - pairs.size();
  return pairs;
}

Heatmap make_heatmap(const std::vector<const LoggedTrial*>& ok, const std::string& a, const std::string& b,
                     const std::string& title, const LoggedTrial* best, const LoggedTrial* default_trial) {
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
  Heatmap map{title, a, b, "best GFLOP/s", {}, {}, {}, std::nullopt, std::nullopt};
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
  auto cell_of = [&](const LoggedTrial* t) -> std::optional<std::pair<size_t, size_t>> {
    if (!t || !t->config.count(a) || !t->config.count(b)) return std::nullopt;
    return std::pair<size_t, size_t>(std::lower_bound(xv.begin(), xv.end(), t->config.at(a)) - xv.begin(),
                                     std::lower_bound(yv.begin(), yv.end(), t->config.at(b)) - yv.begin());
  };
  map.best_cell = cell_of(best);
  map.default_cell = cell_of(default_trial);
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
  std::map<std::string, const LoggedTrial*> first_by_task;
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
    first_by_task.emplace(key, &t);
    if (t.status == "ok") list.push_back(&t);
  }
  std::set<std::pair<std::string, std::string>> drawn;
  std::set<std::string> parameters;  // every parameter of the log, for the message about a --heatmap pair it lacks
  std::string sections;
  for (const std::string& key : keys) {
    const auto& ok = ok_by_task[key];
    const LoggedTrial& first = *first_by_task[key];
    const std::string title = fmt::format("{} {} {}", first.layer, first.problem.operation(), first.family);
    const LoggedTrial* best = nullptr;
    const LoggedTrial* default_trial = nullptr;
    std::vector<double> gflops;
    for (const auto* t : ok) {
      gflops.push_back(t->gflops);
      if (!best || t->gflops > best->gflops) best = t;
      if (t->note.find("built-in default") != std::string::npos) default_trial = t;
      for (const auto& [name, value] : t->config) parameters.insert(name);
    }
    std::vector<ChartMarker> markers;
    if (default_trial) markers.push_back({default_trial->gflops, "default"});
    if (best) markers.push_back({best->gflops, "best"});
    std::vector<std::string> files;
    files.push_back(file_safe(key) + "-histogram.svg");
    report.charts.emplace_back(files.back(), svg_histogram(gflops, 20, title + ": GFLOP/s of the working kernels",
                                                           "GFLOP/s", markers));
    size_t more = 0;
    const auto pairs = ok.empty() ? std::vector<std::pair<std::string, std::string>>{}
                       : heatmaps.empty() ? varied_pairs(ok, more)
                                          : heatmaps;
    for (const auto& [a, b] : pairs) {
      bool present = false;
      for (const auto* t : ok) present = present || (t->config.count(a) && t->config.count(b));
      if (!present) continue;  // another family's parameters
      drawn.insert({a, b});
      files.push_back(fmt::format("{}-heatmap-{}-{}.svg", file_safe(key), file_safe(a), file_safe(b)));
      report.charts.emplace_back(
          files.back(),
          svg_heatmap(make_heatmap(ok, a, b, fmt::format("{}: best GFLOP/s by {} x {}", title, a, b), best, default_trial)));
    }
    // The index page's section of this task: what was tried, the best and the default, and its charts.
    const size_t tried = std::count_if(log.trials.begin(), log.trials.end(), [&](const LoggedTrial& t) {
      return t.layer == first.layer && t.problem.operation() == first.problem.operation() && t.family == first.family;
    });
    sections += fmt::format("<h2>{}</h2>\n<p>{} candidates, {} working", xml_escape(title), tried, ok.size());
    if (best) sections += fmt::format("; best {} GFLOP/s ({})", format_value(best->gflops), xml_escape(to_string(best->config)));
    if (default_trial) sections += fmt::format("; the family's default {} GFLOP/s", format_value(default_trial->gflops));
    if (more) sections += fmt::format("; {} more parameter pairs varied (--heatmap A,B draws one)", more);
    sections += "</p>\n";
    for (const std::string& file : files)
      sections += fmt::format("<p><img src=\"{0}\" alt=\"{0}\"><br><a href=\"{0}\">{0}</a></p>\n", xml_escape(file));
  }
  for (const auto& pair : heatmaps) {
    if (drawn.count(pair)) continue;
    std::string known;
    for (const auto& name : parameters) known += (known.empty() ? "" : ", ") + name;
    throw InvalidArgument(fmt::format("--heatmap {},{}: no working candidate in {} has both parameters (its "
                                      "parameters: {})",
                                      pair.first, pair.second, log.path().string(), known.empty() ? "none" : known));
  }
  report.index_html = fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>convtune report: {0}</title></head><body>\n"
      "<h1>convtune report: {0}</h1>\n<p>device {1}; {2} candidates; tables: <a href=\"table.md\">table.md</a>, "
      "<a href=\"table.json\">table.json</a></p>\n{3}</body></html>\n",
      xml_escape(log.path().filename().string()), xml_escape(metadata_text(log.metadata, "device", "?")),
      log.trials.size(), sections);

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
