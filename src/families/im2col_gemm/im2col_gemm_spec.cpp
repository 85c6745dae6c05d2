// The im2col_gemm family (seed 003): an unroll kernel writes a chunk of the batch as a column matrix, convtune's
// own tiled GEMM multiplies it with the filters; col2im gathers backward-data's columns. Parameters, named
// constraints, support and defaults live here; launches in im2col_gemm_recipe.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/im2col_gemm/im2col_gemm_spec.h"

namespace convtune {

namespace {

using im2col_gemm::column_bytes;
using im2col_gemm::workspace_cap_bytes;

constexpr uint64_t kPortableLocalBytes = 48 * 1024;  // CUDA's static shared memory limit
constexpr int64_t kMaxAccumulators = 64;            // register tile floats per thread, beyond which GPUs spill
constexpr size_t kMinGemmThreads = 64;
constexpr int64_t kRegisterFile = 65536;              // 32-bit registers per multiprocessor
constexpr int64_t kRegistersBesideAccumulators = 32;  // addresses, indices, the a/b register slices
constexpr int64_t kMaxGridY = 65535;                // CUDA's grid limit on axes 1 and 2
const std::vector<int64_t> kBatchChunks = {1, 2, 4, 8, 16, 32, 64, 128, 256};
// The recipe holds two launch steps per chunk of the batch; this bounds its size (and its launch overhead), so a
// huge N is refused up front instead of building millions of steps (N = 2e8 once took 6 GB before the OOM killer).
constexpr int64_t kMaxChunks = 4096;

int64_t get(const ConstraintContext& ctx, const char* name) { return ctx.config.at(name); }

size_t gemm_local_bytes(int64_t tile_m, int64_t tile_n, int64_t tile_k, int64_t padding) {
  return static_cast<size_t>(tile_k * (tile_m + padding) + tile_k * (tile_n + padding)) * sizeof(float);
}

// Some operand loads `width`-float vectors (mirrors W_VECTOR and PQ_VECTOR in im2col_gemm.cl): the filters
// when C/groups*R*S is a multiple of the width, the columns and y when P*Q is.
bool some_operand_vectorizes(const ConvProblem& pb, int64_t width) {
  return (pb.c_per_group() * pb.r * pb.s) % width == 0 || (pb.p() * pb.q()) % width == 0;
}

class Im2colGemmFamily final : public KernelFamily {
 public:
  std::string name() const override { return "im2col_gemm"; }
  std::string description() const override {
    return "seed 003: unroll (im2col) a chunk of the batch into a workspace, then a tiled local-memory GEMM "
           "(col2im gather for backward-data); groups and depthwise in all directions";
  }

  std::string unsupported_reason(const ConvProblem& pb, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (pb.precision != Precision::FP32) {
      return fmt::format("computes FP32 only, not {}", to_string(pb.precision));
    }
    if (epilogue.any()) {
      return fmt::format("computes plain convolutions; epilogue {} is not fused", to_string(epilogue));
    }
    if (pb.groups > kMaxGridY) {
      return fmt::format("groups={} exceeds {} (one GEMM work-group layer per group, CUDA grid axis 2)", pb.groups,
                         kMaxGridY);
    }
    if (column_bytes(pb, 1) > workspace_cap_bytes(device)) {
      return fmt::format("the column matrix of one image ({} bytes) exceeds the workspace cap of {} bytes",
                         column_bytes(pb, 1), workspace_cap_bytes(device));
    }
    int64_t largest_chunk = 1;  // of those whose columns fit the workspace
    for (int64_t c : kBatchChunks)
      if (column_bytes(pb, c) <= workspace_cap_bytes(device)) largest_chunk = c;
    if ((pb.n + largest_chunk - 1) / largest_chunk > kMaxChunks) {
      return fmt::format("N={} needs more than {} chunks of at most {} images (two launch steps each)", pb.n,
                         kMaxChunks, largest_chunk);
    }
    const int64_t largest_m = std::max(pb.k_per_group(), pb.c_per_group() * pb.r * pb.s);
    if ((largest_m + 127) / 128 > kMaxGridY) {
      return fmt::format("GEMM rows ({}) exceed {} tiles of 128 (CUDA grid axis 1)", largest_m, kMaxGridY);
    }
    return {};
  }

  std::vector<Parameter> parameters(const ConvProblem&) const override {
    // Cheap, strongly pruning parameters first: SearchSpace checks each constraint once its inputs are set.
    return {
        {"BATCH_CHUNK", kBatchChunks, "images whose column matrices the workspace holds per unroll + GEMM step"},
        {"UNROLL_THREADS", {64, 128, 256, 512}, "work-group size of the unroll and col2im kernels"},
        {"TILE_M", {16, 32, 64, 128}, "GEMM rows per work-group"},
        {"THREADS_M", {4, 8, 16, 32}, "work-group rows; a thread owns TILE_M/THREADS_M rows"},
        {"TILE_N", {16, 32, 64, 128}, "GEMM columns per work-group"},
        {"THREADS_N", {4, 8, 16, 32}, "work-group columns; a thread owns TILE_N/THREADS_N columns"},
        {"TILE_K", {4, 8, 16, 32}, "GEMM reduction depth per local-memory tile"},
        {"LOCAL_PADDING", {0, 1, 2}, "floats added to each local tile row against bank conflicts"},
        {"VECTOR_WIDTH", {1, 2, 4}, "floats per global load where an operand's layout keeps vectors aligned"},
    };
  }

  std::vector<Constraint> constraints(const ConvProblem&) const override {
    return {
        {"batch chunk at most the batch", {"BATCH_CHUNK"},
         [](const ConstraintContext& c) { return get(c, "BATCH_CHUNK") <= c.problem.n; }},
        {"at most 4096 batch chunks (launch steps)", {"BATCH_CHUNK"},
         [](const ConstraintContext& c) {
           return (c.problem.n + get(c, "BATCH_CHUNK") - 1) / get(c, "BATCH_CHUNK") <= kMaxChunks;
         }},
        {im2col_gemm::kWorkspaceConstraint, {"BATCH_CHUNK"},
         [](const ConstraintContext& c) {
           return column_bytes(c.problem, get(c, "BATCH_CHUNK")) <= workspace_cap_bytes(c.device);
         }},
        {"unroll work-group within the device limit", {"UNROLL_THREADS"},
         [](const ConstraintContext& c) {
           return static_cast<size_t>(get(c, "UNROLL_THREADS")) <= c.device.max_work_group_size;
         }},
        {"GEMM row tiles within the CUDA grid limit", {"TILE_M"},
         [](const ConstraintContext& c) {
           const int64_t m = std::max(c.problem.k_per_group(), c.problem.c_per_group() * c.problem.r * c.problem.s);
           return (m + get(c, "TILE_M") - 1) / get(c, "TILE_M") <= kMaxGridY;
         }},
        {"TILE_M divisible by THREADS_M", {"TILE_M", "THREADS_M"},
         [](const ConstraintContext& c) { return get(c, "TILE_M") % get(c, "THREADS_M") == 0; }},
        {"TILE_N divisible by THREADS_N", {"TILE_N", "THREADS_N"},
         [](const ConstraintContext& c) { return get(c, "TILE_N") % get(c, "THREADS_N") == 0; }},
        {"GEMM threads per work-group within the device limit", {"THREADS_M", "THREADS_N"},
         [](const ConstraintContext& c) {
           return static_cast<size_t>(get(c, "THREADS_M") * get(c, "THREADS_N")) <= c.device.max_work_group_size;
         }},
        // Work-groups of fewer than two warps leave most of a GPU multiprocessor idle (it holds a limited number
        // of work-groups); a device whose limit is lower still gets its largest work-group.
        {"at least 64 GEMM threads per work-group (or the device maximum)", {"THREADS_M", "THREADS_N"},
         [](const ConstraintContext& c) {
           return static_cast<size_t>(get(c, "THREADS_M") * get(c, "THREADS_N")) >=
                  std::min(kMinGemmThreads, std::bit_floor(c.device.max_work_group_size));
         }},
        {"register tile at most 64 accumulators", {"TILE_M", "THREADS_M", "TILE_N", "THREADS_N"},
         [](const ConstraintContext& c) {
           return (get(c, "TILE_M") / get(c, "THREADS_M")) * (get(c, "TILE_N") / get(c, "THREADS_N")) <=
                  kMaxAccumulators;
         }},
        // CUDA launches fail outright when a block needs more registers than a multiprocessor has (64K on every
        // GPU since sm_50); launch bounds make the compiler spill instead. Estimate: accumulators + 32 per thread.
        {"estimated registers per work-group within 64K", {"TILE_M", "THREADS_M", "TILE_N", "THREADS_N"},
         [](const ConstraintContext& c) {
           const int64_t threads = get(c, "THREADS_M") * get(c, "THREADS_N");
           const int64_t accumulators = get(c, "TILE_M") * get(c, "TILE_N") / threads;
           return threads * (accumulators + kRegistersBesideAccumulators) <= kRegisterFile;
         }},
        {"local memory within the device limit and 48 KiB", {"TILE_M", "TILE_N", "TILE_K", "LOCAL_PADDING"},
         [](const ConstraintContext& c) {
           const size_t bytes = gemm_local_bytes(get(c, "TILE_M"), get(c, "TILE_N"), get(c, "TILE_K"),
                                                 get(c, "LOCAL_PADDING"));
           return bytes <= c.device.local_memory_bytes && bytes <= kPortableLocalBytes;
         }},
        {"tiles are multiples of VECTOR_WIDTH", {"TILE_M", "TILE_N", "TILE_K", "VECTOR_WIDTH"},
         [](const ConstraintContext& c) {
           const int64_t v = get(c, "VECTOR_WIDTH");
           return get(c, "TILE_M") % v == 0 && get(c, "TILE_N") % v == 0 && get(c, "TILE_K") % v == 0;
         }},
        {"VECTOR_WIDTH above 1 only where some operand's layout allows it", {"VECTOR_WIDTH"},
         [](const ConstraintContext& c) {
           const int64_t v = get(c, "VECTOR_WIDTH");
           return v == 1 || some_operand_vectorizes(c.problem, v);
         }},
    };
  }

  Config default_config(const ConvProblem& pb, const DeviceInfo& device) const override {
    // The largest chunk that fits: fewer, larger GEMMs. Then the first tile setup the device allows, from
    // 64x64 tiles with 4x4 register tiles down to what a small device still runs.
    int64_t chunk = 1;
    for (int64_t c : kBatchChunks) {
      if (c <= pb.n && column_bytes(pb, c) <= workspace_cap_bytes(device)) chunk = c;
    }
    const std::vector<Config> preferred = {
        {{"TILE_M", 64}, {"TILE_N", 64}, {"TILE_K", 16}, {"THREADS_M", 16}, {"THREADS_N", 16}, {"UNROLL_THREADS", 256}},
        {{"TILE_M", 32}, {"TILE_N", 32}, {"TILE_K", 16}, {"THREADS_M", 8}, {"THREADS_N", 8}, {"UNROLL_THREADS", 64}},
        {{"TILE_M", 16}, {"TILE_N", 16}, {"TILE_K", 8}, {"THREADS_M", 4}, {"THREADS_N", 4}, {"UNROLL_THREADS", 64}},
    };
    Config config;
    for (Config candidate : preferred) {
      candidate["BATCH_CHUNK"] = chunk;
      candidate["LOCAL_PADDING"] = 1;
      candidate["VECTOR_WIDTH"] = some_operand_vectorizes(pb, 4) ? 4 : some_operand_vectorizes(pb, 2) ? 2 : 1;
      config = candidate;
      if (config_problem(*this, candidate, pb, device).empty()) break;
    }
    return config;  // the smallest setup when none fits: Plan::create then names the failing constraint
  }

  size_t local_memory_bytes(const Config& config, const ConvProblem&) const override {
    return gemm_local_bytes(config.at("TILE_M"), config.at("TILE_N"), config.at("TILE_K"),
                            config.at("LOCAL_PADDING"));
  }

  KernelRecipe recipe(const ConvProblem& pb, const Epilogue&, const Config& config,
                      const DeviceInfo&) const override {
    return im2col_gemm::make_recipe(pb, config);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_im2col_gemm() { return std::make_unique<Im2colGemmFamily>(); }

}  // namespace convtune
