// Conformance of every convolution family x direction x device it runs on (kernel families on the devices that
// run kernels: PoCL in CI, CUDA and NVIDIA OpenCL on the GPU machine; the CPU backend's families on the CPU) on
// the standard case list, each case with sampled valid configurations (fixed seed, so a failure reproduces) plus
// the family's default, against the float64 reference. A new family is covered by being in the family list.
// CONVTUNE_CONFORMANCE_SAMPLES sets the sampled configurations per case beside the default (default 1, to keep CI
// short: PoCL compiles a program per check, 1-3 s; every family x direction still gets 20 distinct configurations);
// CONVTUNE_CONFORMANCE_DEVICES limits the devices (comma-separated ids, e.g. "cuda:0,opencl:1"),
// CONVTUNE_CONFORMANCE_PRECISIONS the element types and math modes ("bf16,fp16"), CONVTUNE_CONFORMANCE_CASES the
// cases (those whose name contains it, e.g. "nhwc").
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "convtune/plan.h"
#include "src/conformance/conformance.h"
#include "tests/support/plan_check.h"
#include "src/families/widened.h"
#include "src/tuner/search_space.h"

using namespace convtune;

namespace {

// Distinct configurations each family x direction x device is checked on (at least, where its space has them).
constexpr int kDistinctWanted = 20;

// CONVTUNE_CONFORMANCE_PRECISIONS (comma-separated: fp32, tf32, 3xtf32, fp32-fast, bf16, fp16) limits the element
// types and math modes checked, e.g. to the new ones in a short GPU run; unset: all of them.
bool precision_wanted(Precision precision) {
  const char* only = std::getenv("CONVTUNE_CONFORMANCE_PRECISIONS");
  if (!only || !*only) return true;
  return ("," + std::string(only) + ",").find("," + std::string(to_string(precision)) + ",") != std::string::npos;
}

// CONVTUNE_CONFORMANCE_CASES: only the cases whose name contains it (unset: all).
bool case_wanted(const std::string& name) {
  const char* only = std::getenv("CONVTUNE_CONFORMANCE_CASES");
  return !only || !*only || name.find(only) != std::string::npos;
}

int samples_per_case() {
  const char* env = std::getenv("CONVTUNE_CONFORMANCE_SAMPLES");
  return env && *env ? std::max(1, std::atoi(env)) : 1;
}

// The devices a family runs on: the CPU backend's for its own families, else every device that runs kernels.
std::vector<Device*> devices_for(const KernelFamily& family) {
  std::vector<Device*> out;
  const char* only = std::getenv("CONVTUNE_CONFORMANCE_DEVICES");
  for (Device* d : Registry::instance().all_devices()) {
    if (family.runs_on_cpu_backend() ? d->info().backend != BackendKind::Cpu : !d->info().can_run_kernels) continue;
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
    if (f->problem_kind() != Problem::Kind::Convolution) continue;  // gemm, cpu_gemm: their own tests
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      out.push_back({f->name(), d});
  }
  return out;
}

class FamilyConformance : public testing::TestWithParam<FamilyDirection> {};

// A channels-last case that `family` computes on NCHW copies (it does not read NHWC itself).
bool through_copies(const KernelFamily& family, const conformance::Case& c) {
  return c.problem.layout == Layout::NHWC && !family.computes_nhwc();
}

}  // namespace

TEST_P(FamilyConformance, SampledConfigurationsMatchTheReference) {
  const KernelFamily& family = kernel_family(GetParam().family);
  const auto devices = devices_for(family);
  if (devices.empty()) {
    GTEST_SKIP() << "no device here runs " << family.name()
                 << (family.runs_on_cpu_backend() ? " (CONVTUNE_CONFORMANCE_DEVICES leaves out cpu)"
                                                  : " (no OpenCL platform, no CUDA)");
  }
  const Direction direction = GetParam().direction;
  // A widened family (src/families/widened.h) runs the kernels of the FP32 family it wraps, whose own conformance
  // samples their configurations: its checks are of the conversions and the staging copies around them, so it runs
  // its default configuration alone, in bf16 and in fp16.
  const bool widened = families::is_widened(family);
  // A family that computes only a few of the cases (depthwise) samples more configurations in each, so it is
  // checked on at least as many distinct configurations as the others (its defaults, one per case, mostly coincide
  // on small cases, hence no credit for them); the rest keep samples_per_case().
  const int samples = [&] {
    int supported = 0;
    for (const auto& c : conformance::standard_cases()) {
      // A channels-last case of a family that reads NCHW runs the same kernels between transposes: its default
      // checks the transposes, and the sampling stays with the NCHW cases.
      if (through_copies(family, c)) continue;
      // Each element type it computes the case in counts (the widened families check bf16 and fp16 alike).
      for (ElementType type : {ElementType::F32, ElementType::BF16, ElementType::F16}) {
        ConvProblem pb = c.problem.with_direction(direction);
        pb.type = type;
        for (Device* device : devices) {
          if (family.unsupported_reason(pb, {}, device->info()).empty()) {
            ++supported;
            break;
          }
        }
      }
    }
    return std::max(samples_per_case(), supported == 0 ? 0 : (kDistinctWanted + supported - 1) / supported);
  }();
  int all_checks = 0;
  std::string why_none;
  for (Device* device : devices) {
    std::set<std::string> distinct, space_configs;
    int checks = 0, unsupported = 0;
    size_t walk = 0;  // position in a small space walked over the cases
    uint64_t seed = 2026;
    for (const auto& c : conformance::standard_cases()) {
      ++seed;
      if (!case_wanted(c.name)) continue;
      // Every math mode and element type the family computes here, each held to its tolerance: tf32, 3xtf32, bf16
      // and fp16 for the tensor-core families. A family that computes FP32 math runs the same kernels in the other modes (FP32
      // serves them all), so it is checked in FP32, the strictest, and in fp32-fast only on the variants whose
      // declared bound (error_factor) fp32 does not admit: held to that bound, and refused in fp32. Those take one
      // of the case's samples, so the checks per case stay as many as before fp32-fast; one enumeration of
      // fp32-fast's space yields both sets.
      bool any_mode = false, computes_fp32 = false;
      ConvProblem fp32 = c.problem.with_direction(direction), fast = fp32;
      fp32.math = MathMode::FP32, fast.math = MathMode::FP32Fast;
      const bool splits = family.unsupported_reason(fp32, {}, device->info()).empty() &&
                          family.unsupported_reason(fast, {}, device->info()).empty();
      std::vector<Config> beyond;  // the variants only fp32-fast admits
      uint64_t precision_index = 0;  // each mode samples its own configurations: bf16's and fp16's differ
      for (Precision precision : {Precision{ElementType::F32, MathMode::FP32}, Precision{ElementType::F32, MathMode::TF32},
                                  Precision{ElementType::F32, MathMode::TF32x3},
                                  Precision{ElementType::F32, MathMode::FP32Fast},
                                  Precision{ElementType::BF16, MathMode::FP32}, Precision{ElementType::F16, MathMode::FP32}}) {
        ++precision_index;
        if (!precision_wanted(precision)) continue;
        const MathMode math = precision.math;
        ConvProblem pb = c.problem.with_direction(direction);
        pb.type = precision.type, pb.math = math;
        if (const std::string why = family.unsupported_reason(pb, {}, device->info()); !why.empty()) {
          why_none = fmt::format("{} ({}, {}): {}", device->info().id, c.name, to_string(precision), why);
          continue;
        }
        if (math == MathMode::FP32 && precision.type == ElementType::F32) computes_fp32 = true;
        // FP32 tensors' other math modes run the FP32 kernels again; a family that also computes 16-bit tensors
        // (depthwise_nhwc) has them checked in their own types below.
        else if (computes_fp32 && precision.type == ElementType::F32) {
          if (math != MathMode::FP32Fast || beyond.empty()) continue;
          // fp32-fast: one of the variants fp32 refuses, which it must refuse by name.
          const Config& config = beyond[seed % beyond.size()];
          EXPECT_NE(config_problem(family, config, fp32, device->info()), "")
              << family.name() << " [" << to_string(config) << "] is declared beyond fp32's bound but fp32 takes it";
          const auto result = testing_support::check_plan(*device, pb, family.name(), config, seed);
          ++checks;
          distinct.insert(to_string(config));
          EXPECT_TRUE(result.passed) << device->info().id << " " << family.name() << " " << to_string(direction)
                                     << " " << c.name << " fp32-fast [" << to_string(config) << "]: " << result.message;
          continue;
        }
        any_mode = true;
        const auto split_off = [&](const Config& config) {
          if (family.error_factor(fp32, config) <= max_error_factor(fp32.type, fp32.math)) return true;
          beyond.push_back(config);
          return false;
        };
        // In FP32 with fp32-fast beside it: fp32-fast's space, the variants beyond fp32's bound set aside.
        std::vector<Config> configs;
        if (!widened) {
          const bool fp32_with_fast = precision.type == ElementType::F32 && math == MathMode::FP32 && splits;
          const SearchSpace space = fp32_with_fast ? SearchSpace(family, fast, device->info(), split_off)
                                                   : SearchSpace(family, pb, device->info());
          ASSERT_GT(space.size(), 0u) << family.name() << " has no valid configuration for " << c.name << " ("
                                      << to_string(precision) << ") on " << device->info().id
                                      << " although it claims to support it";
          for (const Config& config : space.configs()) space_configs.insert(to_string(config));
          for (const Config& config : beyond) space_configs.insert(to_string(config));
          const size_t shared = !beyond.empty() && samples > 1 ? 1 : 0;
          if (!through_copies(family, c))
            configs = space.sample(static_cast<size_t>(samples) - shared, seed + 7919 * (precision_index - 1));
          // A small space (the wgmma families': a few dozen tile shapes) is walked in order over the cases instead,
          // so the cases together cover it rather than drawing the same few configurations again.
          if (space.configs().size() <= 3 * static_cast<size_t>(kDistinctWanted) && !configs.empty())
            configs.front() = space.configs()[walk++ % space.configs().size()];
        }
        configs.push_back(family.default_config(pb, device->info()));
        for (const Config& config : configs) {
          const auto result = testing_support::check_plan(*device, pb, family.name(), config, seed);
          ++checks;
          distinct.insert(to_string(config));
          EXPECT_TRUE(result.passed) << device->info().id << " " << family.name() << " " << to_string(direction)
                                     << " " << c.name << " " << to_string(precision) << " [" << to_string(config)
                                     << "]: " << result.message;
        }
      }
      if (!any_mode) ++unsupported;
    }
    std::cout << fmt::format("conformance: {} {} on {}: {} checks, {} distinct configurations, {} cases unsupported\n",
                             family.name(), to_string(direction), device->info().id, checks, distinct.size(),
                             unsupported);
    // 20 distinct configurations, or every one there is for a family with a small space (cpu_direct's THREADS).
    if (checks > 0 && !widened && case_wanted(""))
      EXPECT_GE(distinct.size(), std::min<size_t>(kDistinctWanted, space_configs.size()))
          << "too few distinct configurations were sampled";
    all_checks += checks;
  }
  // A family no device here computes (the tensor-core families without an NVIDIA GPU) has not been checked.
  if (all_checks == 0) GTEST_SKIP() << family.name() << " computes no case on any device here: " << why_none;
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FamilyConformance);  // a build may hold no family
INSTANTIATE_TEST_SUITE_P(AllFamilies, FamilyConformance, testing::ValuesIn(all_family_directions()),
                         [](const testing::TestParamInfo<FamilyDirection>& info) {
                           std::string name = info.param.family + "_" + std::string(to_string(info.param.direction));
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// Fused epilogues (bias, residual, ReLU, ReLU6) on every convolution family's default configuration, in every element
// type it computes (FP32 math for FP32 tensors), on the epilogue cases: the family's own epilogue where it has one, the
// elementwise pass (src/families/fused_epilogue.h) for the rest. A family that computes a case without an epilogue
// must compute it with one.
class FamilyEpilogueConformance : public testing::TestWithParam<std::string> {};

TEST_P(FamilyEpilogueConformance, FusedEpiloguesMatchTheReference) {
  const KernelFamily& family = kernel_family(GetParam());
  int checks = 0;
  uint64_t seed = 4242;
  for (Device* device : devices_for(family)) {
    for (const auto& c : conformance::epilogue_cases()) {
      ++seed;
      if (!case_wanted(c.name)) continue;
      for (ElementType type : {ElementType::F32, ElementType::BF16, ElementType::F16}) {
        if (!precision_wanted({type, MathMode::FP32})) continue;
        ConvProblem plain = c.problem;
        plain.type = type;
        if (!family.unsupported_reason(plain, {}, device->info()).empty()) continue;
        harness::PlanImplementation impl(PlanRequest{Problem(plain), {}, family.name(), std::nullopt, false});
        const harness::Check r = conformance::check_epilogue(impl, *device, c, type, seed);
        ++checks;
        EXPECT_TRUE(r.passed) << device->info().id << " " << family.name() << " " << c.name << " "
                              << to_string(type) << " +" << to_string(c.epilogue) << ": " << r.message;
      }
    }
  }
  if (checks == 0) GTEST_SKIP() << family.name() << " computes no epilogue case on any device here";
  std::cout << fmt::format("epilogue conformance: {}: {} checks\n", family.name(), checks);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FamilyEpilogueConformance);
INSTANTIATE_TEST_SUITE_P(AllFamilies, FamilyEpilogueConformance, testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (const auto& f : kernel_families())
                             if (f->problem_kind() == Problem::Kind::Convolution) names.push_back(f->name());
                           return names;
                         }()));
