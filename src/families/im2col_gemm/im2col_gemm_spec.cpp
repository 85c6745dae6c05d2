// The im2col_gemm family (seed 003): an unroll kernel writes a chunk of the batch as a column matrix, convtune's
// own tiled GEMM multiplies it with the filters; col2im gathers backward-data's columns. Parameters, named
// constraints, support and defaults live here; launches in im2col_gemm_recipe.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"
#include "src/families/im2col_gemm/im2col_gemm_spec.h"

namespace convtune {

namespace {

using im2col_gemm::column_bytes;

constexpr int64_t kMaxGridY = gemm::kMaxGridAxis;  // CUDA's grid limit on axes 1 and 2
const std::vector<int64_t> kBatchChunks = {1, 2, 4, 8, 16, 32, 64, 128, 256};
// The recipe holds two launch steps per chunk of the batch; this bounds its size (and its launch overhead), so a
// huge N is refused up front instead of building millions of steps (N = 2e8 once took 6 GB before the OOM killer).
constexpr int64_t kMaxChunks = 4096;

// Some operand loads `width`-float vectors (mirrors W_VECTOR and PQ_VECTOR in im2col_gemm.cl): the filters
// when C/groups*R*S is a multiple of the width, the columns and y when P*Q is.
bool some_operand_vectorizes(const ConvProblem& pb, int64_t width) {
  return (pb.c_per_group() * pb.r * pb.s) % width == 0 || (pb.p() * pb.q()) % width == 0;
}

// Backward-data's GEMM on a GPU: 128-row tiles over the C/groups*R*S rows of the column matrix where they pad the
// rows no more than 8% beyond 64-row tiles and still make a full wave of 128x64 tiles. Measured on the H200
// (scripts/gpu/sweeps/im2col_backward_data.txt, 128x64 with col2im groups of 64 against the default):
// 2304 rows 0.4715 against 0.5295 ms, 1152 rows 0.3388 against 0.3477, 800 rows 0.0410 against 0.0427, AlexNet's
// conv1 (363 rows) 1.4161 against 1.4668; where the padding grew 11-100% (576, 560, 288 and 147 rows) 64x64 stayed
// 1-40% faster. All twelve backward-data entries of the shipped H200 tuning have 128-row tiles.
bool wide_backward_data_rows(const ConvProblem& pb, int64_t chunk, const DeviceInfo& device) {
  if (!device.is_gpu || pb.direction != Direction::BackwardData) return false;
  const im2col_gemm::GemmShape gemm = im2col_gemm::gemm_shape(pb, chunk);  // m: the rows, C/groups*R*S
  const int64_t tall = (gemm.m + 127) / 128, short_tiles = (gemm.m + 63) / 64;
  const int64_t column_tiles = (gemm.n + 63) / 64;
  return tall * 128 * 100 <= short_tiles * 64 * 108 && tall * column_tiles * pb.groups >= device.compute_units;
}

class Im2colGemmFamily final : public KernelFamily {
 public:
  std::string name() const override { return "im2col_gemm"; }
  std::string description() const override {
    return "seed 003: unroll (im2col) a chunk of the batch into a workspace, then the gemm family's tiled "
           "local-memory GEMM (col2im gather for backward-data); groups and depthwise in all directions";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = fp32_kernel_conv_reason(name(), generic, device); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    if (epilogue.any()) {
      return fmt::format("computes plain convolutions; epilogue {} is not fused", to_string(epilogue));
    }
    if (pb.groups > kMaxGridY) {
      return fmt::format("groups={} exceeds {} (one GEMM work-group layer per group, CUDA grid axis 2)", pb.groups,
                         kMaxGridY);
    }
    if (column_bytes(pb, 1) > workspace_limit(device)) {
      return fmt::format("the column matrix of one image ({} bytes) exceeds the workspace limit of {} bytes",
                         column_bytes(pb, 1), workspace_limit(device));
    }
    int64_t largest_chunk = 1;  // of those whose columns fit the workspace
    for (int64_t c : kBatchChunks)
      if (column_bytes(pb, c) <= workspace_limit(device)) largest_chunk = c;
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

  // A depthwise layer's GEMMs are one row (or the multiplier) per group over R*S columns of the unrolled input.
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo&) const override {
    return depthwise::leave_to_depthwise(problem.conv());
  }

  std::vector<Parameter> parameters(const Problem&) const override { return im2col_gemm::parameter_table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using P = im2col_gemm::Params;
    using X = ConstraintContext;
    const ConvProblem& pb = generic.conv();
    const ParameterTable<P>& t = im2col_gemm::parameter_table();
    std::vector<Constraint> list = {
        t.constraint("batch chunk at most the batch", {&P::batch_chunk},
                     [n = pb.n](const P& p, const X&) { return p.batch_chunk <= n; }),
        t.constraint("at most 4096 batch chunks (launch steps)", {&P::batch_chunk},
                     [n = pb.n](const P& p, const X&) { return (n + p.batch_chunk - 1) / p.batch_chunk <= kMaxChunks; }),
        t.constraint(im2col_gemm::kWorkspaceConstraint, {&P::batch_chunk},
                     [pb](const P& p, const X& x) {
                       return column_bytes(pb, p.batch_chunk) <= workspace_limit(x.device);
                     }),
        t.constraint("unroll work-group within the device limit", {&P::unroll_threads},
                     [](const P& p, const X& x) { return static_cast<size_t>(p.unroll_threads) <= x.device.max_work_group_size; }),
    };
    const int64_t max_rows = std::max(pb.k_per_group(), pb.c_per_group() * pb.r * pb.s);
    for (Constraint& c : gemm::tile_constraints(t, max_rows, [pb](int64_t v) { return some_operand_vectorizes(pb, v); }))
      list.push_back(std::move(c));
    return list;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    // The largest chunk that fits: fewer, larger GEMMs. Then the first tile setup the device allows, from
    // 64x64 tiles with 4x4 register tiles down to what a small device still runs.
    int64_t chunk = 1;
    for (int64_t c : kBatchChunks) {
      if (c <= pb.n && column_bytes(pb, c) <= workspace_limit(device)) chunk = c;
    }
    const ParameterTable<im2col_gemm::Params>& table = im2col_gemm::parameter_table();
    Config config;
    std::vector<gemm::TileParams> setups = gemm::preferred_tiles(device.is_gpu);
    if (wide_backward_data_rows(pb, chunk, device)) {
      gemm::TileParams tall = setups.front();  // 16x16 threads: 8x4 register tiles, still read as float4 runs
      tall.tile_m = 128;
      setups.insert(setups.begin(), tall);
    }
    for (const gemm::TileParams& tiles : setups) {
      im2col_gemm::Params candidate;
      static_cast<gemm::TileParams&>(candidate) = tiles;
      candidate.unroll_threads = tiles.tile_m == 64 ? 256 : 64;
      // col2im of a backward-data with few input channels: work-groups of 64. On the H200 five layers of 3-16
      // channels ran 2-24% faster so (AlexNet's conv1 1.467 against 1.503 ms, a 7x5 stride-2 layer 0.0127 against
      // 0.0158); five of 32-256 channels ran 1-18% slower.
      if (pb.direction == Direction::BackwardData && pb.c_per_group() <= 16) candidate.unroll_threads = 64;
      candidate.batch_chunk = chunk;
      candidate.vector_width = some_operand_vectorizes(pb, 4) ? 4 : some_operand_vectorizes(pb, 2) ? 2 : 1;
      config = table.write(candidate);
      if (config_problem(*this, config, generic, device).empty()) break;
    }
    return config;  // the smallest setup when none fits: Plan::create then names the failing constraint
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo&) const override {
    return im2col_gemm::make_recipe(problem.conv(), im2col_gemm::parameter_table().read(config));
  }
};

}  // namespace

const ParameterTable<im2col_gemm::Params>& im2col_gemm::parameter_table() {
  using P = im2col_gemm::Params;
  static const ParameterTable<P> table = [] {
    // Cheap, strongly pruning parameters first: SearchSpace checks each constraint once its inputs are set.
    std::vector<ParameterTable<P>::Field> fields = {
        {"BATCH_CHUNK", &P::batch_chunk, kBatchChunks,
         "images whose column matrices the workspace holds per unroll + GEMM step"},
        {"UNROLL_THREADS", &P::unroll_threads, {64, 128, 256, 512}, "work-group size of the unroll and col2im kernels"},
    };
    gemm::add_tile_fields<P>(fields);
    return ParameterTable<P>(std::move(fields));
  }();
  return table;
}

std::unique_ptr<KernelFamily> families::make_im2col_gemm() { return std::make_unique<Im2colGemmFamily>(); }

}  // namespace convtune
