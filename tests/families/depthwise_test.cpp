// depthwise beyond the shared conformance test: untuned plans pick it for depthwise layers (a described Hopper GPU with
// and without the shipped H200 model, and PoCL) and not for other layers; the fused bias/ReLU with an odd multiplier
// against the host; backward-filter's split partials summed in a fixed order (bit-identical reruns); defaults valid
// for the MobileNet layers on a Hopper GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "convtune/plan.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/harness/workload.h"
#include "src/tuner/search_space.h"
#include "src/tuning_db/tuning_database.h"
#include "tests/support/epilogue_check.h"
#include "tests/support/hopper_device.h"
#include "tests/support/plan_check.h"
#include "tests/support/opencl_device.h"

using namespace convtune;
using namespace convtune::testing_support;

namespace {

using test::opencl_device;

// The H200 entries convtune ships, read as the plans read them (the Hopper device gets their cost model).
const TuningDatabase& shipped() {
  static const TuningDatabase db(std::filesystem::temp_directory_path() / "convtune-depthwise-test-none.json",
                                 shipped_tuning_dir());
  return db;
}

PlanDescriptor untuned(const DeviceInfo& device, const ConvProblem& problem, const TuningDatabase* db) {
  PlanRequest request{Problem(problem)};
  request.tuning = db;
  request.use_tuning = db != nullptr;
  return PlanDescriptor::create(device, request);
}

// MobileNet-style layers (3x3 stride 1 and 2), a 5x5 one, a multiplier of 2 and a dilated one.
const std::vector<std::string> kDepthwiseLayers = {
    "N=32,C=256,H=28,K=256,R=3,pad=1,groups=256",          "N=32,C=32,H=112,K=32,R=3,pad=1,groups=32",
    "N=32,C=512,H=28,K=512,R=3,stride=2,pad=1,groups=512", "N=32,C=1024,H=7,K=1024,R=3,pad=1,groups=1024",
    "N=32,C=240,H=14,K=240,R=5,pad=2,groups=240",          "N=8,C=64,H=56,K=128,R=3,pad=1,groups=64",
    "N=8,C=64,H=30,K=64,R=3,pad=2,dilation=2,groups=64",
};

// The written operand of `config`'s plan on a workload's inputs, as the device left it.
std::vector<float> run_once(harness::Workload& workload, const Config& config) {
  PlanRequest request{workload.problem()};
  request.family = "depthwise";
  request.config = config;
  const Plan plan = Plan::create(workload.device(), request);
  workload.poison();
  plan.run(workload.queue(), workload.operands());
  workload.check_canaries();
  return workload.output();
}

}  // namespace

TEST(Depthwise, UntunedPlansPickItForDepthwiseLayersOnlyOnHopperAndPocl) {
  std::vector<std::pair<DeviceInfo, const TuningDatabase*>> devices = {
      {test::described_hopper(), &shipped()},  // the H200 cost model applies (architecture tier)
      {test::described_hopper(), nullptr},     // the rank order and poor-fit rules alone
  };
  if (Device* pocl = opencl_device()) devices.emplace_back(pocl->info(), &shipped());
  for (const auto& [device, db] : devices) {
    for (const std::string& text : kDepthwiseLayers) {
      for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
        const ConvProblem pb = parse_problem(text).with_direction(d);
        const PlanDescriptor plan = untuned(device, pb, db);
        // On a GPU, stride-1 backward-data on 28 columns and wider is direct_tiled's (depthwise::
        // direct_tiled_backward_data, measured on the H200); PoCL keeps this family there too.
        const bool direct = depthwise::direct_tiled_backward_data(pb, device);
        EXPECT_EQ(direct, device.is_gpu && d == Direction::BackwardData && pb.stride.h == 1 && pb.dilation.h == 1 &&
                              pb.k == pb.c && pb.w >= 28)
            << pb.to_string();
        EXPECT_EQ(plan.family().name(), direct ? "direct_tiled" : "depthwise")
            << device.id << (db ? " with" : " without") << " the shipped database, " << pb.to_string() << ": "
            << plan.explanation();
        EXPECT_EQ(plan.tier(), ConfigTier::BuiltInDefault);
      }
    }
    // tf32 asks for at least TF32 accuracy: the tensor-core families pass depthwise layers to this FP32 family too.
    if (device.backend == BackendKind::Cuda) {
      ConvProblem tf32 = parse_problem(kDepthwiseLayers.front());
      tf32.math = MathMode::TF32;
      EXPECT_EQ(untuned(device, tf32, db).family().name(), "depthwise");
    }
    // A single input channel is an ordinary convolution, and a grouped layer is not the family's.
    EXPECT_NE(untuned(device, parse_problem("N=32,C=1,H=28,K=32,R=5,pad=2"), db).family().name(), "depthwise");
    EXPECT_NE(untuned(device, parse_problem("N=32,C=64,H=28,K=64,R=3,pad=1,groups=4"), db).family().name(),
              "depthwise");
  }
  const std::string why = kernel_family("depthwise").unsupported_reason(
      parse_problem("N=2,C=8,H=9,K=8,R=3,groups=4"), {}, test::described_hopper());
  EXPECT_NE(why.find("groups == C"), std::string::npos) << why;
  EXPECT_NE(kernel_family("depthwise")
                .unsupported_reason(parse_problem("N=2,C=8,H=9,K=8,R=3,groups=8"), {false, true, 2},
                                    test::described_hopper())
                .find("max-pool"),
            std::string::npos);
}

TEST(Depthwise, DefaultsSatisfyTheConstraintsOnHopperForTheBenchmarkLayers) {
  const DeviceInfo hopper = test::described_hopper();
  const KernelFamily& family = kernel_family("depthwise");
  for (const std::string& text : kDepthwiseLayers) {
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = parse_problem(text).with_direction(d);
      const Config config = family.default_config(pb, hopper);
      EXPECT_EQ(config_problem(family, config, pb, hopper), "") << pb.to_string();
      if (d == Direction::BackwardFilter) {
        // The split gives two to four work-groups per multiprocessor, its partials declared as the workspace.
        const KernelRecipe recipe = family.recipe(pb, {}, config, hopper);
        const int64_t split = config.at("SPLIT");
        EXPECT_LE(pb.k * split, std::max<int64_t>(4 * 132, pb.k)) << pb.to_string();
        EXPECT_GT(pb.k * split * 2, std::min<int64_t>(4 * 132, pb.k * 512)) << pb.to_string();
        EXPECT_EQ(recipe.steps.size(), split > 1 ? 2u : 1u);
        EXPECT_EQ(recipe.workspace_bytes, split > 1 ? static_cast<size_t>(split * pb.w_elements()) * sizeof(float) : 0u);
      }
    }
  }
}

TEST(Depthwise, FusedBiasAndReluWithAnOddMultiplierMatchTheHost) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const KernelFamily& family = kernel_family("depthwise");
  const ConvProblem pb = parse_problem("N=2,C=3,H=9,W=7,K=9,R=3,pad=1,groups=3");  // multiplier 3: TILE_M 2 and 4 clamp
  const auto x = random_values(static_cast<size_t>(pb.x_elements()), 11);
  const auto w = random_values(static_cast<size_t>(pb.w_elements()), 12);
  const auto bias = random_values(static_cast<size_t>(pb.k), 13);
  std::vector<Config> configs = SearchSpace(family, pb, device->info()).sample(2, 5);
  Config wide_m = family.default_config(pb, device->info());
  wide_m["TILE_M"] = 4;
  wide_m["THREADS_C"] = 1;  // 3 channel units of TILE_M 4
  configs.push_back(wide_m);
  for (const Config& config : configs) {
    for (const Epilogue& e : {Epilogue{true, true, 1}, Epilogue{false, true, 1}}) {
      SCOPED_TRACE(fmt::format("{} [{}]", to_string(e), to_string(config)));
      const auto want = host_forward(pb, e, x, w, bias);
      const auto got = device_forward(*device, "depthwise", pb, e, config, x, w, bias, pb.y_elements());
      EXPECT_LE(relative_max_error(got, want), 1e-5);
    }
  }
}

TEST(Depthwise, BackwardFilterSplitsAreSummedInAFixedOrder) {
  Device* device = opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device runs kernels here";
  const ConvProblem pb = parse_problem("N=4,C=6,H=15,W=13,K=12,R=3,pad=1,groups=6,dir=bwd-filter");
  harness::Workload workload(*device, pb, 3);
  for (int64_t split : {1, 8, 64}) {
    const Config config{{"THREADS", 64}, {"TILE_Q", 4}, {"SPLIT", split}};
    const std::vector<float> first = run_once(workload, config);
    EXPECT_EQ(run_once(workload, config), first) << "SPLIT=" << split << " differs between two runs";
    const harness::Check check = check_plan_on(workload, "depthwise", config);
    EXPECT_TRUE(check.passed) << "SPLIT=" << split << ": " << check.message;
  }
}
