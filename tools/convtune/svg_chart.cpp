// Histogram and heatmap drawing.
#include "tools/convtune/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace convtune::cli {

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

namespace {

std::string text_at(double x, double y, const std::string& text, const char* anchor = "middle", int size = 12,
                    const std::string& extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" {}>{}</text>\n", x, y, size,
                     anchor, extra, xml_escape(text));
}

// Where `v` lies between lo and hi, in [0, 1]: 0 when the range is empty or not finite (one distinct value, or
// values so large that hi - lo overflows or rounds to 0), so no caller ever converts a NaN to an integer.
double fraction(double v, double lo, double hi) {
  const double t = (v - lo) / (hi - lo);
  if (!(t > 0)) return 0;  // also NaN
  return t < 1 ? t : 1;
}

// A perceptually ordered dark-blue -> green -> yellow ramp (viridis-like), t in [0, 1].
std::string ramp(double t) {
  static const double stops[][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = (t > 0 ? std::min(t, 1.0) : 0.0) * 4;  // NaN -> 0
  const int i = std::min(static_cast<int>(t), 3);
  const double f = t - i;
  auto mix = [&](int k) { return static_cast<int>(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])); };
  return fmt::format("rgb({},{},{})", mix(0), mix(1), mix(2));
}

std::string svg_open(int width, int height) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                     "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
                     width, height);
}

// Wide enough for a title of 15-pixel sans-serif text (about 8.5 pixels a character) with a margin: a chart
// narrower than its title cut it off on both sides.
int width_for_title(const std::string& title, int content_width) {
  return std::max(content_width, static_cast<int>(title.size() * 8.5) + 40);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (!(hi - lo > 0) || !std::isfinite(hi - lo)) {
    const double half = lo == 0 ? 1 : std::fabs(lo) * 0.1;  // one distinct value: a range around it
    lo -= half, hi += half;
    if (!std::isfinite(hi - lo)) return {lo, hi};
  }
  const double raw = (hi - lo) / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step) * step;
  for (int i = 0; i <= count + 2 && ticks.size() < 64; ++i) {
    const double t = first + i * step;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);  // -0 and 1e-17 print as 0
    if (t >= hi) break;
  }
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string format_tick(double value, double step) {
  const int decimals = step > 0 && std::isfinite(step) ? std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 9) : 0;
  return fmt::format("{:.{}f}", value, decimals);
}

std::string format_value(double value) { return fmt::format("{:.3g}", value); }

std::string svg_histogram(const std::vector<double>& values, int bins, const std::string& title,
                          const std::string& x_label, const std::vector<ChartMarker>& markers) {
  const int left = 60, right = 20, top = 44, bottom = 60;
  const int width = width_for_title(title, 640), height = 400;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  std::string svg = svg_open(width, height);
  svg += text_at(width / 2.0, 24, title, "middle", 15);
  if (values.empty()) return svg + text_at(width / 2.0, height / 2.0, "no working candidates") + "</svg>\n";
  // The x axis runs over nice tick values around the data, and the bins split that range.
  const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  const std::vector<double> x_ticks = nice_ticks(*min_it, *max_it, 5);
  const double lo = x_ticks.front(), hi = x_ticks.back();
  const double x_step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1;
  bins = std::max(bins, 1);
  std::vector<int> counts(bins, 0);
  for (double v : values) counts[std::min(bins - 1, static_cast<int>(fraction(v, lo, hi) * bins))]++;
  const int most = *std::max_element(counts.begin(), counts.end());
  // Counts are whole numbers: ticks at least 1 apart.
  std::vector<double> y_ticks = nice_ticks(0, std::max(most, 1), 4);
  if (y_ticks.size() > 1 && y_ticks[1] - y_ticks[0] < 1) {
    y_ticks.clear();
    for (int i = 0; i <= std::max(most, 1); ++i) y_ticks.push_back(i);
  }
  const double y_top = y_ticks.back();
  for (int b = 0; b < bins; ++b) {
    const double h = plot_h * counts[b] / y_top;
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#3b528b\"/>\n",
                       left + plot_w * b / bins + 1, top + plot_h - h, std::max(plot_w / bins - 2, 0.5), h);
  }
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, top + plot_h,
                     left + plot_w, top + plot_h);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, top, left, top + plot_h);
  for (double t : x_ticks) {
    const double x = left + plot_w * fraction(t, lo, hi);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"black\"/>\n", x, top + plot_h, x,
                       top + plot_h + 4);
    svg += text_at(x, top + plot_h + 18, format_tick(t, x_step));
  }
  for (double t : y_ticks) {
    const double y = top + plot_h - plot_h * t / y_top;
    svg += text_at(left - 6, y + 4, format_tick(t, 1), "end");
  }
  for (const ChartMarker& marker : markers) {
    const double x = left + plot_w * fraction(marker.value, lo, hi);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#d62728\" stroke-width=\"2\" "
                       "stroke-dasharray=\"6,3\"/>\n", x, top, x, top + plot_h);
    // Labels right of their line, or left of it near the right edge, where they would be cut off.
    const bool near_right = x > left + plot_w * 0.75;
    svg += text_at(near_right ? x - 4 : x + 4, top + 12 + 14 * static_cast<double>(&marker - markers.data()),
                   fmt::format("{} {}", marker.label, format_value(marker.value)), near_right ? "end" : "start", 11,
                   "fill=\"#d62728\"");
  }
  svg += text_at(left + plot_w / 2, height - 16, fmt::format("{} ({} working kernels)", x_label, values.size()));
  svg += text_at(16, top + plot_h / 2, "kernels", "middle", 12,
                 fmt::format("transform=\"rotate(-90 16 {:.1f})\"", top + plot_h / 2));
  return svg + "</svg>\n";
}

std::string svg_heatmap(const Heatmap& map) {
  const int cols = static_cast<int>(map.x_ticks.size()), rows = static_cast<int>(map.y_ticks.size());
  const int cell = 56, left = 80, top = 50, bottom = 80, legend = 100;
  const int content_width = left + cols * cell + legend;
  const int width = width_for_title(map.title, std::max(content_width, 360)), height = top + rows * cell + bottom;
  std::string svg = svg_open(width, height);
  svg += text_at(width / 2.0, 24, map.title, "middle", 15);
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& row : map.cells)
    for (const auto& v : row)
      if (v) lo = std::min(lo, *v), hi = std::max(hi, *v);
  if (!(hi > lo)) hi = lo + 1;
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const auto& v = map.cells[y][x];
      const double px = left + x * cell, py = top + y * cell;
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"white\"/>\n", px, py,
                         cell, cell, v ? ramp(fraction(*v, lo, hi)) : std::string("#d0d0d0"));
      svg += text_at(px + cell / 2.0, py + cell / 2.0 + 4, v ? format_value(*v) : "-", "middle", 11,
                     v && fraction(*v, lo, hi) > 0.6 ? "fill=\"black\"" : "fill=\"white\"");
    }
    svg += text_at(left - 8, top + y * cell + cell / 2.0 + 4, map.y_ticks[y], "end");
  }
  // The default's outline dashed, the best's solid, drawn over the cells.
  auto outline = [&](const std::optional<std::pair<size_t, size_t>>& at, const char* dash) {
    if (!at || at->first >= static_cast<size_t>(cols) || at->second >= static_cast<size_t>(rows)) return;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#d62728\" "
                       "stroke-width=\"3\" {}/>\n",
                       left + at->first * cell + 2, top + at->second * cell + 2, cell - 4, cell - 4, dash);
  };
  outline(map.default_cell, "stroke-dasharray=\"6,3\"");
  outline(map.best_cell, "");
  for (int x = 0; x < cols; ++x) svg += text_at(left + x * cell + cell / 2.0, top + rows * cell + 18, map.x_ticks[x]);
  svg += text_at(left + cols * cell / 2.0, top + rows * cell + 40, map.x_label);
  svg += text_at(18, top + rows * cell / 2.0, map.y_label, "middle", 12,
                 fmt::format("transform=\"rotate(-90 18 {:.1f})\"", top + rows * cell / 2.0));
  if (map.best_cell || map.default_cell) {
    svg += text_at(left, height - 12, "red outline: best configuration (solid), the family's default (dashed)",
                   "start", 11, "fill=\"#d62728\"");
  }
  // Legend: the ramp from the lowest to the highest cell.
  const int lx = left + cols * cell + 20, lh = rows * cell;
  for (int i = 0; i < 20; ++i) {
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"16\" height=\"{:.1f}\" fill=\"{}\"/>\n", lx,
                       top + lh - lh * (i + 1) / 20.0, lh / 20.0 + 0.5, ramp(i / 19.0));
  }
  svg += text_at(lx + 20, top + 10, format_value(hi), "start", 10);
  svg += text_at(lx + 20, top + lh, format_value(lo), "start", 10);
  svg += text_at(lx + 8, top + lh + 18, map.value_label, "middle", 10);
  return svg + "</svg>\n";
}

}  // namespace convtune::cli
