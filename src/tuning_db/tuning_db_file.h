// TuningDbFile: reading and writing one tuning database file (JSON), strictly: any damage is an error that
// names the file, and the file is never rewritten by the reader.
#pragma once

#include <filesystem>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/error.h"
#include "convtune/tuning.h"

namespace convtune {

// TuningDatabaseError (convtune/tuning.h) names the file, and the entry and field when it is one entry.

// Layout: {"format": "convtune-tuning-db", "format_version": 1, "entries": [ ...to_json(entry)... ]}.
inline constexpr const char* kTuningDbFormat = "convtune-tuning-db";
inline constexpr int kTuningDbFormatVersion = 1;

// A database of 10,000 entries takes about 11.5 MB; beyond this a file is not a tuning database (or would take
// many times its size in memory once parsed).
inline constexpr uint64_t kMaxTuningDbBytes = uint64_t{256} << 20;

// The entries of `path`, in file order. Throws TuningDatabaseError when the file cannot be read (missing, not a
// regular file, larger than kMaxTuningDbBytes), is not JSON (with line, column and the place: entries[3].gflops),
// nests deeper than kMaxJsonDepth, has another layout or version or a key twice outside its entries, or holds an
// invalid entry: a field of the wrong type or value, a key twice, or a family, parameter value or problem outside
// what its kernel family declares (search_space_violation). For writers, which must not drop what they cannot read.
std::vector<TuningEntry> read_tuning_file(const std::filesystem::path& path);
// The same for text already read; `path` names it in errors.
std::vector<TuningEntry> parse_tuning_text(std::string_view text, const std::filesystem::path& path);

// A file read for its sound entries: a damaged entry is left out and described (file, entry number, family and
// problem when known, field), the others kept. Errors of the file's structure still throw.
struct TuningFileEntries {
  std::vector<TuningEntry> entries;
  std::vector<std::string> damaged;  // one message per entry left out
};
TuningFileEntries read_tuning_file_entries(const std::filesystem::path& path);
TuningFileEntries parse_tuning_entries(std::string_view text, const std::filesystem::path& path);

// The file's text for `entries`, in the given order, ending with a newline.
std::string tuning_file_text(const std::vector<const TuningEntry*>& entries);

}  // namespace convtune
