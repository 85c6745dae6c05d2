// dlopen with an environment override, an error that names every file tried, and the resolved file name.
#include "src/reference_libs/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>

namespace convtune::reference {

SharedLibrary::SharedLibrary(const std::string& env_var, const std::vector<std::string>& candidates) {
  std::vector<std::string> names = candidates;
  if (const char* forced = std::getenv(env_var.c_str()); forced && *forced) names = {forced};
  std::string tried;
  for (const std::string& name : names) {
    // RTLD_LOCAL keeps the reference's symbols out of convtune's namespace (oneDNN and CLBlast bundle their
    // own copies of common helpers).
    handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) break;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name + ": dlopen failed");
  }
  if (!handle_) {
    error_ = tried;
    if (std::getenv(env_var.c_str()) && *std::getenv(env_var.c_str())) error_ += " (from $" + env_var + ")";
    return;
  }
  link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
    std::error_code ec;
    const auto real = std::filesystem::canonical(map->l_name, ec);
    resolved_path_ = ec ? std::string(map->l_name) : real.string();
  }
}

void* SharedLibrary::symbol(const char* name) {
  void* address = handle_ ? dlsym(handle_, name) : nullptr;
  if (!address) missing_ += (missing_.empty() ? "" : ", ") + std::string(name);
  return address;
}

}  // namespace convtune::reference
