// implicit_gemm on an OpenCL device (PoCL in CI): backward-data with stride 2 and 4 gathered in place, split-K
// backward-filter on a small filter (and split-K in the other directions), depthwise in every direction, the
// bias/ReLU epilogue, configuration validation in Plan::create, a nearest tuned entry carried to a new layer, the
// untuned family choice for few channels, and the GPU defaults for the benchmark layers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <iostream>
#include <map>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "src/families/implicit_gemm/implicit_gemm_spec.h"
#include "tests/support/plan_check.h"
#include "src/tuner/search_space.h"
#include "src/tuning_db/tuning_database.h"
#include "tests/support/opencl_device.h"

using namespace convtune;
using convtune::testing_support::check_plan;

namespace {

using test::opencl_device;

#define REQUIRE_DEVICE(var)                                                   \
  Device* var = opencl_device();                                              \
  if (!var) GTEST_SKIP() << "no OpenCL device runs kernels here (PoCL missing)"

const KernelFamily& family() { return kernel_family("implicit_gemm"); }

// A small valid configuration with the given overrides.
Config config(std::initializer_list<std::pair<const std::string, int64_t>> overrides = {}) {
  Config c = {{"TILE_M", 16},     {"TILE_N", 32},      {"TILE_K", 8},         {"THREADS_M", 4},
              {"THREADS_N", 8},   {"VECTOR_WIDTH", 4}, {"LOCAL_PADDING", 0},  {"UNROLL_K", 4},
              {"SPLIT_K", 1},     {"ASYNC_COPY", 0},   {"MAX_REGISTERS", 0}};
  for (const auto& [k, v] : overrides) c[k] = v;
  return c;
}

// Checks `problem` with the default and each of `configs` against the reference (full output compared).
void expect_matches_reference(Device& device, const ConvProblem& problem, std::vector<Config> configs,
                              uint64_t seed) {
  configs.push_back(family().default_config(problem, device.info()));
  for (const Config& c : configs) {
    ASSERT_EQ(config_problem(family(), c, problem, device.info()), "") << to_string(c);
    const auto result = check_plan(device, problem, "implicit_gemm", c, seed);
    EXPECT_TRUE(result.passed) << problem.to_string() << " [" << to_string(c) << "]: " << result.message;
  }
}

}  // namespace

TEST(ImplicitGemm, BackwardDataStride2GathersWithoutZeroInsertion) {
  REQUIRE_DEVICE(device);
  // Odd sizes, padding and a filter larger than the stride: some input pixels get no contribution from some taps.
  for (const char* text : {"N=2,C=5,H=11,W=9,K=6,R=3,S=3,stride=2,pad=1,dir=bwd-data",
                           "N=1,C=3,H=12,W=13,K=4,R=5,S=4,stride=2,pad=2x1,dir=bwd-data",
                           "N=2,C=4,H=10,W=10,K=3,R=3,stride=2,dilation=2,pad=2,dir=bwd-data"}) {
    expect_matches_reference(*device, parse_problem(text),
                             {config(), config({{"TILE_M", 32}, {"TILE_N", 16}, {"THREADS_M", 8}, {"THREADS_N", 4}})},
                             11);
  }
}

TEST(ImplicitGemm, BackwardDataStride4AndUnevenStrides) {
  REQUIRE_DEVICE(device);
  for (const char* text : {"N=2,C=3,H=19,W=17,K=5,R=3,stride=4,dir=bwd-data",
                           "N=1,C=2,H=35,W=35,K=4,R=11,stride=4,pad=2,dir=bwd-data",  // alex1's shape, small
                           "N=1,C=4,H=16,W=15,K=3,R=5,S=2,stride=4x2,pad=1,dir=bwd-data"}) {
    expect_matches_reference(*device, parse_problem(text), {config({{"VECTOR_WIDTH", 2}, {"LOCAL_PADDING", 2}})}, 12);
  }
}

TEST(ImplicitGemm, BackwardFilterSplitKOnASmallFilter) {
  REQUIRE_DEVICE(device);
  // A 3x3 filter with 4->6 channels (M=6, N=36) over a long reduction N*P*Q = 3*15*14 = 630: the GEMM is a
  // few tiles, so split-K is what spreads it. 630 is not a multiple of TILE_K (the last tile is partial), and
  // 79 tiles in 8 or 16 slices leave the last slice short.
  const ConvProblem pb = parse_problem("N=3,C=4,H=15,W=14,K=6,R=3,S=3,pad=1,dir=bwd-filter");
  const implicit_gemm::GemmShape gemm = implicit_gemm::gemm_shape(pb);
  EXPECT_EQ(gemm.reduction, 630);
  std::vector<Config> configs;
  for (int64_t split : {2, 8, 16}) configs.push_back(config({{"SPLIT_K", split}}));
  configs.push_back(config({{"SPLIT_K", 16}, {"TILE_K", 4}, {"UNROLL_K", 2}}));
  expect_matches_reference(*device, pb, configs, 13);

  // The split-K plan has a workspace of SPLIT_K partial filters and two launches' worth of arguments.
  const Plan plan = Plan::create(*device, {pb, {}, "implicit_gemm", config({{"SPLIT_K", 8}})});
  EXPECT_EQ(plan.workspace_bytes(), 8 * pb.w_elements() * sizeof(float));
  const Plan direct = Plan::create(*device, {pb, {}, "implicit_gemm", config()});
  EXPECT_EQ(direct.workspace_bytes(), 0u);

  // Slices that would get no reduction tile are rejected (40 tiles of 16 cannot make 64 slices, nor 79 of 8
  // make 32: 31 slices of 3 tiles already cover them).
  const std::string why = config_problem(family(), config({{"SPLIT_K", 64}, {"TILE_K", 16}, {"UNROLL_K", 4}}),
                                         pb, device->info());
  EXPECT_NE(why.find("each split-K slice gets at least one reduction tile"), std::string::npos) << why;
  EXPECT_NE(config_problem(family(), config({{"SPLIT_K", 32}}), pb, device->info()), "");
}

TEST(ImplicitGemm, DepthwiseAndGroupedInEveryDirection) {
  REQUIRE_DEVICE(device);
  for (const char* text : {"N=2,C=8,H=9,W=10,K=8,R=3,pad=1,groups=8",        // depthwise
                           "N=1,C=6,H=11,W=11,K=12,R=5,stride=2,pad=2,groups=6",  // depthwise, multiplier 2
                           "N=2,C=6,H=7,W=7,K=9,R=3,groups=3"}) {              // grouped
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = parse_problem(text).with_direction(d);
      std::vector<Config> configs = {config()};
      if (d == Direction::BackwardFilter) configs.push_back(config({{"SPLIT_K", 2}}));
      expect_matches_reference(*device, pb, configs, 14);
    }
  }
}

TEST(ImplicitGemm, ForwardBiasAndReluEpilogue) {
  REQUIRE_DEVICE(device);
  const ConvProblem pb = parse_problem("N=2,C=3,H=9,W=8,K=5,R=3,pad=1");
  const Epilogue epilogue{true, true, 1};
  const auto x = testing_support::reference_data(pb, 15);
  std::vector<float> bias(static_cast<size_t>(pb.k));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * static_cast<float>(i) - 0.5f;
  Queue& queue = device->queue();
  auto bx = device->allocate(x.operands[0].size() * 4), bw = device->allocate(x.operands[1].size() * 4),
       by = device->allocate(static_cast<size_t>(pb.y_elements()) * 4), bb = device->allocate(bias.size() * 4);
  queue.write(*bx, x.operands[0].data(), x.operands[0].size() * 4);
  queue.write(*bw, x.operands[1].data(), x.operands[1].size() * 4);
  queue.write(*bb, bias.data(), bias.size() * 4);
  // Without split-K the main kernel applies the epilogue; with it, the reduction kernel does.
  for (int64_t split : {1, 2}) {
    const Plan plan = Plan::create(*device, {pb, epilogue, "implicit_gemm", config({{"SPLIT_K", split}})});
    plan.run(queue, {bx.get(), bw.get(), by.get(), bb.get()});
    std::vector<float> y(static_cast<size_t>(pb.y_elements()));
    queue.read(*by, y.data(), y.size() * 4);
    const int64_t pq = pb.p() * pb.q();
    for (size_t i = 0; i < y.size(); ++i) {
      const int64_t k = static_cast<int64_t>(i) / pq % pb.k;
      const float want = std::max(0.0f, x.expected[i] + bias[static_cast<size_t>(k)]);
      ASSERT_NEAR(y[i], want, 1e-4f * (1 + std::abs(want))) << "SPLIT_K=" << split << " element " << i;
    }
  }
  // Pooling is direct_tiled's; implicit_gemm says so.
  EXPECT_NE(family().unsupported_reason(pb, {false, true, 2}, device->info()).find("max-pool"), std::string::npos);
}

TEST(ImplicitGemm, SplitKInForwardAndBackwardData) {
  REQUIRE_DEVICE(device);
  // Forward and backward-data split their reductions too (the last wave of work-groups evens out); 3 slices of
  // an uneven number of tiles leave the last one short.
  for (const char* text : {"N=2,C=7,H=9,W=8,K=5,R=3,pad=1", "N=1,C=6,H=11,W=10,K=4,R=3,stride=2,pad=1,dir=bwd-data",
                           "N=2,C=8,H=6,W=6,K=8,R=3,groups=2,dir=bwd-data"}) {
    const ConvProblem pb = parse_problem(text);
    expect_matches_reference(*device, pb, {config({{"SPLIT_K", 2}}), config({{"SPLIT_K", 3}, {"TILE_K", 4}})}, 16);
    const Plan plan = Plan::create(*device, {pb, {}, "implicit_gemm", config({{"SPLIT_K", 3}})});
    EXPECT_EQ(plan.workspace_bytes(), 3 * pb.written_elements() * sizeof(float));
  }
}

TEST(ImplicitGemm, InvalidConfigurationIsRejectedNamingTheConstraint) {
  REQUIRE_DEVICE(device);
  const ConvProblem pb = parse_problem("N=1,C=4,H=8,W=8,K=4,R=3,pad=1");
  struct Bad {
    Config config;
    const char* constraint;
  };
  const Bad cases[] = {
      {config({{"TILE_M", 32}, {"THREADS_M", 32}, {"THREADS_N", 4}, {"TILE_N", 16}}),
       "register tile rows and columns are whole vectors"},
      {config({{"UNROLL_K", 16}}), "UNROLL_K divides TILE_K"},
      {config({{"LOCAL_PADDING", 1}}), "local padding keeps vector reads aligned"},
      {config({{"TILE_M", 128}, {"TILE_N", 256}, {"TILE_K", 32}, {"THREADS_M", 16}, {"THREADS_N", 32},
               {"UNROLL_K", 8}}),
       "local memory within the device limit and 48 KiB"},
      {config({{"TILE_M", 16}, {"TILE_N", 16}, {"THREADS_M", 16}, {"THREADS_N", 16}, {"VECTOR_WIDTH", 1},
               {"TILE_K", 4}}),
       "A tile loads in whole passes of the work-group"},
      {config({{"ASYNC_COPY", 1}}), "asynchronous copies need an NVIDIA GPU"},
  };
  for (const Bad& bad : cases) {
    try {
      Plan::create(*device, {pb, {}, "implicit_gemm", bad.config});
      ADD_FAILURE() << "accepted " << to_string(bad.config);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(bad.constraint), std::string::npos)
          << "message: " << e.what() << "\nexpected the constraint: " << bad.constraint;
      EXPECT_NE(std::string(e.what()).find("implicit_gemm"), std::string::npos) << e.what();
    }
  }
  // A value outside a parameter's candidates names the parameter.
  try {
    Plan::create(*device, {pb, {}, "implicit_gemm", config({{"TILE_K", 12}})});
    ADD_FAILURE() << "accepted TILE_K=12";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TILE_K=12 is not a candidate value"), std::string::npos) << e.what();
  }
}

// A layer never tuned gets its neighbour's tuned parameters through the database, its backward-filter split
// recomputed for its own reduction, from the family whose neighbour entry reached the most GFLOP/s; and the plan
// made of them computes the right result.
TEST(ImplicitGemm, NearestTunedEntryIsCarriedToTheLayerAndComputesIt) {
  REQUIRE_DEVICE(device);
  const DeviceInfo& info = device->info();
  // A reduction of 4 x 16 x 16 = 1024 into 82,944 outputs, whose tiles fill the device without a split. 96 channels
  // in and out: with fewer outputs, implicit_gemm's rules call so short a reduction a poor fit, and a neighbour's
  // entry is not carried to it.
  const ConvProblem asked =
      parse_problem("N=4,C=96,H=16,W=16,K=96,R=3,pad=1").with_direction(Direction::BackwardFilter);
  const ConvProblem tuned = parse_problem("N=8,C=96,H=16,W=16,K=96,R=3,pad=1").with_direction(Direction::BackwardFilter);
  ASSERT_EQ(family().untuned_poor_fit(Problem(asked), info), "");
  const Config split8 = config({{"SPLIT_K", 8}});
  ASSERT_EQ(config_problem(family(), split8, tuned, info), "");

  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / fmt::format("convtune_carried_{}.json", static_cast<long>(getpid()));
  TuningDatabase db(file);
  db.insert(make_tuning_entry(info, "implicit_gemm", family().kernel_version(), tuned, split8, 0.01));
  // Another family, same shape, slower: implicit_gemm has the better GFLOP/s there and is chosen.
  const KernelFamily& direct = kernel_family("direct_tiled");
  db.insert(make_tuning_entry(info, "direct_tiled", direct.kernel_version(), tuned,
                              direct.default_config(tuned, info), 0.02));

  PlanRequest request;
  request.problem = asked;
  request.tuning = &db;
  const Plan plan = Plan::create(*device, request);
  EXPECT_EQ(plan.family(), "implicit_gemm");
  EXPECT_EQ(plan.tier(), ConfigTier::Nearest);
  Config expected = split8;
  expected["SPLIT_K"] = 1;
  EXPECT_EQ(plan.config(), expected) << plan.explanation();
  EXPECT_NE(plan.explanation().find("fitted to this problem: SPLIT_K 8 -> 1"), std::string::npos)
      << plan.explanation();
  const auto result = check_plan(*device, asked, "implicit_gemm", plan.config(), 21);
  EXPECT_TRUE(result.passed) << result.message;
  std::filesystem::remove(file);
}

// Without tuning data, backward-data with a handful of input channels goes to another family: implicit GEMM's
// tiles would mostly idle. Other directions, and a plan that names the family, keep implicit_gemm.
TEST(ImplicitGemm, UntunedBackwardDataWithFewChannelsGoesToAnotherFamily) {
  REQUIRE_DEVICE(device);
  const ConvProblem rgb = parse_problem("N=2,C=3,H=16,W=16,K=8,R=3,pad=1");
  PlanRequest untuned;
  untuned.problem = rgb.with_direction(Direction::BackwardData);
  untuned.use_tuning = false;
  const Plan data = Plan::create(*device, untuned);
  EXPECT_NE(data.family(), "implicit_gemm");
  EXPECT_EQ(data.tier(), ConfigTier::BuiltInDefault);
  EXPECT_NE(data.explanation().find("implicit_gemm passed over: backward-data with C/groups=3"), std::string::npos)
      << data.explanation();
  PlanRequest forward;
  forward.problem = rgb;
  forward.use_tuning = false;
  EXPECT_EQ(Plan::create(*device, forward).family(), "implicit_gemm");
  EXPECT_EQ(Plan::create(*device, {rgb.with_direction(Direction::BackwardData), {}, "implicit_gemm"}).family(),
            "implicit_gemm");
}

// The GPU defaults (no GPU needed: an H100's description, through CUDA and NVIDIA OpenCL) are valid for the
// benchmark layers and are the configurations measured fastest there (on the H200).
TEST(ImplicitGemm, GpuDefaultsForTheBenchmarkLayers) {
  DeviceInfo cuda;
  cuda.backend = BackendKind::Cuda;
  cuda.vendor = "NVIDIA";
  cuda.architecture = "sm_90";
  cuda.is_gpu = true;
  cuda.compute_units = 132;
  cuda.local_memory_bytes = 48 * 1024;
  cuda.max_work_group_size = 1024;
  DeviceInfo opencl = cuda;
  opencl.backend = BackendKind::OpenCL;
  opencl.vendor = "NVIDIA Corporation";
  const std::map<std::string, std::string> layers = {
      {"alex2", "N=128,C=64,H=27,K=192,R=5,pad=2"}, {"alex3", "N=128,C=192,H=13,K=384,R=3,pad=1"},
      {"alex4", "N=128,C=384,H=13,K=256,R=3,pad=1"}, {"alex5", "N=128,C=256,H=13,K=256,R=3,pad=1"},
      {"ucla5x5", "N=1,C=256,H=228,K=256,R=5"}};
  auto brief = [](const Config& c) {
    return fmt::format("{}x{}x{} a{} s{}", c.at("TILE_M"), c.at("TILE_N"), c.at("TILE_K"), c.at("ASYNC_COPY"),
                       c.at("SPLIT_K"));
  };
  std::map<std::string, std::string> chosen;
  for (const DeviceInfo* device : {&cuda, &opencl}) {
    for (const auto& [name, text] : layers) {
      for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
        const ConvProblem pb = parse_problem(text).with_direction(d);
        const Config c = family().default_config(pb, *device);
        std::cout << fmt::format("default for {} {} through {}: {}\n", name, to_string(d), to_string(device->backend),
                                 to_string(c));
        EXPECT_EQ(config_problem(family(), c, pb, *device), "") << pb.to_string();
        chosen[fmt::format("{} {} {}", to_string(device->backend), name, to_string(d))] = brief(c);
        if (d == Direction::BackwardFilter) {
          EXPECT_GE(implicit_gemm::work_groups(pb, implicit_gemm::parameter_table(pb).read(c)), 132) << pb.to_string() << " " << to_string(c);
        }
      }
    }
  }
  // The measured winners: 128x128x16 with asynchronous copies for forward where K fills 128-row tiles (split in
  // three through CUDA where the work-groups fill 2-3 waves), 64x128 register-staged for alex2's 192 channels.
  EXPECT_EQ(chosen["cuda alex2 fwd"], "64x128x8 a0 s1");
  EXPECT_EQ(chosen["cuda alex3 fwd"], "128x128x16 a1 s1");
  EXPECT_EQ(chosen["cuda alex4 fwd"], "128x128x16 a1 s3");
  EXPECT_EQ(chosen["opencl alex4 fwd"], "128x128x16 a1 s1");
  EXPECT_EQ(chosen["cuda ucla5x5 fwd"], "128x128x16 a1 s1");
  EXPECT_EQ(chosen["cuda alex2 bwd-data"], "64x128x8 a1 s3");
  EXPECT_EQ(chosen["opencl alex5 bwd-data"], "128x64x8 a1 s1");
  EXPECT_EQ(chosen["cuda alex4 bwd-filter"], "128x128x16 a1 s32");
  EXPECT_EQ(chosen["opencl alex2 bwd-filter"], "64x128x8 a1 s64");

  // Layers where the tiles fill under a wave (scripts/gpu/sweeps/untuned_misses.txt): backward-filter of a 3x3
  // stride-2 layer on 128x64 tiles in 64 slices of 392; a small 7x5 stride-2 forward in 4 slices; Inception's 7x1
  // backward-data in 3; 1x1 backward-data on 64x128 tiles, never split.
  const std::map<std::string, std::pair<std::string, std::string>> short_waves = {
      {"s2a bwd-filter", {"N=32,C=64,H=56,W=56,K=128,R=3,S=3,stride=2,pad=1,dir=bwd-filter", "128x64x8 a1 s64"}},
      {"odd75 fwd", {"N=8,C=16,H=15,W=13,K=24,R=7,S=5,stride=2,pad=1", "32x64x8 a1 s4"}},
      {"inc_7x1 bwd-data", {"N=32,C=128,H=17,W=17,K=192,R=7,S=1,pad=3x0,dir=bwd-data", "128x64x8 a1 s3"}},
      {"pw bwd-data", {"N=32,C=256,H=14,W=14,K=512,R=1,S=1,dir=bwd-data", "64x128x8 a1 s1"}},
      {"stem fwd", {"N=1,C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3", "64x128x8 a0 s1"}}};
  for (const auto& [name, layer] : short_waves) {
    const ConvProblem pb = parse_problem(layer.first);
    const Config c = family().default_config(pb, cuda);
    EXPECT_EQ(brief(c), layer.second) << name;
    EXPECT_EQ(config_problem(family(), c, pb, cuda), "") << name;
  }

  // Without asynchronous copies (another vendor's GPU), the register-staged 128x64 tiles.
  DeviceInfo other = opencl;
  other.vendor = "Advanced Micro Devices, Inc.";
  other.architecture = "gfx1100";
  const Config staged = family().default_config(parse_problem(layers.at("alex3")), other);
  EXPECT_EQ(brief(staged), "128x64x8 a0 s1");
  EXPECT_EQ(config_problem(family(), staged, parse_problem(layers.at("alex3")), other), "");

  // The search space of a benchmark layer is large but enumerates quickly, and the default lies in it.
  const ConvProblem alex3 = parse_problem("N=128,C=192,H=13,K=384,R=3,pad=1");
  const SearchSpace space(family(), alex3, cuda);
  EXPECT_GT(space.size(), 1000u);
  const std::string def = to_string(family().default_config(alex3, cuda));
  EXPECT_TRUE(std::any_of(space.configs().begin(), space.configs().end(),
                          [&](const Config& c) { return to_string(c) == def; }));
}
