// The workspace limit of plan requests and the tuner (issue 13): the device's default, families refused or fitted
// by it, a tuned entry or default over it skipped with both sizes in the explanation, a limit of 0, the searches.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "convtune/error.h"
#include "convtune/plan.h"
#include "convtune/tuning.h"
#include "src/tuner/search_space.h"
#include "tests/support/hopper_device.h"

namespace convtune {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

const char* const kUcla5x5 = "N=1,C=256,H=228,W=228,K=256,R=5";  // the seed layer whose tiles exceed 256 MiB

PlanDescriptor describe(const std::string& problem, std::optional<uint64_t> limit, const std::string& family = "",
                        const TuningDatabase* db = nullptr) {
  PlanRequest request;
  request.problem = parse_problem(problem);
  request.family = family;
  request.workspace_limit = limit;
  request.use_tuning = db != nullptr;
  request.tuning = db;
  return PlanDescriptor::create(test::described_hopper(), request);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(WorkspaceLimit, DefaultIsTheDevicesAndARequestOverridesIt) {
  DeviceInfo device = test::described_hopper();  // a GPU of 80 GB
  EXPECT_EQ(default_workspace_limit(device), 1024 * kMiB);
  EXPECT_EQ(workspace_limit(device), 1024 * kMiB);
  device.global_memory_bytes = 4096 * kMiB;
  EXPECT_EQ(default_workspace_limit(device), 512 * kMiB);  // an eighth of a smaller GPU
  device.global_memory_bytes = 0;
  EXPECT_EQ(default_workspace_limit(device), 256 * kMiB);  // one that reports nothing keeps the fixed cap
  EXPECT_EQ(workspace_limit(with_workspace_limit(device, 0)), 0u);
  EXPECT_EQ(workspace_limit(with_workspace_limit(device, std::nullopt)), 256 * kMiB);
  EXPECT_EQ(with_workspace_limit(device, 1).fingerprint(), device.fingerprint());  // never part of a key
  // Kernel devices that are not GPUs (OpenCL on a CPU: PoCL): 256 MiB and at most a quarter of their memory.
  DeviceInfo pocl = test::described_hopper();
  pocl.is_gpu = false, pocl.backend = BackendKind::OpenCL;
  pocl.global_memory_bytes = uint64_t{16} << 30;
  EXPECT_EQ(default_workspace_limit(pocl), 256 * kMiB);
  pocl.global_memory_bytes = 512 * kMiB;
  EXPECT_EQ(default_workspace_limit(pocl), 128 * kMiB);  // a quarter of a small device
  // The CPU backend's buffers are host memory: all of it (cpu_blocked packs more than 256 MiB on seed layers).
  DeviceInfo cpu;
  cpu.backend = BackendKind::Cpu;
  cpu.global_memory_bytes = uint64_t{16} << 30;
  EXPECT_EQ(default_workspace_limit(cpu), uint64_t{16} << 30);
}

// ucla5x5's transformed tiles (934 MB for one image) exceed 256 MiB (the limit of a smaller device, or asked for):
// winograd is skipped, and the plan says so with both sizes; within the 80 GB GPU's default of 1 GiB it is plannable.
TEST(WorkspaceLimit, UclaLayerPlansWinogradOnlyWithinALargerLimit) {
  const uint64_t small = 256 * kMiB;
  const PlanDescriptor untuned = describe(kUcla5x5, small);
  EXPECT_NE(untuned.family().name(), "winograd");
  EXPECT_TRUE(contains(untuned.explanation(), "winograd skipped for the workspace limit: the transformed tiles of one "
                                              "image (934281216 bytes) exceed the workspace limit of 268435456 bytes"))
      << untuned.explanation();
  EXPECT_THROW(describe(kUcla5x5, small, "winograd"), Unsupported);
  const PlanDescriptor larger = describe(kUcla5x5, std::nullopt, "winograd");
  EXPECT_GT(larger.workspace_bytes(), 256 * kMiB);
  EXPECT_LE(larger.workspace_bytes(), uint64_t{1} << 30);
}

// 0 allows no workspace: families that need one are skipped (named), the plan takes one without.
TEST(WorkspaceLimit, ZeroAllowsNoWorkspace) {
  const std::string layer = "N=8,C=64,H=28,K=64,R=3,pad=1,dir=bwd-filter";
  const PlanDescriptor none = describe(layer, 0);
  EXPECT_EQ(none.workspace_bytes(), 0u) << none.describe();
  EXPECT_TRUE(contains(none.explanation(), "winograd skipped for the workspace limit")) << none.explanation();
  EXPECT_TRUE(contains(none.explanation(), "exceed the workspace limit of 0 bytes")) << none.explanation();
  // A family named outright has nowhere to fall: refused, naming the limit.
  try {
    describe(layer, 0, "winograd");
    ADD_FAILURE() << "winograd planned without workspace";
  } catch (const Unsupported& e) {
    EXPECT_TRUE(contains(e.what(), "workspace limit of 0 bytes")) << e.what();
  }
  // Families whose split needs a workspace keep SPLIT 1 within the limit.
  for (const char* family : {"implicit_gemm", "direct_tiled"}) {
    const PlanDescriptor d = describe(layer, 0, family);
    EXPECT_EQ(d.workspace_bytes(), 0u) << d.describe();
  }
  // A given configuration over the limit is refused, naming the constraint.
  PlanRequest request;
  request.problem = parse_problem("N=8,C=64,H=28,K=64,R=3,pad=1");
  request.family = "winograd";
  request.config = describe("N=8,C=64,H=28,K=64,R=3,pad=1", std::nullopt, "winograd").config();
  request.workspace_limit = 2 * kMiB;  // one image fits, the default's chunk of 8 does not
  try {
    PlanDescriptor::create(test::described_hopper(), request);
    ADD_FAILURE() << "a given configuration over the limit was planned";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "workspace within the workspace limit")) << e.what();
  }
}

// A tuned entry whose workspace is over the request's limit is skipped as measured (not refitted into a variant
// nobody timed): the family's next entry or another family's serves, and the explanation names the entry and both
// sizes. Under the device's default the same entry serves.
TEST(WorkspaceLimit, EntryOverTheLimitIsSkippedWithBothSizes) {
  const DeviceInfo device = test::described_hopper();
  const ConvProblem layer = parse_problem("N=32,C=64,H=28,K=64,R=3,pad=1");
  const Config winograd = describe(layer.to_string(), std::nullopt, "winograd").config();
  const Config implicit = describe(layer.to_string(), std::nullopt, "implicit_gemm").config();
  TuningDatabase db(std::filesystem::temp_directory_path() / "convtune-workspace-limit-test-never-written.json");
  auto hash = [&](const char* family) { return kernel_family(family).kernel_version(); };
  db.insert(make_tuning_entry(device, "winograd", hash("winograd"), layer, winograd, 0.01));       // fastest
  db.insert(make_tuning_entry(device, "implicit_gemm", hash("implicit_gemm"), layer, implicit, 0.05));
  const PlanDescriptor as_tuned = describe(layer.to_string(), std::nullopt, "", &db);
  EXPECT_EQ(as_tuned.family().name(), "winograd");
  EXPECT_EQ(as_tuned.tier(), ConfigTier::Exact);
  const size_t needed = as_tuned.workspace_bytes();
  ASSERT_GT(needed, 4 * kMiB);
  const PlanDescriptor limited = describe(layer.to_string(), 4 * kMiB, "", &db);
  EXPECT_EQ(limited.family().name(), "implicit_gemm") << limited.explanation();
  EXPECT_EQ(limited.tier(), ConfigTier::Exact);
  EXPECT_TRUE(contains(limited.explanation(), "winograd [" + to_string(winograd) + "]")) << limited.explanation();
  EXPECT_TRUE(contains(limited.explanation(), fmt::format("its workspace ({} bytes) is over the workspace limit ({} "
                                                          "bytes)", needed, 4 * kMiB)))
      << limited.explanation();
}

// The tuner's searches and tasks see the same limit: no configuration over it, a family that cannot fit left out
// with its reason.
TEST(WorkspaceLimit, TunerSearchesOnlyWhatFits) {
  const DeviceInfo device = with_workspace_limit(test::described_hopper(), 2 * kMiB);
  const Problem layer(parse_problem("N=32,C=64,H=28,K=64,R=3,pad=1"));
  const KernelFamily& winograd = kernel_family("winograd");
  const SearchSpace space(winograd, layer, device);
  ASSERT_GT(space.size(), 0u);
  EXPECT_LT(space.size(), SearchSpace(winograd, layer, test::described_hopper()).size());
  for (const Config& config : space.sample(50, 3))
    EXPECT_LE(winograd.recipe(layer, {}, config, device).workspace_bytes, 2 * kMiB) << to_string(config);
  std::vector<std::string> skipped;
  const auto tasks = make_tune_tasks(with_workspace_limit(device, 0), {{"layer", layer}}, "all", &skipped);
  for (const TuneTask& t : tasks) EXPECT_NE(t.family->name(), "winograd");
  bool named = false;
  for (const std::string& s : skipped) named = named || contains(s, "winograd: the transformed tiles");
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace convtune
