// SVG charts for `convtune report`: a histogram and a heatmap, written as plain SVG text (no plotting library
// is packaged for C++ in Debian that would be worth the dependency for two chart types).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace convtune::cli {

// Bars of how many values fall in each of `bins` equal-width bins between the smallest and largest value.
std::string svg_histogram(const std::vector<double>& values, int bins, const std::string& title,
                          const std::string& x_label);

// A grid of cells coloured by value (nullopt: no working candidate there, drawn grey), each cell labelled.
struct Heatmap {
  std::string title, x_label, y_label, value_label;
  std::vector<std::string> x_ticks, y_ticks;
  std::vector<std::vector<std::optional<double>>> cells;  // [y][x]
};
std::string svg_heatmap(const Heatmap& map);

}  // namespace convtune::cli
