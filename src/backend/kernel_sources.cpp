// Kernel source lookup (embedded or $CONVTUNE_KERNEL_DIR) and #include expansion.
#include "src/backend/kernel_sources.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "convtune/error.h"
#include "src/core/atomic_file.h"

namespace convtune {

namespace detail {
const std::map<std::string, std::string_view>& embedded_kernel_sources();  // generated at build time
}

namespace {

std::string raw_source(std::string_view file) {
  if (const char* dir = std::getenv("CONVTUNE_KERNEL_DIR"); dir && *dir) {
    const std::filesystem::path path = std::filesystem::path(dir) / std::string(file);
    if (!std::filesystem::exists(path)) {
      throw Error(fmt::format("kernel file {} not found in CONVTUNE_KERNEL_DIR={}", file, dir));
    }
    return read_file(path);
  }
  const auto& sources = detail::embedded_kernel_sources();
  const auto it = sources.find(std::string(file));
  if (it == sources.end()) {
    throw Error(fmt::format("kernel file {} is not embedded in this build (set CONVTUNE_KERNEL_DIR to read "
                            "kernels from a directory)", file));
  }
  return std::string(it->second);
}

void expand(std::string_view file, std::set<std::string>& seen, std::string& out) {
  if (!seen.insert(std::string(file)).second) return;  // each header once, like #pragma once
  std::istringstream in(raw_source(file));
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 8, "#include") == 0) {
      const auto open = line.find('"', first);
      const auto close = open == std::string::npos ? open : line.find('"', open + 1);
      if (open != std::string::npos && close != std::string::npos) {
        expand(line.substr(open + 1, close - open - 1), seen, out);
        continue;
      }
    }
    out += line;
    out += '\n';
  }
}

}  // namespace

std::string load_kernel_source(std::string_view file) {
  std::set<std::string> seen;
  std::string out;
  expand(file, seen, out);
  return out;
}

std::vector<std::string> embedded_kernel_files() {
  std::vector<std::string> files;
  for (const auto& [name, text] : detail::embedded_kernel_sources()) files.push_back(name);
  return files;
}

}  // namespace convtune
