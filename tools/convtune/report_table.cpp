// Table formatting for the terminal, CSV, JSON and Markdown.
#include "tools/convtune/report_table.h"

#include <fmt/format.h>

#include <algorithm>

#include "convtune/error.h"
#include "src/core/atomic_file.h"

namespace convtune::cli {

void ReportTable::add_row(std::vector<std::string> cells, nlohmann::json values) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
  values_.push_back(std::move(values));
}

void ReportTable::print(std::ostream& out) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) text += fmt::format("{:<{}}  ", cells[c], width[c]);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(columns_);
  for (const auto& row : rows_) line(row);
}

std::string ReportTable::csv() const {
  auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  std::string text;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) text += (c ? "," : "") + quote(cells[c]);
    text += "\n";
  };
  line(columns_);
  for (const auto& row : rows_) line(row);
  return text;
}

std::string ReportTable::markdown() const {
  std::string text = "|";
  for (const auto& c : columns_) text += " " + c + " |";
  text += "\n|";
  for (size_t c = 0; c < columns_.size(); ++c) text += "---|";
  text += "\n";
  for (const auto& row : rows_) {
    text += "|";
    for (const auto& cell : row) text += " " + cell + " |";
    text += "\n";
  }
  return text;
}

nlohmann::json ReportTable::json() const { return nlohmann::json(values_); }

void ReportTable::write(const std::filesystem::path& path, const nlohmann::json& metadata) const {
  const std::string ext = path.extension().string();
  if (ext == ".csv") {
    write_file_atomic(path, csv());
  } else if (ext == ".json") {
    nlohmann::json doc = metadata;
    doc["rows"] = json();
    write_file_atomic(path, doc.dump(2) + "\n");
  } else if (ext == ".md") {
    std::string text;
    for (const auto& [key, value] : metadata.items())
      text += fmt::format("- {}: {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
    write_file_atomic(path, text + "\n" + markdown());
  } else {
    throw InvalidArgument(fmt::format("--out {}: expected a .csv, .json or .md file", path.string()));
  }
}

}  // namespace convtune::cli
