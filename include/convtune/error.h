// Error types thrown by convtune: every message names what was wrong and what was expected.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace convtune {

// `text` made safe to show on a terminal: control characters other than newline and tab (a NUL, an escape
// sequence, a carriage return), DEL, C1 controls and bytes that are not UTF-8 are written as \xNN (\u0080-\u009f for
// C1 controls); everything else, backslashes included, is kept, so applying it twice changes nothing more.
std::string printable(std::string_view text);

// Base of every convtune error; what() is meant to be shown to a user as is. The message goes through printable():
// file contents, paths and environment values quoted in it can neither drive the terminal nor cut the message
// short at a NUL, and Python receives it as valid UTF-8.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  explicit Error(const char* message);
};

// A value given by the user (a shape, a flag, a file's content) is invalid.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A backend or device cannot do what was asked (not available, out of memory, compile failure).
class BackendError : public Error {
 public:
  using Error::Error;
};

// The machine lacks what a request needs (host memory, disk space): the message names what was needed and what
// is available.
class ResourceError : public Error {
 public:
  using Error::Error;
};

// Something requested is not implemented for this combination (say, FP16 on the reference path).
class Unsupported : public Error {
 public:
  using Error::Error;
};

}  // namespace convtune
