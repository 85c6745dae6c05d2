// data_dir(): share/convtune found relative to the loaded library (dladdr), the same in the build and install trees.
#include "src/core/install_paths.h"

#include <dlfcn.h>

#include <cstdlib>
#include <system_error>

#ifndef CONVTUNE_DATA_FROM_LIB
#define CONVTUNE_DATA_FROM_LIB "../share/convtune"
#endif

namespace convtune {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("CONVTUNE_DATA_DIR"); env && *env) return env;
  static const std::filesystem::path found = [] {
    Dl_info info{};
    // Any function of this library names the file it was loaded from (the executable when linked statically).
    if (dladdr(reinterpret_cast<void*>(&data_dir), &info) == 0 || !info.dli_fname) return std::filesystem::path();
    std::error_code error;
    const std::filesystem::path library = std::filesystem::canonical(info.dli_fname, error);
    if (error) return std::filesystem::path();
    for (const char* relative : {CONVTUNE_DATA_FROM_LIB, "../share/convtune"}) {
      const std::filesystem::path dir = (library.parent_path() / relative).lexically_normal();
      if (std::filesystem::is_directory(dir, error)) return dir;
    }
    return std::filesystem::path();
  }();
  return found;
}

}  // namespace convtune
