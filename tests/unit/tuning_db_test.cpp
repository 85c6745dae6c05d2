// The tuning database: fallback tiers, shape distance, staleness, atomic saves, damaged files left untouched,
// merge and prune, shipped defaults and the user-file location rules; hostile files, locked concurrent saves and
// stale temporary files.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "src/core/atomic_file.h"
#include "src/tuning_db/shape_distance.h"
#include "src/tuning_db/tuning_database.h"
#include "src/tuning_db/tuning_db_report.h"

using namespace convtune;
namespace fs = std::filesystem;

namespace {

DeviceInfo gpu(std::string name, std::string architecture, std::string vendor = "NVIDIA Corporation",
               std::string driver = "550.54", BackendKind backend = BackendKind::Cuda) {
  DeviceInfo d;
  d.backend = backend;
  d.name = std::move(name);
  d.vendor = std::move(vendor);
  d.architecture = std::move(architecture);
  d.driver_version = std::move(driver);
  return d;
}

const DeviceInfo kH100 = gpu("NVIDIA H100 80GB HBM3", "sm_90");
const DeviceInfo kH200 = gpu("NVIDIA H200", "sm_90");
const DeviceInfo kA100 = gpu("NVIDIA A100-SXM4-80GB", "sm_80");
const DeviceInfo kRadeon = gpu("Radeon RX 7900 XTX", "gfx1100", "Advanced Micro Devices, Inc.", "6.1",
                               BackendKind::OpenCL);

const KernelVersions kVersions{{"implicit_gemm", 2}, {"direct_tiled", 1}};

ConvProblem problem(std::string_view text) { return parse_problem(text); }

const ConvProblem kLayer = problem("N=1,C=64,H=32,W=32,K=64,R=3,S=3,pad=1");

TuningEntry entry(const DeviceInfo& device, const ConvProblem& p, double ms, int64_t tile = 64,
                  std::string family = "implicit_gemm", int version = 2) {
  return make_tuning_entry(device, std::move(family), version, p, {{"TILE_M", tile}, {"TILE_N", 32}}, ms);
}

// A fresh directory per test, removed afterwards.
class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("convtune_tuning_db_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                       static_cast<long>(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_ = dir_ / "user" / "tuning.json";
    fs::create_directories(file_.parent_path());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  static std::vector<std::string> files_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& item : fs::directory_iterator(dir)) names.push_back(item.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  static bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  }

  fs::path dir_;
  fs::path file_;
};

}  // namespace

TEST_F(TuningDbTest, ExactLookupAfterSaveAndReload) {
  {
    TuningDatabase db(file_);
    EXPECT_EQ(db.insert(entry(kH100, kLayer, 0.5, 128)), InsertOutcome::Added);
    db.insert(entry(kH100, kLayer.with_direction(Direction::BackwardData), 0.2, 16));
    db.save();
  }
  TuningDatabase db(file_);
  EXPECT_TRUE(db.user_file_error().empty());
  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  ASSERT_EQ(r.tier, LookupTier::Exact) << r.explain();
  EXPECT_EQ(r.entry->parameters.at("TILE_M"), 128);  // not the bwd-data entry
  EXPECT_EQ(r.entry->problem, kLayer);
  EXPECT_EQ(r.distance, 0);
  EXPECT_EQ(r.origin, file_.string());
  EXPECT_TRUE(r.stale.empty());
  EXPECT_NEAR(r.entry->gflops, kLayer.flops() / 0.5e6, 1e-9);
  EXPECT_EQ(r.entry->convtune_version, convtune_version());
  EXPECT_EQ(r.entry->date.size(), 20u);  // 2025-03-01T12:00:00Z
  EXPECT_TRUE(contains(r.explain(), "tuned for this problem on this device: implicit_gemm TILE_M=128")) << r.explain();
}

TEST_F(TuningDbTest, NearestShapeIsTheSmallestLogRatioDistanceAmongComparableShapes) {
  TuningDatabase db(file_);
  // Asked: N=1,C=64,H=32,W=32,K=64, 3x3, stride 1.
  const ConvProblem near = problem("N=1,C=64,H=56,W=56,K=64,R=3,S=3,pad=1");     // 2*log2(56/32) = 1.61
  const ConvProblem far = problem("N=1,C=128,H=28,W=28,K=128,R=3,S=3,pad=1");    // 1 + 1 + 2*log2(32/28) = 2.39
  const ConvProblem batch = problem("N=8,C=64,H=32,W=32,K=64,R=3,S=3,pad=1");     // log2(8) = 3
  const ConvProblem pointwise = problem("N=1,C=64,H=32,W=32,K=64,R=1,S=1");       // 0, but another filter size
  const ConvProblem strided = problem("N=1,C=64,H=32,W=32,K=64,R=3,S=3,stride=2"); // 0, but another stride
  const ConvProblem depthwise = problem("N=1,C=64,H=32,W=32,K=64,R=3,S=3,pad=1,groups=64");
  db.insert(entry(kH100, near, 0.9, 1));
  db.insert(entry(kH100, far, 0.01, 2));  // much faster, but farther: distance decides
  db.insert(entry(kH100, batch, 0.5, 3));
  db.insert(entry(kH100, pointwise, 0.1, 4));
  db.insert(entry(kH100, strided, 0.1, 5));
  db.insert(entry(kH100, depthwise, 0.1, 6));
  db.insert(entry(kH100, problem("N=1,C=64,H=32,W=32,K=64,R=3,S=3,pad=1,precision=fp16"), 0.1, 7));

  EXPECT_NEAR(shape_distance(kLayer, near), 2 * std::log2(56.0 / 32), 1e-12);
  EXPECT_NEAR(shape_distance(kLayer, far), 2 + 2 * std::log2(32.0 / 28), 1e-12);
  EXPECT_FALSE(comparable_shapes(kLayer, pointwise));
  EXPECT_FALSE(comparable_shapes(kLayer, strided));
  EXPECT_FALSE(comparable_shapes(kLayer, depthwise));
  EXPECT_EQ(groups_class(depthwise), "depthwise");

  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  ASSERT_EQ(r.tier, LookupTier::Nearest) << r.explain();
  EXPECT_EQ(r.entry->problem, near);
  EXPECT_NEAR(r.distance, 1.6147, 1e-4);
  EXPECT_TRUE(contains(r.explain(), "nearest tuned shape " + near.to_string())) << r.explain();

  // Padding is not part of the comparison: the same extents with pad 0 are at distance 0.
  const LookupResult unpadded = db.lookup(problem("N=1,C=64,H=56,W=56,K=64,R=3,S=3"), kH100, kVersions);
  EXPECT_EQ(unpadded.tier, LookupTier::Nearest);
  EXPECT_EQ(unpadded.entry->problem, near);
  EXPECT_EQ(unpadded.distance, 0);

  // Entries whose parameters cannot be made to fit the asked problem are skipped, and said so.
  LookupOptions options;
  options.fit = [](const TuningEntry& e) -> std::optional<FittedConfig> {
    if (e.parameters.at("TILE_M") == 1) return std::nullopt;
    return FittedConfig{e.parameters, {}};
  };
  const LookupResult refused = db.lookup(kLayer, kH100, kVersions, options);
  EXPECT_EQ(refused.entry->problem, far);
  ASSERT_EQ(refused.rejected.size(), 1u);
  EXPECT_EQ(refused.rejected.front().entry.problem, near);

  // Parameters the fit changes are what the lookup hands back, and the explanation says what changed.
  options.fit = [](const TuningEntry& e) -> std::optional<FittedConfig> {
    Config halved = e.parameters;
    halved["TILE_N"] /= 2;
    return FittedConfig{halved, "TILE_N 32 -> 16"};
  };
  const LookupResult fitted = db.lookup(kLayer, kH100, kVersions, options);
  EXPECT_EQ(fitted.entry->problem, near);
  EXPECT_EQ(fitted.entry->parameters.at("TILE_N"), 32);
  EXPECT_EQ(fitted.parameters.at("TILE_N"), 16);
  EXPECT_TRUE(contains(fitted.explain(), "fitted to this problem: TILE_N 32 -> 16")) << fitted.explain();
  EXPECT_EQ(r.parameters, r.entry->parameters);
}

TEST_F(TuningDbTest, NearestShapeFamiliesCompeteByTheirGflops) {
  TuningDatabase db(file_);
  const ConvProblem batch4 = problem("N=4,C=64,H=32,W=32,K=64,R=3,S=3,pad=1");  // distance 2
  const ConvProblem batch8 = problem("N=8,C=64,H=32,W=32,K=64,R=3,S=3,pad=1");  // distance 3
  // direct_tiled is nearest but slow for its shape; implicit_gemm's nearest is farther but twice as efficient.
  db.insert(entry(kH100, batch4, 1.0, 16, "direct_tiled", 1));
  db.insert(entry(kH100, batch8, 1.0, 64));
  db.insert(entry(kH100, batch8.with_direction(Direction::BackwardData), 0.01, 8));  // another direction
  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  ASSERT_EQ(r.tier, LookupTier::Nearest) << r.explain();
  EXPECT_EQ(r.entry->family, "implicit_gemm") << r.explain();
  EXPECT_EQ(r.distance, 3);

  // Each family puts forward its nearest entry, not its most efficient one: a faster implicit_gemm entry
  // farther away does not replace the nearest one...
  db.insert(entry(kH100, problem("N=16,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), 0.5, 128));
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).entry->parameters.at("TILE_M"), 64);
  // ... and a nearer one, even a slow one, does.
  db.insert(entry(kH100, problem("N=2,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), 2.0, 32));
  const LookupResult nearer = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(nearer.entry->family, "direct_tiled") << nearer.explain();  // 4x the work of N=1 in 1 ms vs 2x in 2 ms

  // When a family's nearest entry cannot fit, its next nearest stands in for it.
  LookupOptions options;
  options.fit = [](const TuningEntry& e) -> std::optional<FittedConfig> {
    if (e.family == "direct_tiled") return std::nullopt;
    return FittedConfig{e.parameters, {}};
  };
  const LookupResult fitted = db.lookup(kLayer, kH100, kVersions, options);
  EXPECT_EQ(fitted.entry->family, "implicit_gemm");
  EXPECT_EQ(fitted.entry->parameters.at("TILE_M"), 32);
  EXPECT_EQ(fitted.rejected.size(), 1u);
}

TEST_F(TuningDbTest, TunedShapesTooFarAwayAreNotUsed) {
  TuningDatabase db(file_);
  // 64 times the batch: distance 6, the limit, still used; 128 times: 7, not.
  db.insert(entry(kH100, problem("N=128,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), 1.0, 128));
  const LookupResult far = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(far.tier, LookupTier::BuiltInDefault) << far.explain();
  EXPECT_TRUE(contains(far.explain(), "within shape distance 6")) << far.explain();
  db.insert(entry(kH100, problem("N=64,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), 1.0, 64));
  const LookupResult limit = db.lookup(kLayer, kH100, kVersions);
  ASSERT_EQ(limit.tier, LookupTier::Nearest) << limit.explain();
  EXPECT_EQ(limit.distance, 6);
  LookupOptions wider;
  wider.max_distance = 8;
  db.insert(entry(kH100, problem("N=128,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), 0.1, 32, "direct_tiled", 1));
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).entry->family, "implicit_gemm");
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions, wider).entry->family, "direct_tiled");
}

TEST_F(TuningDbTest, ArchitectureThenVendorThenBuiltInDefault) {
  TuningDatabase db(file_);
  db.insert(entry(kH100, kLayer, 0.5, 128));
  db.insert(entry(kA100, kLayer, 0.8, 64));
  // Same architecture string but another backend: not a fallback.
  db.insert(entry(gpu("NVIDIA H100 (OpenCL)", "sm_90", "NVIDIA Corporation", "550.54", BackendKind::OpenCL),
                  kLayer, 0.1, 8));

  const LookupResult h200 = db.lookup(kLayer, kH200, kVersions);
  ASSERT_EQ(h200.tier, LookupTier::Architecture) << h200.explain();
  EXPECT_EQ(h200.entry->device.name, kH100.name);
  EXPECT_TRUE(contains(h200.explain(), "tuned on NVIDIA H100 80GB HBM3 (same architecture)")) << h200.explain();

  // Another NVIDIA architecture: the vendor tier, which picks the faster of the two (both at distance 0).
  const LookupResult v100 = db.lookup(kLayer, gpu("Tesla V100", "sm_70"), kVersions);
  ASSERT_EQ(v100.tier, LookupTier::Vendor) << v100.explain();
  EXPECT_EQ(v100.entry->parameters.at("TILE_M"), 128);

  // Fallback tiers take the nearest comparable shape too, and report it.
  const LookupResult bigger = db.lookup(problem("N=2,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), kH200, kVersions);
  EXPECT_EQ(bigger.tier, LookupTier::Architecture);
  EXPECT_EQ(bigger.distance, 1);
  EXPECT_TRUE(contains(bigger.explain(), "nearest shape " + kLayer.to_string())) << bigger.explain();

  const LookupResult amd = db.lookup(kLayer, kRadeon, kVersions);
  EXPECT_EQ(amd.tier, LookupTier::BuiltInDefault);
  EXPECT_FALSE(amd.entry);
  EXPECT_TRUE(contains(amd.explain(), "built-in default")) << amd.explain();
}

// An exact-shape entry from another chip of this architecture comes before a nearest shape tuned on this device
// (a tune of some layers on an H100 otherwise moved their neighbours off the H200's entries for them); a nearest
// shape on another chip still comes after this device's nearest.
TEST_F(TuningDbTest, ExactShapeOnTheArchitectureBeforeANearestShapeHere) {
  TuningDatabase db(file_);
  const ConvProblem neighbour = problem("N=2,C=64,H=32,W=32,K=64,R=3,S=3,pad=1");  // distance 1
  db.insert(entry(kH100, neighbour, 0.1, 16, "direct_tiled", 1));
  db.insert(entry(kH200, kLayer, 0.5, 128));
  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  ASSERT_EQ(r.tier, LookupTier::Architecture) << r.explain();
  EXPECT_EQ(r.entry->family, "implicit_gemm") << r.explain();
  EXPECT_EQ(r.distance, 0);

  // Another shape, for which the H200 has only a neighbour (distance 1) and the H100 one too: this device's.
  const ConvProblem other = problem("N=4,C=64,H=32,W=32,K=64,R=3,S=3,pad=1");
  const LookupResult near = db.lookup(other, kH100, kVersions);
  ASSERT_EQ(near.tier, LookupTier::Nearest) << near.explain();
  EXPECT_EQ(near.entry->family, "direct_tiled") << near.explain();

  // And this device's own exact entry comes first of all.
  db.insert(entry(kH100, kLayer, 2.0, 32, "direct_tiled", 1));
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).tier, LookupTier::Exact);
}

TEST_F(TuningDbTest, TheSameChipThroughTheOtherKernelBackendIsAFallback) {
  // The H200's entry measured through CUDA serves the same H200 through NVIDIA's OpenCL (its vendor string and
  // driver differ), as the architecture tier; another chip through the other backend does not.
  const DeviceInfo h200_opencl = gpu("NVIDIA H200", "sm_90", "NVIDIA Corporation", "580.159.04", BackendKind::OpenCL);
  TuningDatabase db(file_);
  db.insert(entry(gpu("NVIDIA H200", "sm_90", "NVIDIA", "13.0"), kLayer, 0.5, 128));
  const LookupResult carried = db.lookup(kLayer, h200_opencl, kVersions);
  ASSERT_EQ(carried.tier, LookupTier::Architecture) << carried.explain();
  EXPECT_TRUE(carried.other_backend);
  EXPECT_EQ(carried.parameters.at("TILE_M"), 128);
  EXPECT_TRUE(contains(carried.explain(), "tuned on NVIDIA H200 through cuda (same chip)")) << carried.explain();

  TuningDatabase other(dir_ / "other.json");
  other.insert(entry(kH100, kLayer, 0.5, 128));
  EXPECT_EQ(other.lookup(kLayer, h200_opencl, kVersions).tier, LookupTier::BuiltInDefault);
  // Through the same backend an entry is never marked as carried from the other.
  EXPECT_FALSE(db.lookup(kLayer, kH200, kVersions).other_backend);
}

TEST_F(TuningDbTest, CpuEntriesStayOnTheirCpu) {
  // The CPU backend's fingerprint holds the model, the ISA its kernels run, the threads and the caches; an entry
  // serves only the very same CPU, never one of the same vendor, model name or architecture text.
  const DeviceInfo here = gpu("Intel(R) Xeon(R) Processor", "avx512, 2 threads, L1d 48 KiB, L2 2 MiB, L3 260 MiB",
                              "GenuineIntel", "n/a", BackendKind::Cpu);
  const KernelVersions hashes{{"cpu_blocked", 1}};
  TuningDatabase db(file_);
  db.insert(entry(here, kLayer, 0.5, 16, "cpu_blocked", 1));
  EXPECT_EQ(db.lookup(kLayer, here, hashes).tier, LookupTier::Exact);
  DeviceInfo forced_avx2 = here;
  forced_avx2.architecture = "avx2, 2 threads, L1d 48 KiB, L2 2 MiB, L3 260 MiB";
  DeviceInfo more_threads = here;
  more_threads.architecture = "avx512, 8 threads, L1d 48 KiB, L2 2 MiB, L3 260 MiB";
  DeviceInfo other_model = here;
  other_model.name = "Intel(R) Core(TM) i7-1185G7";
  for (const DeviceInfo& other : {forced_avx2, more_threads, other_model}) {
    const LookupResult r = db.lookup(kLayer, other, hashes);
    EXPECT_EQ(r.tier, LookupTier::BuiltInDefault) << other.name << " " << other.architecture << ": " << r.explain();
  }
}

TEST_F(TuningDbTest, BuiltInDefaultWhenNothingMatchesAndOtherFamiliesAreIgnored) {
  TuningDatabase db(file_);
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).tier, LookupTier::BuiltInDefault);
  db.insert(entry(kH100, kLayer, 0.5, 128, "winograd", 1));  // a family the caller cannot run
  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(r.tier, LookupTier::BuiltInDefault);
  EXPECT_TRUE(r.stale.empty());
  // Among the families asked for, the fastest exact entry wins.
  db.insert(entry(kH100, kLayer, 0.7, 16, "direct_tiled", 1));
  db.insert(entry(kH100, kLayer, 0.6, 32));
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).entry->family, "implicit_gemm");
}

TEST_F(TuningDbTest, StaleBySourceHashIsReportedAndNotTrusted) {
  TuningDatabase db(file_);
  db.insert(entry(kH100, kLayer, 0.5, 128, "implicit_gemm", 1));
  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(r.tier, LookupTier::BuiltInDefault);
  ASSERT_EQ(r.stale.size(), 1u);
  EXPECT_EQ(r.stale.front().reason, "kernel version changed: entry measured with version 1, now 2");
  EXPECT_TRUE(contains(r.explain(), "1 stale entry ignored")) << r.explain();

  // With a fresh entry for a nearby shape, that answers and the stale exact one is still reported.
  db.insert(entry(kH100, problem("N=2,C=64,H=32,W=32,K=64,R=3,S=3,pad=1"), 0.9, 32));
  const LookupResult nearest = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(nearest.tier, LookupTier::Nearest);
  EXPECT_EQ(nearest.stale.size(), 1u);
  // A stale entry does not serve other devices either.
  EXPECT_EQ(db.lookup(kLayer, kH200, kVersions).stale.size(), 1u);
}

TEST_F(TuningDbTest, StaleByDriverIsReportedAndNotUsedAsAFallback) {
  TuningDatabase db(file_);
  db.insert(entry(gpu(kH100.name, "sm_90", kH100.vendor, "535.104"), kLayer, 0.5, 128));
  const LookupResult r = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(r.tier, LookupTier::BuiltInDefault) << r.explain();
  ASSERT_EQ(r.stale.size(), 1u);
  EXPECT_EQ(r.stale.front().reason, "driver changed: entry measured with 535.104, now 550.54");
  // The same entry is a fine architecture fallback for another sm_90 device: its driver is its own business.
  EXPECT_EQ(db.lookup(kLayer, kH200, kVersions).tier, LookupTier::Architecture);
}

TEST_F(TuningDbTest, InsertKeepsTheFastestPerKey) {
  TuningDatabase db(file_);
  EXPECT_EQ(db.insert(entry(kH100, kLayer, 2.0, 8)), InsertOutcome::Added);
  EXPECT_EQ(db.insert(entry(kH100, kLayer, 1.0, 16)), InsertOutcome::Replaced);
  EXPECT_EQ(db.insert(entry(kH100, kLayer, 3.0, 32)), InsertOutcome::KeptExisting);
  EXPECT_EQ(db.user_entry_count(), 1u);
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).entry->parameters.at("TILE_M"), 16);
  // Another kernel version or driver is another key: the stale one stays until pruned.
  EXPECT_EQ(db.insert(entry(kH100, kLayer, 5.0, 8, "implicit_gemm", 1)), InsertOutcome::Added);
  EXPECT_EQ(db.user_entry_count(), 2u);

  TuningEntry bad = entry(kH100, kLayer, 1.0);
  bad.time_ms = 0;
  EXPECT_THROW(db.insert(bad), InvalidArgument);
}

TEST_F(TuningDbTest, SaveReplacesTheFileWholeAndLeavesNoTemporaryFiles) {
  TuningDatabase db(file_);
  db.insert(entry(kH100, kLayer, 1.0));
  db.save();
  const std::string first = read_file(file_);
  db.insert(entry(kH100, problem("N=4,C=3,H=224,K=64,R=11,stride=4,pad=2"), 3.0));
  db.save();
  const std::string second = read_file(file_);
  EXPECT_NE(first, second);
  EXPECT_TRUE(contains(second, "\"format\": \"convtune-tuning-db\""));
  EXPECT_EQ(second.back(), '\n');
  // No temporary file stays; the lock file does (removing it would let two writers lock different files).
  EXPECT_EQ(files_in(file_.parent_path()), (std::vector<std::string>{"tuning.json", "tuning.json.lock"}));
  EXPECT_EQ(TuningDatabase(file_).user_entry_count(), 2u);
  db.save();  // saving again changes nothing
  EXPECT_EQ(read_file(file_), second);
}

TEST_F(TuningDbTest, TruncatedFileIsReportedWithItsPathAndNeverOverwritten) {
  {
    TuningDatabase db(file_);
    db.insert(entry(kH100, kLayer, 1.0));
    db.save();
  }
  const std::string whole = read_file(file_);
  const std::string truncated = whole.substr(0, whole.size() / 2);
  write(file_, truncated);

  TuningDatabase db(file_);
  EXPECT_TRUE(contains(db.user_file_error(), file_.string())) << db.user_file_error();
  EXPECT_TRUE(contains(db.user_file_error(), "is not valid JSON: line ")) << db.user_file_error();
  EXPECT_EQ(db.user_entry_count(), 0u);
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).tier, LookupTier::BuiltInDefault);  // lookups go on

  db.insert(entry(kH100, kLayer, 0.5));
  try {
    db.save();
    FAIL() << "expected save to refuse";
  } catch (const TuningDatabaseError& e) {
    EXPECT_EQ(e.path(), file_);
    EXPECT_TRUE(contains(e.what(), "refusing to save the tuning database")) << e.what();
    EXPECT_TRUE(contains(e.what(), "fix or remove " + file_.string())) << e.what();
  }
  EXPECT_EQ(read_file(file_), truncated);  // untouched, byte for byte
  EXPECT_EQ(files_in(file_.parent_path()), (std::vector<std::string>{"tuning.json", "tuning.json.lock"}));

  // Once the user removes it, saving works again.
  fs::remove(file_);
  db.save();
  EXPECT_EQ(TuningDatabase(file_).user_entry_count(), 1u);
}

TEST_F(TuningDbTest, WrongTypesNameTheFileTheEntryAndTheField) {
  TuningDatabase good(file_);
  good.insert(entry(kH100, kLayer, 1.0));
  good.save();
  const std::string text = read_file(file_);

  auto error_for = [&](const std::string& from, const std::string& to) {
    std::string broken = text;
    const size_t at = broken.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    broken.replace(at, from.size(), to);
    write(file_, broken);
    TuningDatabase db(file_);
    db.insert(entry(kH200, kLayer, 1.0));
    EXPECT_THROW(db.save(), TuningDatabaseError);
    EXPECT_EQ(read_file(file_), broken);
    // A damaged entry is left out and named (the file's structure, the whole file); either way a writer refuses.
    EXPECT_FALSE(db.save_refusal().empty());
    return db.damaged_entries().empty() ? db.user_file_error() : db.damaged_entries().front();
  };
  const std::string where = "tuning database " + file_.string() + ": entry 0 (implicit_gemm " + kLayer.to_string() + ")";
  EXPECT_EQ(error_for("\"time_ms\": 1.0", "\"time_ms\": \"fast\""),
            where + ": field 'time_ms' must be a number, found \"fast\"");
  EXPECT_EQ(error_for("\"TILE_M\": 64", "\"TILE_M\": 6.5"),
            where + ": field 'parameters.TILE_M' must be a 64-bit integer, found 6.5");
  EXPECT_EQ(error_for("\"C\": 64", "\"C\": 32"), where + ": field 'shape.C' is 32 but the problem says 64");
  EXPECT_TRUE(contains(error_for("\"driver_version\": \"550.54\"", "\"driver_version\": 550"),
                       "field 'device.driver_version' must be a string, found 550"));
  EXPECT_TRUE(contains(error_for("\"entries\": [", "\"entries\": \"none\", \"moved\": ["),
                       "field 'entries' must be an array, found string"));
  EXPECT_TRUE(contains(error_for("\"format_version\": 1", "\"format_version\": 7"),
                       "format_version 7 is not supported"));
  // Hostile values: beyond int64 (once wrapped or converted with undefined behaviour), names that would become
  // compiler options, fields beyond the kernels' 32-bit indexing.
  EXPECT_TRUE(contains(error_for("\"TILE_M\": 64", "\"TILE_M\": 6.4e21"),
                       "field 'parameters.TILE_M' must be a 64-bit integer, found 6.4e+21"));
  EXPECT_TRUE(contains(error_for("\"TILE_M\": 64", "\"TILE_M\": 18446744073709551615"),
                       "must be a 64-bit integer, found 18446744073709551615"));
  EXPECT_TRUE(contains(error_for("\"TILE_M\": 64", "\"TILE_M -include x\": 64"),
                       "has the name \"TILE_M -include x\": expected an identifier"));
  EXPECT_TRUE(contains(error_for("pad=1,", "pad=9223372036854775807,"), "pad_h=9223372036854775807 is too large"));
}

TEST_F(TuningDbTest, AFixedFileIsFoldedInOnSave) {
  write(file_, "{ not json");
  TuningDatabase db(file_);
  ASSERT_FALSE(db.user_file_error().empty());
  db.insert(entry(kH100, kLayer, 1.0));
  // The user repairs the file (here: another process's valid database) before saving again.
  TuningDatabase other(dir_ / "other.json");
  other.insert(entry(kA100, kLayer, 2.0));
  other.save();
  fs::copy_file(dir_ / "other.json", file_, fs::copy_options::overwrite_existing);
  db.save();
  EXPECT_TRUE(db.user_file_error().empty());
  EXPECT_EQ(TuningDatabase(file_).user_entry_count(), 2u);
}

TEST_F(TuningDbTest, ConcurrentSavesDoNotEraseEachOther) {
  TuningDatabase first(file_), second(file_);
  first.insert(entry(kH100, kLayer, 1.0));
  second.insert(entry(kA100, kLayer, 2.0));
  first.save();
  second.save();
  EXPECT_EQ(TuningDatabase(file_).user_entry_count(), 2u);
}

TEST_F(TuningDbTest, MergeKeepsTheFasterPerKey) {
  TuningDatabase mine(file_);
  mine.insert(entry(kH100, kLayer, 1.0, 32));
  mine.insert(entry(kH100, kLayer.with_direction(Direction::BackwardFilter), 1.0, 32));
  TuningDatabase theirs(dir_ / "theirs.json");
  theirs.insert(entry(kH100, kLayer, 0.5, 16));                                           // faster: replaces
  theirs.insert(entry(kH100, kLayer.with_direction(Direction::BackwardFilter), 4.0, 16));  // slower: ours kept
  theirs.insert(entry(kA100, kLayer, 2.0, 64));                                           // new
  theirs.save();

  const MergeCounts counts = mine.merge_file(dir_ / "theirs.json");
  EXPECT_EQ(counts.added, 1u);
  EXPECT_EQ(counts.replaced, 1u);
  EXPECT_EQ(counts.kept, 1u);
  EXPECT_EQ(mine.user_entry_count(), 3u);
  EXPECT_EQ(mine.lookup(kLayer, kH100, kVersions).entry->parameters.at("TILE_M"), 16);
  EXPECT_EQ(mine.lookup(kLayer.with_direction(Direction::BackwardFilter), kH100, kVersions).entry->parameters.at("TILE_M"), 32);

  // A damaged entry is left out, named; the file's sound entries merge.
  const std::string sound = read_file(dir_ / "theirs.json");
  write(dir_ / "broken.json", std::string(sound).replace(sound.find("\"entries\": ["), 12, "\"entries\": [{}, "));
  const MergeCounts partly = mine.merge_file(dir_ / "broken.json");
  ASSERT_EQ(partly.damaged.size(), 1u);
  EXPECT_TRUE(contains(partly.damaged[0], (dir_ / "broken.json").string() + ": entry 0: field 'family' is missing"))
      << partly.damaged[0];
  EXPECT_EQ(partly.kept, 3u);
  // A file whose structure is wrong is refused whole.
  write(dir_ / "broken.json", "{\"format\": \"convtune-tuning-db\", \"format_version\": 1, \"entries\": {}}");
  try {
    mine.merge_file(dir_ / "broken.json");
    FAIL() << "expected an error";
  } catch (const TuningDatabaseError& e) {
    EXPECT_TRUE(contains(e.what(), (dir_ / "broken.json").string() + ": field 'entries' must be an array"))
        << e.what();
  }
  EXPECT_EQ(mine.user_entry_count(), 3u);
}

TEST_F(TuningDbTest, PruneRemovesStaleEntriesAndSaveDoesNotBringThemBack) {
  TuningDatabase db(file_);
  db.insert(entry(kH100, kLayer, 1.0));                                                    // fresh
  db.insert(entry(kH100, kLayer, 0.9, 16, "implicit_gemm", 1));                    // older kernel version
  db.insert(entry(gpu(kH100.name, "sm_90", kH100.vendor, "535.104"), kLayer, 0.8));        // old driver
  db.insert(entry(kRadeon, kLayer, 3.0, 64, "direct_tiled", 1));                     // another machine's
  db.insert(entry(kA100, kLayer, 2.0, 64, "winograd", 1));                            // family not asked about
  db.save();

  const std::vector<DeviceInfo> here{kH100};
  EXPECT_EQ(db.prune_stale(here, kVersions), 2u);
  EXPECT_EQ(db.user_entry_count(), 3u);
  db.save();
  TuningDatabase reloaded(file_);
  EXPECT_EQ(reloaded.user_entry_count(), 3u);
  EXPECT_TRUE(reloaded.lookup(kLayer, kH100, kVersions).stale.empty());

  EXPECT_EQ(reloaded.prune_device(kRadeon.name), 1u);
  EXPECT_EQ(reloaded.prune_device(kA100.fingerprint()), 1u);
  EXPECT_EQ(reloaded.user_entry_count(), 1u);
}

TEST_F(TuningDbTest, ShippedDefaultsAreReadOnlyAndRankBehindTheUsersOwn) {
  const fs::path shipped = dir_ / "shipped";
  fs::create_directories(shipped);
  {
    TuningDatabase maker(shipped / "nvidia.json");
    maker.insert(entry(kH100, kLayer, 1.0, 128));
    maker.insert(entry(kA100, kLayer, 1.0, 16));
    maker.save();
  }
  const std::string shipped_text = read_file(shipped / "nvidia.json");
  write(shipped / "README.txt", "not a database");

  TuningDatabase db(file_, shipped);
  EXPECT_EQ(db.shipped_files(), std::vector<fs::path>{shipped / "nvidia.json"});
  EXPECT_EQ(db.shipped_entry_count(), 2u);
  const LookupResult from_shipped = db.lookup(kLayer, kH100, kVersions);
  EXPECT_EQ(from_shipped.tier, LookupTier::Exact);
  EXPECT_EQ(from_shipped.origin, (shipped / "nvidia.json").string());

  db.insert(entry(kH100, kLayer, 1.0, 16));  // same time: the user's own wins
  EXPECT_EQ(db.lookup(kLayer, kH100, kVersions).entry->parameters.at("TILE_M"), 16);
  db.prune_device(kA100.name);  // touches user entries only
  db.save();
  EXPECT_EQ(read_file(shipped / "nvidia.json"), shipped_text);
  EXPECT_EQ(TuningDatabase(file_).user_entry_count(), 1u);

  EXPECT_EQ(db.list({.family = "implicit_gemm"}).size(), 3u);
  EXPECT_EQ(db.list({.device = "A100"}).size(), 1u);
  EXPECT_EQ(db.list({.include_shipped = false}).size(), 1u);
  EXPECT_EQ(db.list({.direction = Direction::BackwardData}).size(), 0u);

  write(shipped / "broken.json", "[]");
  try {
    TuningDatabase broken(file_, shipped);
    FAIL() << "expected an error";
  } catch (const TuningDatabaseError& e) {
    EXPECT_EQ(e.path(), shipped / "broken.json");
    EXPECT_TRUE(contains(e.what(), (shipped / "broken.json").string())) << e.what();
  }
  EXPECT_THROW(TuningDatabase(file_, dir_ / "no-such-dir"), TuningDatabaseError);
}

TEST_F(TuningDbTest, ListAndShowText) {
  TuningDatabase db(file_);
  db.insert(entry(kH100, kLayer, 0.5, 128));
  db.insert(entry(kA100, kLayer.with_direction(Direction::BackwardData), 1.25, 64));
  const auto listed = db.list();
  const std::string table = format_entry_table(listed);
  EXPECT_TRUE(contains(table, "#  device")) << table;
  EXPECT_TRUE(contains(table, "NVIDIA H100 80GB HBM3")) << table;
  EXPECT_TRUE(contains(table, "bwd-data")) << table;
  EXPECT_TRUE(contains(table, "1.25")) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);
  const std::string details = format_entry_details(listed.front());
  EXPECT_TRUE(contains(details, "parameters")) << details;
  EXPECT_TRUE(contains(details, "TILE_M=")) << details;
  EXPECT_TRUE(contains(details, "user database")) << details;
}

TEST(TuningDbLocation, EnvironmentDecidesTheUserFile) {
  auto saved = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto db = saved("CONVTUNE_TUNING_DB"), xdg = saved("XDG_DATA_HOME"), home = saved("HOME");
  setenv("HOME", "/home/someone", 1);
  unsetenv("CONVTUNE_TUNING_DB");
  unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(TuningDatabase::default_user_file(), fs::path("/home/someone/.local/share/convtune/tuning.json"));
  setenv("XDG_DATA_HOME", "relative/ignored", 1);
  EXPECT_EQ(TuningDatabase::default_user_file(), fs::path("/home/someone/.local/share/convtune/tuning.json"));
  setenv("XDG_DATA_HOME", "/data", 1);
  EXPECT_EQ(TuningDatabase::default_user_file(), fs::path("/data/convtune/tuning.json"));
  setenv("CONVTUNE_TUNING_DB", "/tmp/my-tuning.json", 1);
  EXPECT_EQ(TuningDatabase::default_user_file(), fs::path("/tmp/my-tuning.json"));
  auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) setenv(name, v->c_str(), 1);
    else unsetenv(name);
  };
  restore("CONVTUNE_TUNING_DB", db);
  restore("XDG_DATA_HOME", xdg);
  restore("HOME", home);
}

// Entries are keyed by math mode: a tf32 entry is never used for fp32 or 3xtf32 (not even as the nearest shape,
// which would carry a tensor-core family's parameters to a problem it refuses), and survives a save and reload.
TEST_F(TuningDbTest, EntriesAreKeyedByMathMode) {
  const KernelVersions hashes{{"implicit_gemm", 2}, {"implicit_gemm_tc", 1}};
  ConvProblem tf32 = kLayer, split = kLayer;
  tf32.math = MathMode::TF32, split.math = MathMode::TF32x3;
  {
    TuningDatabase db(file_);
    db.insert(entry(kH100, tf32, 0.1, 128, "implicit_gemm_tc", 1));
    db.save();
  }
  TuningDatabase db(file_);
  const LookupResult found = db.lookup(tf32, kH100, hashes);
  ASSERT_EQ(found.tier, LookupTier::Exact) << found.explain();
  EXPECT_EQ(found.entry->family, "implicit_gemm_tc");
  EXPECT_EQ(found.entry->problem.math(), MathMode::TF32);
  EXPECT_EQ(db.lookup(kLayer, kH100, hashes).tier, LookupTier::BuiltInDefault);
  EXPECT_EQ(db.lookup(split, kH100, hashes).tier, LookupTier::BuiltInDefault);
  ConvProblem nearby = tf32;
  nearby.n = 2;
  EXPECT_EQ(db.lookup(nearby, kH100, hashes).tier, LookupTier::Nearest);
}

// An FP32 entry serves tf32 and 3xtf32 problems (FP32 is at least as accurate, and the FP32 families compute those
// modes with the same kernels), competing by speed with the tensor-core entries; never the other way round.
TEST_F(TuningDbTest, Fp32EntriesServeTensorCoreModesNotTheReverse) {
  const KernelVersions hashes{{"implicit_gemm", 2}, {"implicit_gemm_tc", 1}};
  ConvProblem tf32 = kLayer, split = kLayer;
  tf32.math = MathMode::TF32, split.math = MathMode::TF32x3;
  TuningDatabase db(file_);
  db.insert(entry(kH100, kLayer, 0.2, 64, "implicit_gemm", 2));
  for (const ConvProblem& asked : {tf32, split}) {
    const LookupResult found = db.lookup(asked, kH100, hashes);
    ASSERT_EQ(found.tier, LookupTier::Exact) << found.explain();
    EXPECT_EQ(found.entry->family, "implicit_gemm");
  }
  ConvProblem nearby = tf32;
  nearby.n = 2;
  EXPECT_EQ(db.lookup(nearby, kH100, hashes).tier, LookupTier::Nearest);
  db.insert(entry(kH100, tf32, 0.1, 128, "implicit_gemm_tc", 1));  // faster: wins under tf32
  EXPECT_EQ(db.lookup(tf32, kH100, hashes).entry->family, "implicit_gemm_tc");
  EXPECT_EQ(db.lookup(split, kH100, hashes).entry->family, "implicit_gemm");
  EXPECT_EQ(db.lookup(kLayer, kH100, hashes).entry->family, "implicit_gemm");
}

// fp32-fast is a key of its own: an fp32 entry serves it (fp32's variants are all within its bound), an fp32-fast
// entry (which may hold a variant fp32 refuses, Winograd's alpha 8) serves only fp32-fast; fp32 keys are unchanged.
TEST_F(TuningDbTest, Fp32FastEntriesServeOnlyFp32Fast) {
  const KernelVersions hashes{{"implicit_gemm", 2}, {"winograd", 1}};
  ConvProblem fast = kLayer;
  fast.math = MathMode::FP32Fast;
  {
    TuningDatabase db(file_);
    db.insert(entry(kH100, kLayer, 0.2, 64, "implicit_gemm", 2));
    db.insert(entry(kH100, fast, 0.1, 64, "winograd", 1));
    db.save();
  }
  TuningDatabase db(file_);
  EXPECT_EQ(db.user_entry_count(), 2u);
  const LookupResult asked_fast = db.lookup(fast, kH100, hashes);
  ASSERT_EQ(asked_fast.tier, LookupTier::Exact) << asked_fast.explain();
  EXPECT_EQ(asked_fast.entry->family, "winograd");  // the faster of the fp32 and the fp32-fast entry
  EXPECT_EQ(asked_fast.entry->problem.math(), MathMode::FP32Fast);
  for (MathMode mode : {MathMode::FP32, MathMode::TF32, MathMode::TF32x3}) {
    ConvProblem asked = kLayer;
    asked.math = mode;
    const LookupResult found = db.lookup(asked, kH100, hashes);
    ASSERT_TRUE(found.entry) << to_string(mode);
    EXPECT_EQ(found.entry->family, "implicit_gemm") << to_string(mode);
  }
  std::map<std::string, std::string> keys;
  for (const ListedEntry& l : db.list()) keys[l.entry.family] = l.entry.key();
  EXPECT_NE(keys.at("winograd").find("math=fp32-fast"), std::string::npos) << keys.at("winograd");
  EXPECT_EQ(keys.at("implicit_gemm").find("fp32-fast"), std::string::npos) << keys.at("implicit_gemm");
}

// The reliability issue's databases (tests/data/repro): one crashed every command (SIGSEGV), two ended them with
// "unexpected error: number overflow". Each is now a named error: the file, the place and what was expected.
TEST_F(TuningDbTest, HostileFilesAreNamedErrorsThatWritersRefuseAndLeaveUntouched) {
  const fs::path repro = fs::path(CONVTUNE_TEST_DATA_DIR) / "repro";
  const std::pair<const char*, std::vector<std::string>> cases[] = {
      {"tuningdb-deep-nesting-stack-overflow.json", {"(at entries[0][0]", "nested deeper than 64 levels"}},
      {"tuningdb-1e400-uncaught-exit3.json",
       {"line 39, column 18 (at entries[0].gflops)", "number 1e400 is out of range: expected a finite number"}},
      {"tuningdb-number-overflow-uncaught.json", {"(at format)", "is out of range"}},
  };
  for (const auto& [name, phrases] : cases) {
    fs::copy_file(repro / name, file_, fs::copy_options::overwrite_existing);
    const std::string original = read_file(file_);
    TuningDatabase db(file_);
    EXPECT_EQ(db.user_entry_count(), 0u) << name;
    EXPECT_TRUE(contains(db.user_file_error(), file_.string())) << db.user_file_error();
    for (const std::string& phrase : phrases) EXPECT_TRUE(contains(db.user_file_error(), phrase)) << db.user_file_error();
    db.insert(entry(kH100, kLayer, 1.0));
    EXPECT_THROW(db.save(), TuningDatabaseError) << name;
    EXPECT_EQ(read_file(file_), original) << name;
  }
}

TEST_F(TuningDbTest, LookupsWarnOnceAndGoOnWithoutADamagedFile) {
  write(file_, "{ not json");
  const fs::path shipped = dir_ / "shipped";
  {
    TuningDatabase maker(shipped / "good.json");
    fs::create_directories(shipped);
    maker.insert(entry(kH100, kLayer, 1.0, 128));
    maker.save();
  }
  write(shipped / "bad.json", "[[[[");
  testing::internal::CaptureStderr();
  const TuningDatabase first = TuningDatabase::open_for_lookups(file_, shipped);
  const TuningDatabase second = TuningDatabase::open_for_lookups(file_, shipped);
  const std::string warnings = testing::internal::GetCapturedStderr();
  // One warning per damaged file, naming it; the good shipped file still serves lookups.
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 2) << warnings;
  EXPECT_TRUE(contains(warnings, file_.string() + " is not valid JSON")) << warnings;
  EXPECT_TRUE(contains(warnings, (shipped / "bad.json").string())) << warnings;
  EXPECT_EQ(second.lookup(kLayer, kH100, kVersions).entry->parameters.at("TILE_M"), 128);
  // A writer still refuses the damaged shipped file: that is a broken install.
  EXPECT_THROW(TuningDatabase(file_, shipped), TuningDatabaseError);
}

// Processes that each insert their own entries and save after every one, all at once into one database: the
// flock around read-merge-write loses nothing (without it, saves that overlap drop each other's entries).
TEST_F(TuningDbTest, ConcurrentProcessesSavingLoseNothing) {
  {
    TuningDatabase db(file_);
    for (int i = 0; i < 2000; ++i) db.insert(entry(kA100, problem(fmt::format("N={},C=8,H=16,K=8,R=3", i + 1)), 1.0));
    db.save();
  }
  constexpr int kProcesses = 4, kEach = 25;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        TuningDatabase db(file_);
        for (int i = 0; i < kEach; ++i) {
          db.insert(entry(kH100, problem(fmt::format("N={},C={},H=16,K=8,R=3", i + 1, p + 1)), 1.0));
          db.save();
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "child %d: %s\n", p, e.what());
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(TuningDatabase(file_).user_entry_count(), 2000u + kProcesses * kEach);
}

TEST_F(TuningDbTest, SaveRemovesTemporaryFilesOfDeadWritersOnly) {
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale = fmt::format("tuning.json.tmp.{}.3", dead);
  const std::string live = fmt::format("tuning.json.tmp.{}.9", static_cast<long>(getpid()));
  for (const std::string& name : {stale, live, std::string("tuning.json.tmp.x.1"), std::string("other.tmp.1.1")})
    write(file_.parent_path() / name, "{ half-writ");
  TuningDatabase db(file_);
  EXPECT_TRUE(db.user_file_error().empty());  // temporary files are never read
  db.insert(entry(kH100, kLayer, 1.0));
  db.save();
  const auto names = files_in(file_.parent_path());
  EXPECT_EQ(std::count(names.begin(), names.end(), stale), 0);
  for (const std::string& kept : {live, std::string("tuning.json.tmp.x.1"), std::string("other.tmp.1.1")})
    EXPECT_EQ(std::count(names.begin(), names.end(), kept), 1) << kept;
}

// An entry one process removes stays removed when another process that had read it saves its own changes: the
// tuner prunes its own stored entry when today's plan wins the second opinion, and a concurrent tuner used to write
// it back (tests/cli/concurrent_tune.sh found 11 entries where its three tuners stored 9).
TEST_F(TuningDbTest, AnEntryAnotherProcessRemovedIsNotWrittenBack) {
  TuningDatabase first(file_), second(file_);
  first.insert(entry(kH100, kLayer, 1.0));
  first.save();
  second.insert(entry(kA100, kLayer, 2.0));
  second.save();  // reads first's entry, and holds it from now on
  EXPECT_EQ(second.user_entry_count(), 2u);
  EXPECT_EQ(first.prune_device(kH100.name), 1u);
  first.save();
  second.insert(entry(kRadeon, kLayer, 3.0, 64, "direct_tiled", 1));
  second.save();
  TuningDatabase reloaded(file_);
  EXPECT_EQ(reloaded.user_entry_count(), 2u);
  EXPECT_TRUE(reloaded.list(EntryFilter{.device = kH100.name}).empty());
  EXPECT_EQ(second.user_entry_count(), 2u);
}

// The second round's databases (tests/data/repro, issue 55): entries a search could never have stored were listed,
// merged and run under another value (COLS=-1 ran as COLS=1, labelled exact), and a second "entries" key made every
// entry vanish. A damaged entry is now left out and named (file, entry, field); the rest of the file serves; a
// writer refuses the file and leaves it as it was; a file whose structure is in doubt is refused whole.
TEST_F(TuningDbTest, EntriesOutsideTheirFamilysSearchSpaceAreLeftOutAndNamed) {
  const fs::path repro = fs::path(CONVTUNE_TEST_DATA_DIR) / "repro";
  const std::string sound = read_file(repro / "db-valid-for-symlink.json");
  {
    write(file_, sound);
    const TuningDatabase db(file_);
    EXPECT_EQ(db.user_entry_count(), 2u);
    EXPECT_TRUE(db.damaged_entries().empty()) << db.damaged_entries().front();
    EXPECT_EQ(db.save_refusal(), "");
  }
  const std::string where = "tuning database " + file_.string() + ": entry ";
  auto check_damaged = [&](const std::string& text, size_t sound_entries, const std::string& phrase) {
    write(file_, text);
    TuningDatabase db(file_);
    EXPECT_EQ(db.user_file_error(), "");
    EXPECT_EQ(db.user_entry_count(), sound_entries) << phrase;
    ASSERT_EQ(db.damaged_entries().size(), 1u) << phrase;
    EXPECT_TRUE(contains(db.damaged_entries()[0], where)) << db.damaged_entries()[0];
    EXPECT_TRUE(contains(db.damaged_entries()[0], phrase)) << db.damaged_entries()[0];
    EXPECT_TRUE(contains(db.save_refusal(), phrase)) << db.save_refusal();
    db.insert(entry(kH100, kLayer, 1.0));
    EXPECT_THROW(db.save(), TuningDatabaseError) << phrase;
    EXPECT_EQ(read_file(file_), text) << phrase;
  };
  check_damaged(read_file(repro / "db-unknown-family-accepted.json"), 0,
                "entry 0 (x N=1,C=4,H=8,W=8,K=4,R=3,S=3,stride=1,pad=1,dilation=1,groups=1,dir=fwd,type=fp32,"
                "math=fp32): field 'family' is \"x\": no kernel family of this convtune has that name");
  check_damaged(read_file(repro / "db-param-out-of-range-accepted.json"), 0,
                "field 'parameters.COLS' is -1: expected one of 1, 2, 3, 4");
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = sound;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  // The attack's other values of COLS, and the other fields the issue names.
  for (const char* cols : {"1000000000", "4294967300", "-9223372036854775808", "9223372036854775807", "0"})
    check_damaged(edited("\"COLS\": 4", std::string("\"COLS\": ") + cols), 1,
                  std::string("field 'parameters.COLS' is ") + cols + ": expected one of");
  check_damaged(edited("\"gflops\": 20.434589800443458", "\"gflops\": 0"), 1, "field 'gflops' must be a positive rate");
  check_damaged(edited("\"gflops\": 20.434589800443458", "\"gflops\": -20.4"), 1, "field 'gflops' must be a positive rate");
  check_damaged(edited("\"time_ms\": 0.000902", "\"time_ms\": -0.5"), 1, "field 'time_ms' must be a positive time");
  check_damaged(edited("\"W\": 8,", ""), 1, "field 'shape.W' is missing");
  check_damaged(edited("\"THREADS\": 1", "\"THREADS\": 1, \"THREADS\": 2"), 1,
                "entry 1: the key \"THREADS\" appears twice (at entries[1].parameters): expected each key once");
  check_damaged(edited("\"family\": \"cpu_direct\"", "\"family\": \"cpu_gemm\""), 1,
                "field 'family' is cpu_gemm, which computes matrix products, but the problem is a convolution");
  // A second "entries" key: the file's structure is in doubt, the whole file refused and never rewritten.
  const std::string twice = read_file(repro / "db-dup-keys-drops-entries.json");
  write(file_, twice);
  TuningDatabase db(file_);
  EXPECT_EQ(db.user_entry_count(), 0u);
  EXPECT_TRUE(contains(db.user_file_error(), "the key \"entries\" appears twice at the top level")) << db.user_file_error();
  db.insert(entry(kH100, kLayer, 1.0));
  EXPECT_THROW(db.save(), TuningDatabaseError);
  EXPECT_EQ(read_file(file_), twice);
  // Lookups never run a damaged entry under another value: the COLS=-1 entry is not there to find.
  // (The reproducer's entries carry the source hash of their day; as today's version 1 they are current but for the
  // damage.)
  std::string out_of_range = read_file(repro / "db-param-out-of-range-accepted.json");
  for (size_t at; (at = out_of_range.find("\"source_hash\": \"")) != std::string::npos;)
    out_of_range.replace(at, out_of_range.find('"', at + 15) + 1 - at, "\"kernel_version\": 1");
  write(file_, out_of_range);
  const TuningDatabase lookups(file_);
  DeviceInfo cpu_device;
  cpu_device.backend = BackendKind::Cpu;
  cpu_device.name = "AMD EPYC";
  cpu_device.vendor = "AuthenticAMD";
  cpu_device.architecture = "avx512, 2 threads, L1d 32 KiB, L2 1 MiB, L3 32 MiB";
  cpu_device.driver_version = "n/a";
  const auto found = lookups.lookup(parse_any_problem("N=1,C=4,H=8,K=4,R=3,pad=1"), cpu_device,
                                    {{"cpu_blocked", 1}});
  EXPECT_FALSE(found.entry.has_value());
}
