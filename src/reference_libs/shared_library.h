// A library opened at run time (dlopen), found through an environment variable or a list of candidate names,
// so convtune starts on machines where a reference library is absent and says why it could not load it.
#pragma once

#include <string>
#include <vector>

namespace convtune::reference {

class SharedLibrary {
 public:
  // Tries $`env_var` alone when it is set (a user who names a file means that file), else each candidate in
  // order. Never throws: a library that cannot be opened leaves handle() null and error() saying why.
  SharedLibrary(const std::string& env_var, const std::vector<std::string>& candidates);
  // Never closed: libraries such as cuDNN and oneDNN keep threads and exit handlers that point into their code.
  ~SharedLibrary() = default;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  // The file as found on disk after following links ("/usr/lib/.../libclblast.so.1.5.3"), for reports.
  const std::string& resolved_path() const { return resolved_path_; }

  // The symbol's address, or null; records the name in missing() so one message can list every absent symbol.
  void* symbol(const char* name);
  const std::string& missing() const { return missing_; }

 private:
  void* handle_ = nullptr;
  std::string error_;
  std::string resolved_path_;
  std::string missing_;
};

// Resolves one entry of a function table by its own name; absent ones collect in the library's missing().
#define CONVTUNE_RESOLVE_SYMBOL(library, table, function) \
  table.function = reinterpret_cast<decltype(table.function)>((library).symbol(#function))

}  // namespace convtune::reference
