// Parsing JSON that comes from outside (tuning databases, tuning logs, model headers) safely: nesting depth
// bounded, numbers beyond double range and syntax errors reported with line, column and the value's path.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace convtune {

// Deeper than any file convtune writes (they nest 4 levels), shallow enough that recursive code on the result
// (dump(), comparisons, the caller's own walk) cannot exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;

// A key an object holds twice: JSON leaves it undefined which one counts (nlohmann keeps the last, other readers
// the first), so a file that says two things at one place is not trusted to mean either.
struct DuplicateKey {
  std::string path;  // the object's place, "entries[3].parameters"; empty for the top-level object
  std::string key;
};

// Parses `text` without recursion. Throws InvalidArgument whose message starts with the place ("line 3, column 14
// (entries[0].gflops): ") and says what was wrong and expected: a syntax error, a number out of range (1e400),
// nesting deeper than `max_depth`, or a key an object holds twice. The message names no file: callers prefix it
// with theirs. With `duplicates`, keys held twice are listed there instead (the last value kept), so a caller can
// refuse only the part of the document they are in.
nlohmann::json parse_json(std::string_view text, int max_depth = kMaxJsonDepth,
                          std::vector<DuplicateKey>* duplicates = nullptr);

// A value as it appears in an error message: its JSON text, cut to about `max_chars`.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace convtune
