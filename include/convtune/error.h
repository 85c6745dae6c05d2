// Error types thrown by convtune: every message names what was wrong and what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace convtune {

// Base of every convtune error; what() is meant to be shown to a user as is.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
