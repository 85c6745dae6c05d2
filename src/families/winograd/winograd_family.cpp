// The winograd family: Winograd's minimal filtering (non-fused: transforms, a batched GEMM on the gemm kernel,
// inverse transform) for stride-1 square filters, F(2x2), F(4x4) or F(6x6) output tiles, in all three directions.
// Parameters, constraints, defaults and the launches; the kernels are kernels/winograd/winograd.cl, the transform
// matrices come from winograd_transforms.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/gemm/gemm_tiles.h"
#include "src/families/winograd/winograd_plan.h"

namespace convtune {

namespace {

using namespace winograd;

struct Params : gemm::TileParams {
  int64_t m_tile = 0, batch_chunk = 0, split = 0, transform_threads = 0;
};

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t = grouped_table<Params>(add_transform_fields<Params>, gemm::add_tile_fields<Params>);
  return t;
}

class WinogradFamily final : public FamilyBase {
 public:
  std::string name() const override { return "winograd"; }
  std::string description() const override {
    return "Winograd minimal filtering F(2x2|4x4|6x6, 3x3|5x5|7x7) for stride-1 square filters: filter and tile "
           "transforms, the gemm kernel batched over groups and transform positions, inverse transform; all "
           "directions (backward-filter with the dy tiles as filters)";
  }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = fp32_kernel_conv_reason(name(), generic, device); !why.empty()) return why;
    return unsupported_shape_reason(generic.conv(), epilogue, device);
  }

  // Wide 3x3 and 5x5 layers (wide_layer_claim), in FP32 math: in tf32 and 3xtf32 winograd_tc's tensor cores claim
  // them.
  std::string untuned_claim(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    if (pb.math != MathMode::FP32 && pb.math != MathMode::FP32Fast) return {};
    return wide_layer_claim(pb, device.is_gpu);
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using X = ConstraintContext;
    const ConvProblem pb = generic.conv();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = transform_constraints(t, pb);
    const int64_t rows = transform_steps::gemm_rows(pb);
    // Vector loads where one of the GEMM's operands takes them: its layout depends on the tile side, the chunk and
    // the slices, so the check is a constraint of its own (the recipe narrows the other operand's loads to 1).
    for (Constraint& c : gemm::tile_constraints(t, rows, [](int64_t) { return true; })) list.push_back(std::move(c));
    list.push_back(t.constraint("VECTOR_WIDTH above 1 only where the GEMM's U or V rows are multiples of it",
                                {&Params::m_tile, &Params::batch_chunk, &Params::split, &Params::vector_width},
                                [pb](const Params& p, const X&) {
                                  const WorkLayout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
                                  return a_vectorizes(l, p.vector_width) || b_vectorizes(pb, l, p.vector_width);
                                }));
    return list;
  }

  // The GEMM tile of forward and backward-data on GPUs (see default_config).
  static gemm::TileParams wide_gpu_tiles() {
    gemm::TileParams t = gemm::large_gpu_tiles();
    t.tile_m = 64, t.tile_n = 128, t.threads_m = 16, t.threads_n = 8;
    t.local_padding = 0, t.prefetch = 0;
    return t;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    Params p;
    p.m_tile = default_m_tile(pb);
    const uint64_t cap = workspace_limit(device);
    p.split = 1;
    if (pb.direction == Direction::BackwardFilter) {
      // Enough slices for about 4 work-groups per multiprocessor-sized share of a large GPU (K x C tiles are few).
      const int64_t groups_per_slice = pb.groups * (p.m_tile + pb.r - 1) * (p.m_tile + pb.r - 1) *
                                       ceil_div(pb.k_per_group(), 64) * ceil_div(pb.c_per_group(), 64);
      while (p.split < 64 && groups_per_slice * p.split < 512) p.split *= 2;
    }
    p.batch_chunk = largest_chunk(pb, p.m_tile, p.split, cap);
    while (p.split > 1 && layout(pb, p.m_tile, p.batch_chunk, 1).tiles < p.split) p.split /= 2;
    Config config;
    const WorkLayout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
    std::vector<gemm::TileParams> candidates = gemm::preferred_tiles(device.is_gpu);
    // Large GEMMs on a GPU: the gemm family's large setup. Against 64x64 tiles with float4 reads it was not
    // measured yet; against 128x128 tiles with TILE_K 32 and scalar reads (the default before) the gemm family's
    // 4096^3 product was 10% faster.
    if (device.is_gpu && l.gemm_m >= 128 && l.gemm_n >= 128 * 16) candidates.insert(candidates.begin(), gemm::large_gpu_tiles());
    // Forward and backward-data on a GPU: 64x128 tiles on 16x8 work-items (4x16 register tiles), no local padding
    // or prefetch, transforms in work-groups of 256: a 15-minute AlexNet tune finds it for alex2 forward, and on the
    // H200 it was the fastest of five shapes on all ten forward and backward-data rows of alex2-alex5 and u3 (3x3 and
    // 5x5, GEMM rows 64-384), 1-25% faster than the setup above (alex3 backward-data 0.420 against 0.525 ms, alex2
    // forward 1.042 against 1.195); the same tile with padding and prefetch lost to it by 8-14%. Backward-filter's
    // GEMMs (K x C per tile position) were not measured: they keep the setup above.
    const bool wide = device.is_gpu && pb.direction != Direction::BackwardFilter && l.gemm_m >= 64 &&
                      l.gemm_n >= 128 * 16 && device.max_work_group_size >= 256;
    if (wide) candidates.insert(candidates.begin(), wide_gpu_tiles());
    // Backward-data over at most 40 input channels a group on a GPU: 32x64 tiles on 8x16 work-items (4x4 register
    // tiles) instead of 64-row tiles half idle. On the H200 (scripts/gpu/sweeps/winograd_narrow_backward_data.txt)
    // it was the fastest of six setups or within 6% of it on six layers of 24-40 channels (3x3
    // and 5x5, N=32 to 10,000), 1.02-1.47x faster than the 64x64 setup: Fashion-MNIST's conv2 5.57 against 7.85 ms,
    // a 32->64 5x5 layer 0.285 against 0.399, a 24->96 3x3 layer 0.073 against 0.097. Forward (rows: K) was not
    // measured.
    if (device.is_gpu && pb.direction == Direction::BackwardData && l.gemm_m <= 40) {
      gemm::TileParams narrow = candidates.front();
      narrow.tile_m = 32, narrow.threads_m = 8;
      candidates.insert(candidates.begin(), narrow);
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      const gemm::TileParams& tiles = candidates[i];
      // CPUs (PoCL) run a work-group's threads one after another between barriers: large groups only cost there.
      if (!device.is_gpu && tiles.threads() > 64) continue;
      static_cast<gemm::TileParams&>(p) = tiles;
      // The widest loads both operands take, else the widest either takes.
      for (int64_t width : {4, 2, 1}) {
        if (a_vectorizes(l, width) || b_vectorizes(pb, l, width)) {
          p.vector_width = width;
          break;
        }
      }
      // The wide setup (first when chosen) was measured with transforms in work-groups of 256.
      p.transform_threads = wide && i == 0 ? 256 : device.max_work_group_size >= 128 ? 128 : 64;
      config = table().write(p);
      if (config_problem(*this, config, generic, device).empty()) break;
    }
    return config;  // the smallest setup when none fits: Plan::create then names the failing constraint
  }

  KernelRecipe recipe(const Problem& generic, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    const Params p = table().read(config);
    const WorkLayout l = layout(pb, p.m_tile, p.batch_chunk, p.split);
    KernelRecipe recipe;
    recipe.source.file = "winograd/winograd.cl";
    recipe.source.defines = layout_defines(pb, epilogue, l, p.m_tile);
    table().add_defines(p, recipe.source.defines);
    auto& d = recipe.source.defines;
    d["A_VECTOR"] = std::to_string(a_vectorizes(l, p.vector_width) ? p.vector_width : 1);
    d["B_VECTOR"] = std::to_string(b_vectorizes(pb, l, p.vector_width) ? p.vector_width : 1);
    recipe.workspace_bytes = l.total * sizeof(float);
    // Work-group axis 2 runs over (slices x) groups x transform positions.
    const int64_t layers = (pb.direction == Direction::BackwardFilter ? p.split : 1) * pb.groups * l.alpha * l.alpha;
    const LaunchGeometry gemm_geometry = gemm::launch_geometry(l.gemm_m, l.gemm_n, layers, p);
    recipe.steps = steps(pb, epilogue, l, p.batch_chunk, p.split, p.transform_threads,
                         transform_steps::gemm_kernel_step(gemm_geometry));
    return recipe;
  }

};

}  // namespace

std::unique_ptr<KernelFamily> families::make_winograd() { return std::make_unique<WinogradFamily>(); }

}  // namespace convtune
