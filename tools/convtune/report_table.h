// ReportTable: the rows a command prints, also written as CSV, JSON or Markdown (chosen by file extension).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace convtune::cli {

// A column of the printed table. Priority 0 is always printed; a narrow terminal loses the highest priorities
// first.
struct TableColumn {
  std::string header;
  int priority = 0;
};

class ReportTable {
 public:
  explicit ReportTable(std::vector<std::string> columns);
  explicit ReportTable(std::vector<TableColumn> columns) : columns_(std::move(columns)) {}
  // `cells`: the row as printed (same order as the columns); `record`: the same row as data, an object of raw
  // numbers under names that carry their units (ms, gflops, ...), for CSV and JSON.
  void add_row(std::vector<std::string> cells, nlohmann::ordered_json record);
  // The table in at most `width` characters (0: no limit): columns of the highest priority are left out until it
  // fits, and a last line names them.
  void print(std::ostream& out, size_t width = 0) const;
  // One line per record: its fields (nested objects as "outer.inner"; lists left out), then `metadata`'s, so each
  // line stands on its own in a spreadsheet. Numbers are written in full, never rounded for display.
  std::string csv(const nlohmann::json& metadata = nlohmann::json::object()) const;
  std::string markdown() const;
  nlohmann::ordered_json json() const;  // the records, their fields in the order given
  // Writes .csv, .json (metadata with "rows": the records) or .md by the path's extension, atomically; throws
  // InvalidArgument for others.
  void write(const std::filesystem::path& path, const nlohmann::json& metadata) const;

 private:
  std::vector<TableColumn> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<nlohmann::ordered_json> records_;
};

}  // namespace convtune::cli
