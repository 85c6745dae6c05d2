// Terminal-safe text: control characters, C1 controls and bytes that are not UTF-8 written as escapes; and the
// Error constructors that pass every message through it.
#include "src/core/printable.h"

#include "convtune/error.h"

namespace convtune {

namespace {

// Bytes of the well-formed UTF-8 sequence starting at text[at] (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF); 0 when it is not one; -1 when it is the start of one that `text` cuts short.
int sequence_length(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char first = byte(at);
  int length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (first >= 0xc2 && first <= 0xdf) {
    length = 2;
  } else if (first >= 0xe0 && first <= 0xef) {
    length = 3;
    if (first == 0xe0) low = 0xa0;
    if (first == 0xed) high = 0x9f;
  } else if (first >= 0xf0 && first <= 0xf4) {
    length = 4;
    if (first == 0xf0) low = 0x90;
    if (first == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  for (int i = 1; i < length; ++i) {
    if (at + static_cast<size_t>(i) >= text.size()) return -1;
    const unsigned char next = byte(at + static_cast<size_t>(i));
    if (i == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xbf)) return 0;
  }
  return length;
}

void append_escape(std::string& out, const char* prefix, unsigned value, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += prefix;
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kHex[(value >> shift) & 0xf];
}

}  // namespace

size_t append_printable(std::string_view text, std::string& out, bool complete) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
        append_escape(out, "\\x", c, 2);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const int length = sequence_length(text, i);
    if (length < 0 && !complete) return i;  // the rest of this character comes with the next piece
    if (length <= 0) {
      append_escape(out, "\\x", c, 2);
      ++i;
      continue;
    }
    // U+0080-U+009F: C1 controls, which some terminals obey (U+009B starts a control sequence as ESC [ does).
    if (length == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      append_escape(out, "\\u", static_cast<unsigned char>(text[i + 1]), 4);
    } else {
      out.append(text.substr(i, static_cast<size_t>(length)));
    }
    i += static_cast<size_t>(length);
  }
  return i;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_printable(text, out, true);
  return out;
}

Error::Error(const std::string& message) : std::runtime_error(printable(message)) {}
Error::Error(const char* message) : std::runtime_error(printable(message ? message : "")) {}

}  // namespace convtune
