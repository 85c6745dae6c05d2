// Strict parsing of tuning database files; errors carry the path, and the line and column for bad JSON.
#include "src/tuning_db/tuning_db_file.h"
#include "src/tuning_db/tuning_entry.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "src/core/atomic_file.h"
#include "src/core/json_reader.h"

namespace convtune {

std::vector<TuningEntry> read_tuning_file(const std::filesystem::path& path) {
  const std::string where = path.string();
  std::string text;
  try {
    text = read_file(path, kMaxTuningDbBytes);
  } catch (const Error& e) {
    throw TuningDatabaseError(path, fmt::format("tuning database {} cannot be read: {}", where, e.what()));
  }
  return parse_tuning_text(text, path);
}

std::vector<TuningEntry> parse_tuning_text(std::string_view text, const std::filesystem::path& path) {
  const std::string where = path.string();
  nlohmann::json json;
  try {
    json = parse_json(text);
  } catch (const InvalidArgument& e) {
    throw TuningDatabaseError(path, fmt::format("tuning database {} is not valid JSON: {}", where, e.what()));
  }
  auto fail = [&](const std::string& message) {
    throw TuningDatabaseError(path, fmt::format("tuning database {}: {}", where, message));
  };
  if (!json.is_object()) fail(fmt::format("expected an object with \"format\" and \"entries\", found {}",
                                          std::string(json.type_name())));
  const auto format = json.find("format");
  if (format == json.end() || !format->is_string() || format->get<std::string>() != kTuningDbFormat)
    fail(fmt::format("field 'format' must be \"{}\"", kTuningDbFormat));
  const auto version = json.find("format_version");
  if (version == json.end() || !version->is_number_integer())
    fail("field 'format_version' must be an integer");
  if (*version != kTuningDbFormatVersion)
    fail(fmt::format("format_version {} is not supported: this convtune ({}) reads version {}", version->dump(),
                     convtune_version(), kTuningDbFormatVersion));
  const auto entries = json.find("entries");
  if (entries == json.end() || !entries->is_array())
    fail(fmt::format("field 'entries' must be an array{}",
                     entries == json.end() ? "" : fmt::format(", found {}", std::string(entries->type_name()))));

  std::vector<TuningEntry> out;
  out.reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    try {
      out.push_back(tuning_entry_from_json((*entries)[i], fmt::format("tuning database {}: entry {}", where, i)));
    } catch (const InvalidArgument& e) {
      throw TuningDatabaseError(path, e.what());
    }
  }
  return out;
}

std::string tuning_file_text(const std::vector<const TuningEntry*>& entries) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const TuningEntry* e : entries) list.push_back(to_json(*e));
  const nlohmann::ordered_json file = {
      {"format", kTuningDbFormat}, {"format_version", kTuningDbFormatVersion}, {"entries", std::move(list)}};
  return file.dump(2) + "\n";
}

}  // namespace convtune
