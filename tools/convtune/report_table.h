// ReportTable: the rows a command prints, also written as CSV, JSON or Markdown (chosen by file extension).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace convtune::cli {

class ReportTable {
 public:
  explicit ReportTable(std::vector<std::string> columns) : columns_(std::move(columns)) {}
  // Cells as text for printing; `values` keeps numbers as numbers for JSON (same order as columns).
  void add_row(std::vector<std::string> cells, nlohmann::json values);
  void print(std::ostream& out) const;
  std::string csv() const;
  std::string markdown() const;
  nlohmann::json json() const;
  // Writes .csv, .json or .md by the path's extension, atomically; throws InvalidArgument for others.
  void write(const std::filesystem::path& path, const nlohmann::json& metadata) const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<nlohmann::json> values_;
};

}  // namespace convtune::cli
