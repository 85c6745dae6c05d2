// The untuned order (src/families/untuned_order.cpp): every registered family listed once, the registry in its order.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "convtune/extension/kernel_family.h"
#include "src/families/untuned_order.h"

namespace convtune {
namespace {

TEST(UntunedOrder, ListsEveryRegisteredFamilyExactlyOnce) {
  std::map<std::string, int> listed;
  for (const auto& line : untuned_order()) {
    EXPECT_FALSE(line.empty()) << "an empty line in the untuned order";
    for (std::string_view name : line) ++listed[std::string(name)];
  }
  for (const auto& f : kernel_families()) {
    EXPECT_EQ(listed[f->name()], 1) << f->name() << " must appear once in src/families/untuned_order.cpp";
    listed.erase(f->name());
  }
  for (const auto& [name, count] : listed) ADD_FAILURE() << name << " is listed but no family of that name is registered";
}

TEST(UntunedOrder, RegistryFollowsTheListTopToBottom) {
  std::vector<std::string> expected;
  for (const auto& line : untuned_order())
    for (std::string_view name : line) expected.emplace_back(name);
  std::vector<std::string> registered;
  for (const auto& f : kernel_families()) registered.push_back(f->name());
  EXPECT_EQ(registered, expected);
}

TEST(UntunedOrder, NamesOfALineShareARankAndUnlistedNamesComeLast) {
  EXPECT_EQ(untuned_rank("cpu_blocked"), untuned_rank("winograd"));
  EXPECT_LT(untuned_position("cpu_blocked"), untuned_position("winograd"));
  EXPECT_LT(untuned_rank("fft"), untuned_rank("winograd"));
  EXPECT_LT(untuned_rank("cpu_reference"), untuned_rank("widened_implicit_gemm"));
  EXPECT_EQ(untuned_rank("no_such_family"), static_cast<int>(untuned_order().size()));
  EXPECT_GT(untuned_position("no_such_family"), untuned_position("widened_cpu_gemm"));
}

}  // namespace
}  // namespace convtune
