// Checks of the CONVTUNE_* environment variables: the command line runs them first (exit status 2 naming the
// variable), the Python package on import; the places that read a variable keep their own checks for library users.
#include "src/core/environment.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdlib>
#include <functional>
#include <string_view>

#include "convtune/error.h"
#include "src/backend/cpu/caches.h"
#include "src/backend/cpu/isa.h"

namespace convtune {

namespace {

enum class Kind {
  Count,        // an integer in [low, high]
  Flag,         // 0 or 1
  ReadFolder,   // an existing folder convtune reads
  MadeFolder,   // a folder convtune creates when missing ("off" allowed where noted)
  File,         // a file convtune reads and writes: an existing one must be a regular file
  Library,      // a shared library: a bare name for the loader, or a path to an existing file
  Isa,
  Caches,
};

struct Check {
  EnvironmentVariable variable;
  Kind kind;
  long low = 0, high = 0;
};

const std::vector<Check>& checks() {
  static const std::vector<Check> list = {
      {{"CONVTUNE_THREADS", "a number of threads from 1 to 4096 (the calling thread included)"}, Kind::Count, 1, 4096},
      {{"CONVTUNE_COLUMNS", "a terminal width from 1 to 100000 columns"}, Kind::Count, 1, 100000},
      {{"CONVTUNE_CPU_ISA", "avx512, avx2 or scalar"}, Kind::Isa},
      {{"CONVTUNE_CPU_CACHES", "three sizes L1D,L2,L3 such as 32K,512K,32M"}, Kind::Caches},
      {{"CONVTUNE_KERNEL_WARNINGS", "0 or 1"}, Kind::Flag},
      {{"CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT", "0 or 1"}, Kind::Flag},
      {{"CONVTUNE_EMULATE_TENSOR_CORES", "0 or 1"}, Kind::Flag},
      {{"CONVTUNE_TUNING_DB", "a tuning database file (created when missing)"}, Kind::File},
      {{"CONVTUNE_CACHE_DIR", "a folder for compiled programs (created when missing), or off"}, Kind::MadeFolder},
      {{"CONVTUNE_KERNEL_DIR", "an existing folder of kernel sources"}, Kind::ReadFolder},
      {{"CONVTUNE_SHIPPED_TUNING_DIR", "an existing folder of shipped tuning databases"}, Kind::ReadFolder},
      {{"CONVTUNE_DATA_DIR", "an existing folder of convtune's data (share/convtune)"}, Kind::ReadFolder},
      {{"CONVTUNE_SUITE_DIR", "an existing folder of layer suites"}, Kind::ReadFolder},
      {{"CONVTUNE_DATA", "an existing dataset folder (Fashion-MNIST's IDX files)"}, Kind::ReadFolder},
      {{"CONVTUNE_DNNL_LIBRARY", "a library name (libdnnl.so.3) or the path of an existing file"}, Kind::Library},
      {{"CONVTUNE_CLBLAST_LIBRARY", "a library name (libclblast.so.1) or the path of an existing file"}, Kind::Library},
      {{"CONVTUNE_CUBLAS_LIBRARY", "a library name (libcublas.so.12) or the path of an existing file"}, Kind::Library},
      {{"CONVTUNE_CUDNN_LIBRARY", "a library name (libcudnn.so.9) or the path of an existing file"}, Kind::Library},
  };
  return list;
}

[[noreturn]] void refuse(const Check& check, std::string_view value, const std::string& why) {
  throw InvalidArgument(fmt::format("{}='{}' is invalid: {}expected {}", check.variable.name, value,
                                    why.empty() ? "" : why + ": ", check.variable.expected));
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISREG(mode)) return "a file";
  return "neither a file nor a folder";
}

void check_one(const Check& check, std::string_view value) {
  if (value.find_first_of(std::string_view("\0", 1)) != std::string_view::npos) refuse(check, value, "it holds a NUL");
  struct stat st {};
  const std::string path(value);
  const bool exists = ::stat(path.c_str(), &st) == 0;
  switch (check.kind) {
    case Kind::Count: {
      long number = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (error != std::errc() || end != value.data() + value.size() || number < check.low || number > check.high)
        refuse(check, value, "");
      return;
    }
    case Kind::Flag:
      if (value != "0" && value != "1") refuse(check, value, "");
      return;
    case Kind::ReadFolder:
      if (!exists) refuse(check, value, "no such folder");
      if (!S_ISDIR(st.st_mode)) refuse(check, value, fmt::format("it is {}", kind_of(st.st_mode)));
      return;
    case Kind::MadeFolder:
      if (value != "off" && exists && !S_ISDIR(st.st_mode)) refuse(check, value, fmt::format("it is {}", kind_of(st.st_mode)));
      return;
    case Kind::File:
      if (exists && !S_ISREG(st.st_mode)) refuse(check, value, fmt::format("it is {}", kind_of(st.st_mode)));
      return;
    case Kind::Library:
      if (value.find('/') != std::string_view::npos && (!exists || !S_ISREG(st.st_mode)))
        refuse(check, value, exists ? fmt::format("it is {}", kind_of(st.st_mode)) : "no such file");
      return;
    case Kind::Isa:
      try {
        cpu::parse_isa(value);
      } catch (const InvalidArgument&) {
        refuse(check, value, "");
      }
      return;
    case Kind::Caches:
      try {
        cpu::parse_cache_sizes(value);
      } catch (const InvalidArgument& e) {
        refuse(check, value, e.what());
      }
      return;
  }
}

}  // namespace

const std::vector<EnvironmentVariable>& environment_variables() {
  static const std::vector<EnvironmentVariable> list = [] {
    std::vector<EnvironmentVariable> out;
    for (const Check& c : checks()) out.push_back(c.variable);
    return out;
  }();
  return list;
}

void check_environment() {
  for (const Check& check : checks()) {
    const char* value = std::getenv(check.variable.name);
    if (value && *value) check_one(check, value);
  }
}

}  // namespace convtune
