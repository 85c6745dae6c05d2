// Terminal-safe text (convtune::printable in convtune/error.h) in pieces, for output that arrives a chunk at a time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace convtune {

// Appends printable(text) to `out` and returns the bytes of `text` consumed: all of them when `complete`, else all
// but a UTF-8 sequence cut short at the end of `text` (the caller passes those bytes again with what follows).
size_t append_printable(std::string_view text, std::string& out, bool complete);

}  // namespace convtune
