// The fft_tc family: the fft family's FFT tiling (same transforms, workspace, tile sizes and Gauss planes) with the
// per-bin GEMMs on TF32 tensor cores (gemm_tc's main loop; kernels/fft/fft_tc.cl), in tf32 or 3xtf32 math, all
// three directions; NVIDIA sm_80+. FP32 math stays with fft.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/fft/fft_plan.h"
#include "src/families/gemm_tc/tc_tiles.h"

namespace convtune {

namespace {

using namespace fft;

struct Params : tensor_core::Params {
  int64_t size = 0, gauss = 0, transform_tiles = 0, batch_chunk = 0, split = 0;
};

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t =
      grouped_table<Params>(add_transform_fields<Params>, appended_fields<Params>(tensor_core::tile_table()));
  return t;
}

WorkLayout layout_of(const ConvProblem& pb, const Params& p) {
  return layout(pb, p.size, p.batch_chunk, p.split, p.gauss != 0);
}

// fft.cl's GEMM operands: U (A) is stored K-contiguous always, V only for backward-filter (B transposed).
tensor_core::TileLayout tc_layout(Direction direction) { return {true, direction == Direction::BackwardFilter}; }

class FftTcFamily final : public KernelFamily {
 public:
  std::string name() const override { return "fft_tc"; }
  std::string description() const override {
    return "FFT tiling for stride-1 filters up to 31x31 as the fft family computes it, the per-bin GEMMs of the "
           "complex products on TF32 tensor cores (mma.sync m16n8k8, tf32 or 3xtf32 math, cp.async pipeline); all "
           "directions; NVIDIA sm_80+";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!generic.is_conv()) return "computes convolutions, not matrix products";
    if (std::string why = tensor_core::unsupported_reason(name(), generic, device); !why.empty()) return why;
    return unsupported_shape_reason(generic.conv(), epilogue, device);
  }

  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo&) const override {
    return poor_fit(problem.conv());
  }

  // Filters of 5x5 and more over at least 32 channels a group, in tf32 and 3xtf32, where the default's chunk holds
  // the whole batch. Measured on the H100 with the built-in defaults: where one chunk held the batch (alex2, u2:
  // N=128) fft_tc ran 0.61-1.00x the time of the shipped plan in tf32, and in 3xtf32 0.76-0.91x on alex2 and
  // 0.96-1.07x on u2; where the workspace limit cut the batch into chunks (at a 256 MiB limit: u8 in 4 of 32
  // images, fmnist2 in 40 of 256), each chunk's GEMMs reduce over few tiles or are too small to fill the tensor
  // cores, and fft_tc ran forward 1.1-1.7x slower (u8 backward-filter 1.7x): tuning entries alone choose it there.
  // Within 1 GiB u8 is one chunk, and tuned it ran 0.50-0.55 ms where the 256 MiB plan (implicit_gemm_wgmma,
  // winograd_tc) took 0.76-1.04.
  std::string untuned_claim(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    if (pb.math != MathMode::TF32 && pb.math != MathMode::TF32x3) return {};
    if (!large_filter_layer_in_one_chunk(pb, device)) return {};
    const int64_t channels = std::min(pb.c_per_group(), pb.k_per_group());
    return fmt::format("a {}x{} stride-1 layer with {} channels a group whose batch fits the workspace in one chunk: "
                       "the {} taps an output become about 4 real multiplications a frequency bin on the tensor cores",
                       pb.r, pb.s, channels, pb.r * pb.s);
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using X = ConstraintContext;
    const ConvProblem pb = generic.conv();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = transform_constraints(t, pb);
    // The GEMM's rows are output channels, twice them without Gauss's planes (forward and backward-filter: K/groups;
    // backward-data: C/groups). A constraint reads only the fields it names (searches check it as soon as those are
    // set), so this bound takes the larger count rather than reading GAUSS's.
    const int64_t rows = 2 * transform_steps::gemm_rows(pb);
    std::vector<Constraint> gemm = tensor_core::workspace_gemm_constraints(t, tc_layout(pb.direction), pb.math, rows);
    list.insert(list.end(), gemm.begin(), gemm.end());
    // Single-float copies (rows not a multiple of 4) count 4 registers each (tc_tiles.h, fits_registers_with_copies).
    list.push_back(t.constraint(
        "estimated registers, single-float copies at 4 registers each, within the cap BLOCKS_PER_SM leaves",
        {&Params::size, &Params::gauss, &Params::batch_chunk, &Params::split, &Params::tile_m, &Params::tile_n,
         &Params::tile_k, &Params::warps_m, &Params::warps_n, &Params::blocks_per_sm},
        [pb](const Params& p, const X&) {
          const WorkLayout l = layout_of(pb, p);
          return tensor_core::fits_registers_with_copies(p, pb.math, !a_vectorizes(l, 4), !b_vectorizes(pb, l, 4));
        }));
    return list;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    const uint64_t cap = workspace_limit(device);
    Params p;
    p.size = default_size(pb);
    // One GEMM of twice the channels on 2x2 real blocks: on tensor cores the multiplications Gauss's product saves
    // cost little, while its third plane adds a third to the transforms' stores and the GEMM's operand traffic.
    p.gauss = 0;
    p.transform_tiles = default_transform_tiles(p.size, device);
    p.split = 1;
    p.batch_chunk = largest_chunk(pb, p.size, 1, cap, false);
    const WorkLayout l = layout_of(pb, p);
    const tensor_core::Params tiles = tensor_core::default_tiles(l.gemm_m, l.gemm_n, l.gemm_k);
    if (pb.direction == Direction::BackwardFilter) {
      // Each slice keeps at least 4 TILE_K steps of the reduction (as winograd_tc does).
      const int64_t blocks = gemm_layers(pb, l, 1) * ceil_div(l.gemm_m, tiles.tile_m) * ceil_div(l.gemm_n, tiles.tile_n);
      const Slices slices = filter_slices(pb, p.size, blocks, 4 * tiles.tile_k, device);
      p.split = slices.split, p.batch_chunk = slices.chunk;
    }
    auto valid = [&](const tensor_core::Params& candidate) {
      Params q = p;
      static_cast<tensor_core::Params&>(q) = candidate;
      return config_problem(*this, table().write(q), generic, device).empty();
    };
    static_cast<tensor_core::Params&>(p) = tensor_core::fit_default(tiles, valid);
    return table().write(p);  // when nothing fits, Plan::create names the failing constraint
  }

  Config carry_config(const Config& tuned, const Problem&, const Problem& problem, const DeviceInfo& device) const override {
    return carried_config(tuned, default_config(problem, device), problem.conv());
  }

  KernelRecipe recipe(const Problem& generic, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    const Params p = table().read(config);
    const WorkLayout l = layout_of(pb, p);
    const tensor_core::TileLayout tiles = tc_layout(pb.direction);
    KernelRecipe recipe;
    recipe.source.file = "fft/fft_tc.cl";
    recipe.source.defines = layout_defines(pb, epilogue, l, p.transform_tiles);
    auto& d = recipe.source.defines;
    table().add_defines(p, d);
    d.erase("FFT_SIZE");  // the kernels read FFT_T
    tensor_core::add_defines(tensor_core::tile_table(), p, pb.math, d);  // the tiles again, and MATH_SPLIT
    d["DFT_UNROLL"] = device.is_gpu ? "1" : "0";
    d["FFT_CHUNKS"] = std::to_string(ceil_div(pb.n, p.batch_chunk));  // one: backward-filter's GEMM writes M
    // 16-byte copies where the operand's rows allow them, else single floats.
    d["A_VECTOR"] = a_vectorizes(l, 4) ? "4" : "1";
    d["B_VECTOR"] = b_vectorizes(pb, l, 4) ? "4" : "1";
    d["TC_A_KCONTIG"] = tiles.a_kcontig ? "1" : "0";
    d["TC_B_KCONTIG"] = tiles.b_kcontig ? "1" : "0";
    tensor_core::add_register_cap(recipe, p, device);
    recipe.workspace_bytes = l.total * sizeof(float);
    const LaunchGeometry geometry = tensor_core::main_geometry(l.gemm_m, l.gemm_n, gemm_layers(pb, l, p.split), p, tiles);
    recipe.steps = steps(pb, epilogue, l, p.batch_chunk, p.split, p.transform_tiles,
                         transform_steps::workspace_gemm_step("fft_gemm_tc", geometry));
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_fft_tc() { return std::make_unique<FftTcFamily>(); }

}  // namespace convtune
