// The kernel families built into convtune, in the order an untuned plan tries them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "convtune/error.h"
#include "convtune/kernel_family.h"
#include "src/families/families.h"

namespace convtune {

const std::vector<std::unique_ptr<KernelFamily>>& kernel_families() {
  static const std::vector<std::unique_ptr<KernelFamily>> families = [] {
    std::vector<std::unique_ptr<KernelFamily>> list;
    // CMake defines CONVTUNE_FAMILY_<name> for each family folder present under src/families.
#ifdef CONVTUNE_FAMILY_implicit_gemm
    list.push_back(families::make_implicit_gemm());
#endif
#ifdef CONVTUNE_FAMILY_direct_tiled
    list.push_back(families::make_direct_tiled());
#endif
#ifdef CONVTUNE_FAMILY_im2col_gemm
    list.push_back(families::make_im2col_gemm());
#endif
    return list;
  }();
  return families;
}

const KernelFamily& kernel_family(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& f : kernel_families()) {
    if (f->name() == name) return *f;
    names.push_back(f->name());
  }
  throw InvalidArgument(fmt::format("unknown kernel family '{}': expected one of {}", name, fmt::join(names, ", ")));
}

}  // namespace convtune
