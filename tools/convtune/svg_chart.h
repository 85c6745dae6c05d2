// SVG charts for `convtune report`: a histogram and a heatmap, written as plain SVG text (no plotting library
// is packaged for C++ in Debian that would be worth the dependency for two chart types).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace convtune::cli {

// A labelled vertical line across a histogram (the default configuration's value, the best one's).
struct ChartMarker {
  double value = 0;
  std::string label;
};

// Bars of how many values fall in each of `bins` equal-width bins between the smallest and largest value; the axes
// carry "nice" ticks (nice_ticks) and `markers` are drawn over the bars.
std::string svg_histogram(const std::vector<double>& values, int bins, const std::string& title,
                          const std::string& x_label, const std::vector<ChartMarker>& markers = {});

// A grid of cells coloured by value (nullopt: no working candidate there, drawn grey), each cell labelled.
struct Heatmap {
  std::string title, x_label, y_label, value_label;
  std::vector<std::string> x_ticks, y_ticks;
  std::vector<std::vector<std::optional<double>>> cells;  // [y][x]
  // Cells to outline, as (x, y): the best configuration's (solid) and the family's default's (dashed).
  std::optional<std::pair<size_t, size_t>> best_cell, default_cell;
};
std::string svg_heatmap(const Heatmap& map);

// About `count` tick values covering [lo, hi], multiples of 1, 2 or 5 times a power of ten (0, 0.5, 1, 1.5 rather
// than 0, 0.37, 0.74); at least two.
std::vector<double> nice_ticks(double lo, double hi, int count);
// `value` with as many decimals as ticks `step` apart need to differ: 2.5 for a step of 0.5, 120 for 20.
std::string format_tick(double value, double step);
// `text` safe inside SVG or HTML text and attribute values (<, >, & and ").
std::string xml_escape(const std::string& text);
// A cell's or a bar's value with three significant digits, so neighbouring values that differ read differently.
std::string format_value(double value);

}  // namespace convtune::cli
