// The kernel families built into convtune (generated from the folders), ordered for plans without tuning data.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "src/families/channels_last.h"
#include "src/families/families.h"
#include "src/families/fused_epilogue.h"
#include "src/families/untuned_order.h"
#include "src/families/widened.h"

namespace convtune {

const std::vector<std::unique_ptr<KernelFamily>>& kernel_families() {
  static const std::vector<std::unique_ptr<KernelFamily>> families = [] {
    std::vector<std::unique_ptr<KernelFamily>> list = families::make_all();
    families::add_widened_families(list);  // 16-bit tensors through the FP32 families
    families::add_channels_last_support(list);  // NHWC through the families that read NCHW
    families::add_fused_epilogue_support(list);  // any epilogue but pooling through every convolution family
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return untuned_position(a->name()) < untuned_position(b->name());
    });
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
