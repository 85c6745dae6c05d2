// Strict parsing of tuning database files, or of their sound entries with the damaged ones described; errors carry
// the path, the entry and field, and the line and column for bad JSON.
#include "src/tuning_db/tuning_db_file.h"
#include "src/tuning_db/tuning_entry.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "src/core/atomic_file.h"
#include "src/core/json_reader.h"
#include "src/tuning_db/entry_validation.h"

namespace convtune {

namespace {

std::string read_text(const std::filesystem::path& path) {
  try {
    return read_file(path, kMaxTuningDbBytes);
  } catch (const Error& e) {
    throw TuningDatabaseError(path, fmt::format("tuning database {} cannot be read: {}", path.string(), e.what()));
  }
}

// The entries of a file's text; a damaged entry throws when `damaged` is null, else is described there.
std::vector<TuningEntry> parse_entries(std::string_view text, const std::filesystem::path& path,
                                       std::vector<std::string>* damaged) {
  const std::string where = path.string();
  nlohmann::json json;
  std::vector<DuplicateKey> duplicates;
  try {
    json = parse_json(text, kMaxJsonDepth, &duplicates);
  } catch (const InvalidArgument& e) {
    throw TuningDatabaseError(path, fmt::format("tuning database {} is not valid JSON: {}", where, e.what()));
  }
  auto fail = [&](const std::string& message) {
    throw TuningDatabaseError(path, fmt::format("tuning database {}: {}", where, message));
  };
  // A key twice inside an entry damages that entry; anywhere else the file's structure (a second "entries" made
  // every entry vanish) is in doubt.
  std::map<size_t, std::string> duplicated_in_entry;
  for (const DuplicateKey& d : duplicates) {
    size_t index = 0;
    const char* digits = d.path.c_str() + std::string_view("entries[").size();
    char* end = nullptr;
    if (d.path.rfind("entries[", 0) == 0 && std::isdigit(static_cast<unsigned char>(*digits))) {
      index = static_cast<size_t>(std::strtoull(digits, &end, 10));
      if (end && *end == ']') {
        duplicated_in_entry.emplace(index, fmt::format("the key \"{}\" appears twice (at {}): expected each key once",
                                                       d.key, d.path));
        continue;
      }
    }
    fail(fmt::format("the key \"{}\" appears twice{}: expected each key once (the file's structure is in doubt)",
                     d.key, d.path.empty() ? " at the top level" : fmt::format(" (at {})", d.path)));
  }
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
    const std::string entry_where = fmt::format("tuning database {}: entry {}", where, i);
    try {
      const auto duplicated = duplicated_in_entry.find(i);
      if (duplicated != duplicated_in_entry.end()) throw InvalidArgument(entry_where + ": " + duplicated->second);
      TuningEntry e = tuning_entry_from_json((*entries)[i], entry_where);
      if (const std::string why = search_space_violation(e); !why.empty()) {
        throw InvalidArgument(fmt::format("{} ({} {}): {}", entry_where, e.family, e.problem.to_string(), why));
      }
      out.push_back(std::move(e));
    } catch (const InvalidArgument& e) {
      if (!damaged) throw TuningDatabaseError(path, e.what());
      damaged->push_back(e.what());
    }
  }
  return out;
}

}  // namespace

std::vector<TuningEntry> read_tuning_file(const std::filesystem::path& path) {
  return parse_tuning_text(read_text(path), path);
}

std::vector<TuningEntry> parse_tuning_text(std::string_view text, const std::filesystem::path& path) {
  return parse_entries(text, path, nullptr);
}

TuningFileEntries read_tuning_file_entries(const std::filesystem::path& path) {
  return parse_tuning_entries(read_text(path), path);
}

TuningFileEntries parse_tuning_entries(std::string_view text, const std::filesystem::path& path) {
  TuningFileEntries out;
  out.entries = parse_entries(text, path, &out.damaged);
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
