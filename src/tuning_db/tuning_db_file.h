// TuningDbFile: reading and writing one tuning database file (JSON), strictly: any damage is an error that
// names the file, and the file is never rewritten by the reader.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "convtune/error.h"
#include "convtune/tuning.h"

namespace convtune {

// TuningDatabaseError (convtune/tuning.h) names the file, and the entry and field when it is one entry.

// Layout: {"format": "convtune-tuning-db", "format_version": 1, "entries": [ ...to_json(entry)... ]}.
inline constexpr const char* kTuningDbFormat = "convtune-tuning-db";
inline constexpr int kTuningDbFormatVersion = 1;

// The entries of `path`, in file order. Throws TuningDatabaseError when the file cannot be read, is not JSON
// (with line and column), has another layout or version, or holds an invalid entry.
std::vector<TuningEntry> read_tuning_file(const std::filesystem::path& path);

// The file's text for `entries`, in the given order, ending with a newline.
std::string tuning_file_text(const std::vector<const TuningEntry*>& entries);

}  // namespace convtune
