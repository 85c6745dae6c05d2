// Parsing JSON that comes from outside (tuning databases, tuning logs, model headers) safely: nesting depth
// bounded, numbers beyond double range and syntax errors reported with line, column and the value's path.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace convtune {

// Deeper than any file convtune writes (they nest 4 levels), shallow enough that recursive code on the result
// (dump(), comparisons, the caller's own walk) cannot exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` without recursion. Throws InvalidArgument whose message starts with the place ("line 3, column 14
// (entries[0].gflops): ") and says what was wrong and expected: a syntax error, a number out of range (1e400), or
// nesting deeper than `max_depth`. The message names no file: callers prefix it with theirs.
nlohmann::json parse_json(std::string_view text, int max_depth = kMaxJsonDepth);

// A value as it appears in an error message: its JSON text, cut to about `max_chars`.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace convtune
