// Table formatting for the terminal, CSV, JSON and Markdown.
#include "tools/convtune/report_table.h"

#include <fmt/format.h>

#include <algorithm>

#include "convtune/error.h"
#include "src/core/atomic_file.h"

namespace convtune::cli {

ReportTable::ReportTable(std::vector<std::string> columns) {
  for (std::string& header : columns) columns_.push_back({std::move(header), 0});
}

void ReportTable::add_row(std::vector<std::string> cells, nlohmann::ordered_json record) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
  records_.push_back(std::move(record));
}

void ReportTable::print(std::ostream& out, size_t width) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  std::vector<bool> shown(columns_.size(), true);
  auto total = [&] {
    size_t sum = 0, count = 0;
    for (size_t c = 0; c < columns_.size(); ++c)
      if (shown[c]) sum += widths[c], ++count;
    return sum + (count ? 2 * (count - 1) : 0);
  };
  std::vector<size_t> dropped;
  while (width > 0 && total() > width) {
    // The last column of the highest priority goes first.
    size_t drop = columns_.size();
    for (size_t c = 0; c < columns_.size(); ++c)
      if (shown[c] && columns_[c].priority > 0 && (drop == columns_.size() || columns_[c].priority >= columns_[drop].priority))
        drop = c;
    if (drop == columns_.size()) break;  // only columns that are always printed remain
    shown[drop] = false;
    dropped.push_back(drop);
  }
  // A wide column left out late can leave room for narrower ones left out before it: those of the lowest priority
  // (most wanted) come back first.
  std::stable_sort(dropped.begin(), dropped.end(),
                   [&](size_t a, size_t b) { return columns_[a].priority < columns_[b].priority; });
  std::vector<std::string> left_out;
  for (size_t c : dropped) {
    shown[c] = true;
    if (total() > width) shown[c] = false;
  }
  for (size_t c = 0; c < columns_.size(); ++c)
    if (!shown[c]) left_out.push_back(columns_[c].header);
  auto line = [&](auto cell_of) {
    std::string text;
    for (size_t c = 0; c < columns_.size(); ++c)
      if (shown[c]) text += fmt::format("{:<{}}  ", cell_of(c), widths[c]);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line([&](size_t c) { return columns_[c].header; });
  for (const auto& row : rows_) line([&](size_t c) { return row[c]; });
  if (!left_out.empty()) {
    // Word-wrapped, so the note fits the width it speaks of.
    std::string text = "(left out to fit " + std::to_string(width) + " columns:";
    for (size_t i = 0; i < left_out.size(); ++i) text += " " + left_out[i] + (i + 1 < left_out.size() ? "," : ";");
    text += " --wide prints them, --out FILE.csv keeps everything)";
    std::string line;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start + 1);
      if (end == std::string::npos) end = text.size();
      const std::string word = text.substr(start, end - start);
      if (!line.empty() && line.size() + word.size() > width) {
        out << line << "\n";
        line = word.substr(word[0] == ' ' ? 1 : 0);
      } else {
        line += word;
      }
      start = end;
    }
    out << line << "\n";
  }
}

namespace {

// A record's scalar fields as (name, text) in order, nested objects as "outer.inner"; lists are left out.
void flatten(const nlohmann::ordered_json& value, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    for (const auto& [key, inner] : value.items()) flatten(inner, prefix.empty() ? key : prefix + "." + key, out);
  } else if (value.is_string()) {
    out.emplace_back(prefix, value.get<std::string>());
  } else if (value.is_null()) {
    out.emplace_back(prefix, "");
  } else if (!value.is_array()) {
    out.emplace_back(prefix, value.dump());  // numbers in full (the JSON writer's shortest exact form), booleans
  }
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace

std::string ReportTable::csv(const nlohmann::json& metadata) const {
  std::vector<std::string> names;
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  auto add_name = [&](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  std::vector<std::pair<std::string, std::string>> shared;
  flatten(nlohmann::ordered_json::parse(metadata.dump()), "", shared);
  for (const nlohmann::ordered_json& record : records_) {
    rows.emplace_back();
    flatten(record, "", rows.back());
    for (const auto& [name, text] : rows.back()) add_name(name);
  }
  for (const auto& [name, text] : shared) add_name(name);
  std::string text;
  for (size_t c = 0; c < names.size(); ++c) text += (c ? "," : "") + csv_quote(names[c]);
  text += "\n";
  for (auto& row : rows) {
    row.insert(row.end(), shared.begin(), shared.end());
    for (size_t c = 0; c < names.size(); ++c) {
      const auto it = std::find_if(row.begin(), row.end(), [&](const auto& field) { return field.first == names[c]; });
      text += (c ? "," : "") + (it == row.end() ? std::string() : csv_quote(it->second));
    }
    text += "\n";
  }
  return text;
}

std::string ReportTable::markdown() const {
  std::string text = "|";
  for (const auto& c : columns_) text += " " + c.header + " |";
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

nlohmann::ordered_json ReportTable::json() const { return nlohmann::ordered_json(records_); }

void ReportTable::write(const std::filesystem::path& path, const nlohmann::json& metadata) const {
  const std::string ext = path.extension().string();
  if (ext == ".csv") {
    write_file_atomic(path, csv(metadata));
  } else if (ext == ".json") {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(metadata.dump());
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
