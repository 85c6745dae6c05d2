// Atomic file writes: a reader sees the old file or the whole new one, never a half-written file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace convtune {

// Writes `contents` to a temporary file beside `path`, flushes it to disk, then renames it over `path`.
// Creates missing parent directories. Throws Error naming the path on failure; the old file stays intact.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

// Reads a whole file; throws Error naming the path when it cannot.
std::string read_file(const std::filesystem::path& path);

}  // namespace convtune
