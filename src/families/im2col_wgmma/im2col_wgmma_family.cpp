// The im2col_wgmma family: convolutions in all three directions as explicit GEMMs on Hopper's warpgroup MMA
// (kernels/tensor_core/im2col_wgmma.cu): gathers lay both operands out K-contiguous in the workspace (im2col of x,
// dy at the taps, transposed filters), then one wgmma GEMM per chunk of rows with the layer's layout in its epilogue
// (bias and ReLU fused forward); backward-filter sums FP32 partials over the chunks and split-K slices. BF16/FP16
// tensors and FP32 tensors in tf32 math, on CUDA with compute capability 9.0. The gathered matrix is as large as an
// im2col (rows x C/groups*R*S); chunks keep it within the workspace limit.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

using wgmma::Params;

const ParameterTable<Params>& table(Direction direction) {
  static const ParameterTable<Params> filter = wgmma::make_table(
      {1, 2, 4, 8, 16}, "slices of the N*P*Q reduction summed by a second kernel (fills the GPU: backward-filter's "
                        "output is only K x C/groups*R*S)");
  static const ParameterTable<Params> other =
      wgmma::make_table({1}, "not split: forward and backward-data have N*P*Q or N*H*W rows of output tiles");
  return direction == Direction::BackwardFilter ? filter : other;
}

using wgmma::aligned;
using wgmma::ceil_div;
using wgmma::round_up;

// How a problem and configuration use the workspace: the chunk of gathered rows (forward, backward-data) or reduction
// positions (backward-filter), the padded reduction (the gathered matrices' row length), the regions' offsets.
struct WorkLayout {
  int64_t rows_total = 0;  // forward N*P*Q, backward-data N*H*W, backward-filter the reduction N*P*Q
  int64_t chunk = 0;       // rows (positions) per chunk
  int64_t red_p = 0;       // row length of the gathered matrices, a multiple of 16 bytes
  bool w_direct = false;   // forward: the filters are read where they are
  uint64_t col_offset = 0, w_offset = 0, partial_offset = 0, bytes = 0;
  std::string why_not;     // non-empty: the workspace limit leaves no room for one chunk
};

WorkLayout layout(const ConvProblem& pb, const Params& p, const DeviceInfo& device) {
  WorkLayout l;
  const int64_t eb = wgmma::element_bytes(pb.type), chunk_elems = wgmma::chunk_elements(pb.type);
  const int64_t crs = pb.c_per_group() * pb.r * pb.s, krs = pb.k_per_group() * pb.r * pb.s;
  const uint64_t limit = workspace_limit(device);
  if (pb.direction == Direction::BackwardFilter) {
    l.rows_total = pb.n * pb.p() * pb.q();
    const uint64_t partial = aligned(static_cast<uint64_t>(p.split_k * pb.k * crs) * 4);
    // Each reduction position takes G*CRS x elements and K dy elements.
    const uint64_t per_position = static_cast<uint64_t>((pb.groups * crs + pb.k) * eb);
    const int64_t tile_k = wgmma::tile_k(pb.type);
    int64_t fit = limit > partial + 1024 ? static_cast<int64_t>((limit - partial - 1024) / per_position) : 0;
    fit = fit / tile_k * tile_k;
    l.chunk = std::min(round_up(l.rows_total, chunk_elems), fit);
    l.red_p = round_up(l.chunk, chunk_elems);
    l.col_offset = 0;
    l.w_offset = aligned(static_cast<uint64_t>(pb.groups * crs * l.red_p * eb));
    l.partial_offset = l.w_offset + aligned(static_cast<uint64_t>(pb.k * l.red_p * eb));
    l.bytes = l.partial_offset + partial;
    if (l.chunk < tile_k) l.why_not = fmt::format("not even {} reduction positions fit", tile_k);
    return l;
  }
  const bool forward = pb.direction == Direction::Forward;
  l.rows_total = forward ? pb.n * pb.p() * pb.q() : pb.n * pb.h * pb.w;
  const int64_t red = forward ? crs : krs;
  l.red_p = round_up(red, chunk_elems);
  l.w_direct = forward && red % chunk_elems == 0;
  const uint64_t w_bytes = l.w_direct ? 0
                           : forward    ? aligned(static_cast<uint64_t>(pb.k * l.red_p * eb))
                                        : aligned(static_cast<uint64_t>(pb.c * l.red_p * eb));
  const uint64_t per_row = static_cast<uint64_t>(pb.groups * l.red_p * eb);
  int64_t fit = limit > w_bytes + 1024 ? static_cast<int64_t>((limit - w_bytes - 1024) / per_row) : 0;
  fit = fit / p.block_m() * p.block_m();
  l.chunk = std::min(l.rows_total, fit);
  l.w_offset = 0;
  l.col_offset = w_bytes;
  l.bytes = w_bytes + aligned(static_cast<uint64_t>(l.chunk) * per_row);
  if (l.chunk < std::min(l.rows_total, p.block_m())) {
    l.why_not = fmt::format("not even {} gathered rows of {} bytes fit", p.block_m(), per_row);
  }
  return l;
}

class Im2colWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "im2col_wgmma"; }
  std::string description() const override {
    return "convolution as gathers into K-contiguous workspace matrices and a GEMM on Hopper's warpgroup MMA (wgmma, "
           "sm_90a): BF16/FP16 tensors and FP32 in tf32 math, all three directions, bias and ReLU fused forward, "
           "chunks within the workspace limit, split-K for backward-filter";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device); !why.empty()) return why;
    const ConvProblem& pb = generic.conv();
    // The smallest configuration's chunk must fit the workspace.
    Params smallest;
    smallest.wg_m = 1, smallest.block_n = 64, smallest.stages = 3, smallest.split_k = 1;
    if (const WorkLayout l = layout(pb, smallest, device); !l.why_not.empty()) {
      return fmt::format("{} gathers into the workspace and {} within the limit of {} bytes", name(), l.why_not,
                         workspace_limit(device));
    }
    return {};
  }

  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    return wgmma::conv_poor_fit(generic.conv());
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return table(problem.conv().direction).parameters();
  }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    const ConvProblem pb = problem.conv();
    const ParameterTable<Params>& t = table(pb.direction);
    std::vector<Constraint> list = wgmma::tile_constraints(t);
    const int64_t m_rows = pb.direction == Direction::BackwardFilter ? pb.c_per_group() * pb.r * pb.s : 0;
    list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&Params::wg_m}, [pb, m_rows](const Params& p, const X& x) {
      return ceil_div(m_rows ? m_rows : layout(pb, p, x.device).chunk, p.block_m()) <= wgmma::kMaxGridAxis;
    }));
    list.push_back(t.constraint("groups x split-K slices within the grid limit", {&Params::split_k},
                                [pb](const Params& p, const X&) { return pb.groups * p.split_k <= wgmma::kMaxGridAxis; }));
    list.push_back(t.constraint("one chunk of gathered rows within the workspace limit", {&Params::wg_m, &Params::split_k},
                                [pb](const Params& p, const X& x) { return layout(pb, p, x.device).why_not.empty(); }));
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const bool filter = pb.direction == Direction::BackwardFilter;
    const int64_t crs = pb.c_per_group() * pb.r * pb.s;
    const int64_t m = filter ? crs : pb.direction == Direction::Forward ? pb.n * pb.p() * pb.q() : pb.n * pb.h * pb.w;
    const int64_t n = pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group();
    Params p = wgmma::default_tiles(m, n);
    auto valid = [&](const Params& q) {
      return config_problem(*this, table(pb.direction).write(q), problem, device).empty();
    };
    while (!valid(p) && p.stages > 3) --p.stages;
    if (filter) {
      const int64_t blocks = ceil_div(m, p.block_m()) * ceil_div(n, p.block_n) * pb.groups;
      const int64_t target = 2 * std::max(1, device.compute_units), tile_k = wgmma::tile_k(pb.type);
      while (p.split_k < 16 && blocks * p.split_k * 2 <= target && pb.n * pb.p() * pb.q() / (p.split_k * 2) >= 8 * tile_k) {
        Params q = p;
        q.split_k *= 2;
        if (!valid(q)) break;
        p = q;
      }
    }
    return table(pb.direction).write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table(pb.direction).read(config);
    const WorkLayout l = layout(pb, p, device);
    KernelRecipe recipe;
    recipe.source.file = "tensor_core/im2col_wgmma.cu";
    recipe.source.defines = problem_defines(pb);
    auto s = [](int64_t v) { return std::to_string(v); };
    recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
    recipe.source.defines["HAS_RELU"] = epilogue.relu ? "1" : "0";
    recipe.source.defines["CHUNK_ROWS"] = s(l.chunk);
    recipe.source.defines["RED_P"] = s(l.red_p);
    recipe.source.defines["W_DIRECT"] = l.w_direct ? "1" : "0";
    recipe.source.defines["WS_COL"] = s(static_cast<int64_t>(l.col_offset));
    recipe.source.defines["WS_W"] = s(static_cast<int64_t>(l.w_offset));
    recipe.source.defines["WS_PARTIAL"] = s(static_cast<int64_t>(l.partial_offset));
    wgmma::add_defines(table(pb.direction), p, pb.type, recipe);
    recipe.workspace_bytes = l.bytes;

    constexpr int x = 0, w = 1, y = 2;
    const auto elementwise = wgmma::elementwise_step;
    const auto value = [](int64_t v) { return ArgSource::fixed(static_cast<int32_t>(v)); };
    const int64_t crs = pb.c_per_group() * pb.r * pb.s;
    if (pb.direction == Direction::Forward && !l.w_direct)
      recipe.steps.push_back(elementwise("wg_weights", {ArgSource::of_operand(w), ArgSource::workspace()}, pb.k * l.red_p));
    if (pb.direction == Direction::BackwardData)
      recipe.steps.push_back(elementwise("wg_weights", {ArgSource::of_operand(w), ArgSource::workspace()}, pb.c * l.red_p));
    const int64_t n_cols = pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group();
    for (int64_t row0 = 0; row0 < l.rows_total; row0 += l.chunk) {
      const int64_t rows = std::min(l.chunk, l.rows_total - row0);
      LaunchStep gemm;
      gemm.kernel = "wg_conv_gemm";
      switch (pb.direction) {
        case Direction::Forward:
          recipe.steps.push_back(elementwise("wg_gather", {ArgSource::of_operand(x), ArgSource::workspace(), value(row0), value(rows)},
                                             pb.groups * rows * l.red_p));
          gemm.args = {ArgSource::of_operand(w), ArgSource::workspace(), ArgSource::of_operand(y)};
          if (epilogue.bias) gemm.args.push_back(ArgSource::of_operand(kBiasOperand));
          gemm.geometry = wgmma::main_geometry(rows, n_cols, pb.groups, p);
          break;
        case Direction::BackwardData:
          recipe.steps.push_back(elementwise("wg_gather", {ArgSource::of_operand(y), ArgSource::workspace(), value(row0), value(rows)},
                                             pb.groups * rows * l.red_p));
          gemm.args = {ArgSource::workspace(), ArgSource::of_operand(x)};
          gemm.geometry = wgmma::main_geometry(rows, n_cols, pb.groups, p);
          break;
        case Direction::BackwardFilter:
          recipe.steps.push_back(elementwise(
              "wg_gather", {ArgSource::of_operand(x), ArgSource::of_operand(y), ArgSource::workspace(), value(row0), value(rows)},
              (pb.groups * crs + pb.k) * l.red_p));
          gemm.args = {ArgSource::workspace()};
          gemm.geometry = wgmma::main_geometry(crs, n_cols, pb.groups * p.split_k, p);
          break;
      }
      gemm.args.push_back(value(row0));
      gemm.args.push_back(value(rows));
      recipe.steps.push_back(std::move(gemm));
    }
    if (pb.direction == Direction::BackwardFilter)
      recipe.steps.push_back(elementwise("wg_filter_reduce", {ArgSource::workspace(), ArgSource::of_operand(w)}, pb.k * crs));
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_im2col_wgmma() { return std::make_unique<Im2colWgmmaFamily>(); }

}  // namespace convtune
