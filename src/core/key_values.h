// Splits the KEY=VALUE,KEY=VALUE texts that describe layers and GEMMs (parse_problem, parse_gemm) into their fields.
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "convtune/error.h"

namespace convtune {

// Calls field(key, value) for each comma-separated item of `text` in order, skipping empty items; an item without
// '=' throws InvalidArgument naming it as a `what` field ("layer", "GEMM").
template <typename Field>
void for_each_field(std::string_view text, std::string_view what, Field&& field) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw InvalidArgument(fmt::format("{} field '{}' has no '=': expected KEY=VALUE", what, item));
    field(item.substr(0, eq), item.substr(eq + 1));
  }
}

}  // namespace convtune
