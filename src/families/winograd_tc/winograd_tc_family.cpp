// The winograd_tc family: the winograd family's non-fused Winograd (same transforms, workspace and parameters) with
// the batched GEMM over groups and transform positions on TF32 tensor cores (gemm_tc's main loop; kernels
// winograd/winograd_tc.cl), in tf32 or 3xtf32 math, all three directions; NVIDIA sm_80+. FP32 math stays with
// winograd.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm_tc/tc_tiles.h"
#include "src/families/winograd/winograd_plan.h"

namespace convtune {

namespace {

using namespace winograd;

struct Params : tensor_core::Params {
  int64_t m_tile = 0, batch_chunk = 0, split = 0, transform_threads = 0;
};

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t =
      grouped_table<Params>(add_transform_fields<Params>, appended_fields<Params>(tensor_core::tile_table()));
  return t;
}

// winograd_tc.cl's tiles: U is stored K-contiguous always, V only for backward-filter (B transposed).
tensor_core::TileLayout tc_layout(Direction direction) { return {true, direction == Direction::BackwardFilter}; }

// Work-group axis 2 of the GEMM: (slices x) groups x transform positions.
int64_t gemm_layers(const ConvProblem& pb, int64_t m_tile, int64_t split) {
  const int64_t alpha = m_tile + pb.r - 1;
  return (pb.direction == Direction::BackwardFilter ? split : 1) * pb.groups * alpha * alpha;
}

class WinogradTcFamily final : public FamilyBase {
 public:
  std::string name() const override { return "winograd_tc"; }
  std::string description() const override {
    return "Winograd minimal filtering F(2x2|4x4|6x6, 3x3|5x5|7x7) as the winograd family computes it, the batched "
           "GEMM over groups and transform positions on TF32 tensor cores (mma.sync m16n8k8, tf32 or 3xtf32 math, "
           "cp.async pipeline); all directions; NVIDIA sm_80+";
  }
  // Poor fit, error bounds and carried entries are winograd's (FamilyBase): fewer than 16 channels per group also
  // leave the 16-row MMA tiles mostly empty.
  bool uses_tensor_cores() const override { return true; }
  // Ahead of the untuned order (and of a cost model that cannot predict it) on the wide 3x3/5x5 layers winograd
  // claims, in the modes it computes: on AlexNet's stride-1 layers, tuned 90 s, it ran 1.5-2.9x faster than winograd
  // in tf32 and 1.02-1.4x in 3xtf32, and at about half implicit_gemm_tc's tuned time on alex2 (0.50 vs 0.98 ms in
  // tf32).
  std::string untuned_claim(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    if (pb.math != MathMode::TF32 && pb.math != MathMode::TF32x3) return {};
    return winograd::wide_layer_claim(pb, false);
  }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!generic.is_conv()) return "computes convolutions, not matrix products";
    if (std::string why = tensor_core::unsupported_reason(name(), generic, device); !why.empty()) return why;
    return unsupported_shape_reason(generic.conv(), epilogue, device);
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using X = ConstraintContext;
    const ConvProblem pb = generic.conv();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = transform_constraints(t, pb);
    const int64_t rows = transform_steps::gemm_rows(pb);
    std::vector<Constraint> gemm = tensor_core::workspace_gemm_constraints(t, tc_layout(pb.direction), pb.math, rows);
    list.insert(list.end(), gemm.begin(), gemm.end());
    list.push_back(t.constraint("slices x groups x transform positions within the grid limit",
                                {&Params::m_tile, &Params::split}, [pb](const Params& p, const X&) {
                                  return gemm_layers(pb, p.m_tile, p.split) <= tensor_core::kMaxGridAxis;
                                }));
    // Single-float copies (rows not a multiple of 4) count 4 registers each (tc_tiles.h, fits_registers_with_copies).
    list.push_back(t.constraint(
        "estimated registers, single-float copies at 4 registers each, within the cap BLOCKS_PER_SM leaves",
        {&Params::m_tile, &Params::batch_chunk, &Params::split, &Params::tile_m, &Params::tile_n, &Params::tile_k,
         &Params::warps_m, &Params::warps_n, &Params::blocks_per_sm},
        [pb](const Params& p, const X&) {
          const WorkLayout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
          return tensor_core::fits_registers_with_copies(p, pb.math, !a_vectorizes(l, 4), !b_vectorizes(pb, l, 4));
        }));
    return list;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    const uint64_t cap = workspace_limit(device);
    Params p;
    p.m_tile = default_m_tile(pb);
    p.split = 1;
    p.batch_chunk = largest_chunk(pb, p.m_tile, 1, cap);
    p.transform_threads = device.max_work_group_size >= 128 ? 128 : 64;
    const WorkLayout l = layout(pb, p.m_tile, p.batch_chunk, 1);
    const tensor_core::Params tiles = tensor_core::default_tiles(l.gemm_m, l.gemm_n, l.gemm_k);
    if (pb.direction == Direction::BackwardFilter) {
      // K x C tiles are few: slices of the batch's tiles bring the blocks up to about two per multiprocessor, each
      // slice keeping at least 4 TILE_K steps of the reduction (as tensor_core::default_split does for SPLIT_K).
      const int64_t blocks = gemm_layers(pb, p.m_tile, 1) * ceil_div(l.gemm_m, tiles.tile_m) * ceil_div(l.gemm_n, tiles.tile_n);
      const int64_t target = 2 * std::max(1, device.compute_units);
      while (p.split < 64 && blocks * p.split * 2 <= target) p.split *= 2;
      p.batch_chunk = largest_chunk(pb, p.m_tile, p.split, cap);
      while (p.split > 1 && layout(pb, p.m_tile, p.batch_chunk, 1).tiles < p.split * 4 * tiles.tile_k) p.split /= 2;
    }
    auto valid = [&](const tensor_core::Params& candidate) {
      Params q = p;
      static_cast<tensor_core::Params&>(q) = candidate;
      return config_problem(*this, table().write(q), generic, device).empty();
    };
    static_cast<tensor_core::Params&>(p) = tensor_core::fit_default(tiles, valid);
    return table().write(p);  // when nothing fits, Plan::create names the failing constraint
  }

  KernelRecipe recipe(const Problem& generic, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    const Params p = table().read(config);
    const WorkLayout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
    const tensor_core::TileLayout tiles = tc_layout(pb.direction);
    KernelRecipe recipe;
    recipe.source.file = "winograd/winograd_tc.cl";
    recipe.source.defines = layout_defines(pb, epilogue, l, p.m_tile);
    auto& d = recipe.source.defines;
    table().add_defines(p, d);
    tensor_core::add_defines(tensor_core::tile_table(), p, pb.math, d);  // the tiles again, and MATH_SPLIT
    // 16-byte copies where the operand's rows allow them, else single floats (the copies take 4 or 1).
    d["A_VECTOR"] = a_vectorizes(l, 4) ? "4" : "1";
    d["B_VECTOR"] = b_vectorizes(pb, l, 4) ? "4" : "1";
    d["TC_A_KCONTIG"] = tiles.a_kcontig ? "1" : "0";
    d["TC_B_KCONTIG"] = tiles.b_kcontig ? "1" : "0";
    tensor_core::add_register_cap(recipe, p, device);
    recipe.workspace_bytes = l.total * sizeof(float);
    const LaunchGeometry geometry =
        tensor_core::main_geometry(l.gemm_m, l.gemm_n, gemm_layers(pb, p.m_tile, p.split), p, tiles);
    recipe.steps = steps(pb, epilogue, l, p.batch_chunk, p.split, p.transform_threads,
                         transform_steps::workspace_gemm_step("winograd_gemm_tc", geometry));
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_winograd_tc() { return std::make_unique<WinogradTcFamily>(); }

}  // namespace convtune
