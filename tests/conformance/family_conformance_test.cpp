// Conformance of every kernel family x direction x device that runs kernels (PoCL in CI; CUDA and NVIDIA
// OpenCL on the GPU machine) on the standard case list, each case with sampled valid configurations (fixed
// seed, so a failure reproduces) plus the family's default, against the CPU reference.
// CONVTUNE_CONFORMANCE_SAMPLES sets the sampled configurations per case (default 2, to keep CI short);
// CONVTUNE_CONFORMANCE_DEVICES limits the devices (comma-separated ids, e.g. "cuda:0,opencl:1").
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "convtune/plan.h"
#include "src/conformance/conformance.h"
#include "tests/support/plan_check.h"
#include "src/tuner/search_space.h"

using namespace convtune;

namespace {

int samples_per_case() {
  const char* env = std::getenv("CONVTUNE_CONFORMANCE_SAMPLES");
  return env && *env ? std::max(1, std::atoi(env)) : 2;
}

std::vector<Device*> kernel_devices() {
  std::vector<Device*> out;
  const char* only = std::getenv("CONVTUNE_CONFORMANCE_DEVICES");
  for (Device* d : Registry::instance().all_devices()) {
    if (!d->info().can_run_kernels) continue;  // the CPU backend's families: cpu_conformance_test
    if (only && *only && std::string(",") .append(only).append(",").find("," + d->info().id + ",") == std::string::npos) continue;
    out.push_back(d);
  }
  return out;
}

struct FamilyDirection {
  std::string family;
  Direction direction;
};

// So ctest lists "implicit_gemm bwd-data", not the struct's bytes.
void PrintTo(const FamilyDirection& fd, std::ostream* out) { *out << fd.family << " " << to_string(fd.direction); }

std::vector<FamilyDirection> all_family_directions() {
  std::vector<FamilyDirection> out;
  for (const auto& f : kernel_families()) {
    if (f->problem_kind() != Problem::Kind::Convolution || f->runs_on_cpu_backend()) continue;  // gemm: its own test
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      out.push_back({f->name(), d});
  }
  return out;
}

class FamilyConformance : public testing::TestWithParam<FamilyDirection> {};

}  // namespace

TEST_P(FamilyConformance, SampledConfigurationsMatchTheReference) {
  const auto devices = kernel_devices();
  if (devices.empty()) GTEST_SKIP() << "no device runs kernels here (no OpenCL platform, no CUDA)";
  const KernelFamily& family = kernel_family(GetParam().family);
  const Direction direction = GetParam().direction;
  const int samples = samples_per_case();
  for (Device* device : devices) {
    std::set<std::string> distinct;
    int checks = 0, unsupported = 0;
    uint64_t seed = 2026;
    for (const auto& c : conformance::standard_cases()) {
      const ConvProblem pb = c.problem.with_direction(direction);
      ++seed;
      if (!family.unsupported_reason(pb, {}, device->info()).empty()) {
        ++unsupported;
        continue;
      }
      const SearchSpace space(family, pb, device->info());
      ASSERT_GT(space.size(), 0u) << family.name() << " has no valid configuration for " << c.name << " on "
                                  << device->info().id << " although it claims to support it";
      std::vector<Config> configs = space.sample(static_cast<size_t>(samples), seed);
      configs.push_back(family.default_config(pb, device->info()));
      for (const Config& config : configs) {
        const auto result = testing_support::check_plan(*device, pb, family.name(), config, seed);
        ++checks;
        distinct.insert(to_string(config));
        EXPECT_TRUE(result.passed) << device->info().id << " " << family.name() << " " << to_string(direction) << " "
                                   << c.name << " [" << to_string(config) << "]: " << result.message;
      }
    }
    std::cout << fmt::format("conformance: {} {} on {}: {} checks, {} distinct configurations, {} cases unsupported\n",
                             family.name(), to_string(direction), device->info().id, checks, distinct.size(),
                             unsupported);
    if (checks > 0) EXPECT_GE(distinct.size(), 20u) << "too few distinct configurations were sampled";
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FamilyConformance);  // a build may hold no family
INSTANTIATE_TEST_SUITE_P(AllFamilies, FamilyConformance, testing::ValuesIn(all_family_directions()),
                         [](const testing::TestParamInfo<FamilyDirection>& info) {
                           std::string name = info.param.family + "_" + std::string(to_string(info.param.direction));
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });
