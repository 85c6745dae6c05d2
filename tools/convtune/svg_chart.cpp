// Histogram and heatmap drawing.
#include "tools/convtune/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace convtune::cli {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string text_at(double x, double y, const std::string& text, const char* anchor = "middle", int size = 12,
                    const std::string& extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" {}>{}</text>\n", x, y, size,
                     anchor, extra, escape(text));
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

}  // namespace

std::string svg_histogram(const std::vector<double>& values, int bins, const std::string& title,
                          const std::string& x_label) {
  const int width = 640, height = 400, left = 60, right = 20, top = 40, bottom = 60;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  std::string svg = svg_open(width, height);
  svg += text_at(width / 2.0, 24, title, "middle", 15);
  if (values.empty()) return svg + text_at(width / 2.0, height / 2.0, "no working candidates") + "</svg>\n";
  const double lo = *std::min_element(values.begin(), values.end());
  double hi = *std::max_element(values.begin(), values.end());
  if (hi <= lo) hi = lo + 1;
  bins = std::max(bins, 1);
  std::vector<int> counts(bins, 0);
  for (double v : values) counts[std::min(bins - 1, static_cast<int>(fraction(v, lo, hi) * bins))]++;
  const int most = *std::max_element(counts.begin(), counts.end());
  for (int b = 0; b < bins; ++b) {
    const double h = plot_h * counts[b] / most;
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#3b528b\"/>\n",
                       left + plot_w * b / bins + 1, top + plot_h - h, plot_w / bins - 2, h);
  }
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, top + plot_h,
                     left + plot_w, top + plot_h);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, top, left, top + plot_h);
  for (int i = 0; i <= 4; ++i) {
    const double x = left + plot_w * i / 4;
    svg += text_at(x, top + plot_h + 18, fmt::format("{:.0f}", lo + (hi - lo) * i / 4));
    const double y = top + plot_h - plot_h * i / 4;
    svg += text_at(left - 6, y + 4, fmt::format("{:.0f}", most * i / 4.0), "end");
  }
  svg += text_at(left + plot_w / 2, height - 16, x_label);
  svg += text_at(16, top + plot_h / 2, "kernels", "middle", 12,
                 fmt::format("transform=\"rotate(-90 16 {:.1f})\"", top + plot_h / 2));
  svg += text_at(width - right, top + 14, fmt::format("{} working kernels", values.size()), "end", 11);
  return svg + "</svg>\n";
}

std::string svg_heatmap(const Heatmap& map) {
  const int cols = static_cast<int>(map.x_ticks.size()), rows = static_cast<int>(map.y_ticks.size());
  const int cell = 56, left = 80, top = 50, bottom = 60, legend = 90;
  const int width = left + cols * cell + legend, height = top + rows * cell + bottom;
  std::string svg = svg_open(std::max(width, 360), height);
  svg += text_at(std::max(width, 360) / 2.0, 24, map.title, "middle", 15);
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
      svg += text_at(px + cell / 2.0, py + cell / 2.0 + 4, v ? fmt::format("{:.0f}", *v) : "-", "middle", 11,
                     v && fraction(*v, lo, hi) > 0.6 ? "fill=\"black\"" : "fill=\"white\"");
    }
    svg += text_at(left - 8, top + y * cell + cell / 2.0 + 4, map.y_ticks[y], "end");
  }
  for (int x = 0; x < cols; ++x) svg += text_at(left + x * cell + cell / 2.0, top + rows * cell + 18, map.x_ticks[x]);
  svg += text_at(left + cols * cell / 2.0, height - 16, map.x_label);
  svg += text_at(18, top + rows * cell / 2.0, map.y_label, "middle", 12,
                 fmt::format("transform=\"rotate(-90 18 {:.1f})\"", top + rows * cell / 2.0));
  // Legend: the ramp from the lowest to the highest cell.
  const int lx = left + cols * cell + 20, lh = rows * cell;
  for (int i = 0; i < 20; ++i) {
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"16\" height=\"{:.1f}\" fill=\"{}\"/>\n", lx,
                       top + lh - lh * (i + 1) / 20.0, lh / 20.0 + 0.5, ramp(i / 19.0));
  }
  svg += text_at(lx + 20, top + 10, fmt::format("{:.0f}", hi), "start", 10);
  svg += text_at(lx + 20, top + lh, fmt::format("{:.0f}", lo), "start", 10);
  svg += text_at(lx + 8, top + lh + 18, map.value_label, "middle", 10);
  return svg + "</svg>\n";
}

}  // namespace convtune::cli
