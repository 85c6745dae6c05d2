// The CONVTUNE_* environment variables convtune reads, checked together before any work.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "convtune/error.h"

namespace convtune {

// Every variable convtune reads, with what its value must be ("a number of threads from 1 to 4096").
struct EnvironmentVariable {
  const char* name;
  const char* expected;
};
const std::vector<EnvironmentVariable>& environment_variables();

// Throws InvalidArgument naming the first set variable whose value is unusable ("CONVTUNE_THREADS='two' is
// invalid: expected a number of threads from 1 to 4096 (the calling thread included)"): a number or choice that
// does not parse, a folder convtune reads that does not exist, a path that names the wrong kind of file. A variable
// set to the empty string counts as unset, as everywhere it is read.
void check_environment();

// Variable `name` read through `parse` (nullopt when unset or empty); parse's InvalidArgument comes back prefixed
// with the variable's name.
template <typename T, typename Parse>
std::optional<T> parsed_variable(const char* name, Parse parse) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  try {
    return parse(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", name, e.what()));
  }
}

}  // namespace convtune
