// Plain-text tables with columns sized to their contents.
#include "src/tuning_db/tuning_db_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace convtune {

std::string format_entry_table(const std::vector<ListedEntry>& entries) {
  std::vector<std::vector<std::string>> rows{
      {"#", "device", "family", "dir", "problem", "time ms", "GFLOP/s", "date", "origin"}};
  for (size_t i = 0; i < entries.size(); ++i) {
    const TuningEntry& e = entries[i].entry;
    rows.push_back({std::to_string(i + 1), e.device.name, e.family, std::string(e.problem.operation()),
                    e.problem.to_string(), fmt::format("{:.4g}", e.time_ms), fmt::format("{:.1f}", e.gflops),
                    e.date.substr(0, 10), entries[i].shipped ? "shipped" : "user"});
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      // Numbers right-aligned so their magnitudes line up; text left-aligned.
      const bool numeric = c == 0 || c == 5 || c == 6;
      line += numeric ? fmt::format("{:>{}}", row[c], width[c]) : fmt::format("{:<{}}", row[c], width[c]);
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string format_entry_details(const ListedEntry& listed) {
  const TuningEntry& e = listed.entry;
  std::string out;
  auto field = [&](std::string_view name, const std::string& value) { out += fmt::format("{:<17} {}\n", name, value); };
  field("device", e.device.name);
  field("vendor", e.device.vendor);
  field("architecture", e.device.architecture);
  field("backend", e.device.backend);
  field("driver", e.device.driver_version);
  field("fingerprint", e.device.fingerprint);
  field("family", e.family);
  field("kernel version", std::to_string(e.kernel_version));
  field("problem", e.problem.to_string());
  field("parameters", to_string(e.parameters));
  field("time", fmt::format("{:.6g} ms", e.time_ms));
  field("throughput", fmt::format("{:.1f} GFLOP/s", e.gflops));
  field("date", e.date);
  field("convtune version", e.convtune_version);
  field("origin", fmt::format("{} ({})", listed.origin, listed.shipped ? "shipped default" : "user database"));
  return out;
}

}  // namespace convtune
