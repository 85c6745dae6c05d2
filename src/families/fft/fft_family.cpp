// The fft family: FFT tiling for stride-1 convolutions of any filter up to 31x31 (square or not), all three
// directions: the real 2-D DFT of T x T tiles (direct DFTs in local memory), per frequency bin one real GEMM of twice
// the channels on the gemm kernel (complex products as 2x2 real blocks), the inverse DFT. Parameters, constraints,
// defaults and launches; the kernels are kernels/fft/fft.cl, the layout and launches fft_plan.cpp.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/fft/fft_plan.h"
#include "src/families/gemm/gemm_tiles.h"

namespace convtune {

namespace {

using namespace fft;

struct Params : gemm::TileParams {
  int64_t size = 0, gauss = 0, transform_tiles = 0, batch_chunk = 0, split = 0;
};

WorkLayout layout_of(const ConvProblem& pb, const Params& p, int64_t split) {
  return layout(pb, p.size, p.batch_chunk, split, p.gauss != 0);
}

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t = grouped_table<Params>(add_transform_fields<Params>, gemm::add_tile_fields<Params>);
  return t;
}

class FftFamily final : public KernelFamily {
 public:
  std::string name() const override { return "fft"; }
  std::string description() const override {
    return "FFT tiling for stride-1 filters up to 31x31: real DFTs of T x T tiles (T 8-32), per frequency bin a "
           "GEMM of the complex products as real 2x2 blocks on the gemm kernel, inverse DFT; all directions";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = fp32_kernel_conv_reason(name(), generic, device); !why.empty()) return why;
    return unsupported_shape_reason(generic.conv(), epilogue, device);
  }

  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo&) const override {
    return poor_fit(problem.conv());
  }

  // Filters of 5x5 and more over at least 32 channels a group, on GPUs, in FP32 math. Measured on the H200 with the
  // built-in defaults: on alex2, u2, u8 and Fashion-MNIST's conv2 (5x5, 32 to 192 channels) fft ran every direction
  // 1.4-2.7x faster than winograd's F(2x2, 5x5), the only 5x5 Winograd tile within the FP32 tolerance. Not measured
  // on 3x3 layers (winograd keeps them: fft was 1.1-1.4x slower there), on PoCL or for 1xN filters.
  std::string untuned_claim(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    if (!device.is_gpu || (pb.math != MathMode::FP32 && pb.math != MathMode::FP32Fast)) return {};
    if (!large_filter_layer(pb)) return {};
    const int64_t channels = std::min(pb.c_per_group(), pb.k_per_group());
    return fmt::format("a {}x{} stride-1 layer with {} channels a group: in FFT tiles the {} taps an output become "
                       "about 3 real multiplications a frequency bin",
                       pb.r, pb.s, channels, pb.r * pb.s);
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using X = ConstraintContext;
    const ConvProblem pb = generic.conv();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = transform_constraints(t, pb);
    const int64_t rows = 2 * transform_steps::gemm_rows(pb);  // at most
    for (Constraint& c : gemm::tile_constraints(t, rows, [](int64_t) { return true; })) list.push_back(std::move(c));
    list.push_back(t.constraint("VECTOR_WIDTH above 1 only where the GEMM's U or V rows are multiples of it",
                                {&Params::size, &Params::batch_chunk, &Params::split, &Params::gauss, &Params::vector_width},
                                [pb](const Params& p, const X&) {
                                  const WorkLayout l = layout_of(pb, p, p.split);
                                  return a_vectorizes(l, p.vector_width) || b_vectorizes(pb, l, p.vector_width);
                                }));
    return list;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    Params p;
    p.size = default_size(pb);
    // Gauss's product (three real multiplies per complex one instead of four): the faster on the H200.
    p.gauss = 1;
    p.transform_tiles = default_transform_tiles(p.size, device);
    const uint64_t cap = workspace_limit(device);
    p.split = 1;
    if (pb.direction == Direction::BackwardFilter) {
      // As winograd: enough slices for about 4 work-groups per multiprocessor-sized share of a large GPU.
      const int64_t groups_per_slice = pb.groups * bins(p.size) * ceil_div(2 * pb.k_per_group(), 64) *
                                       ceil_div(2 * pb.c_per_group(), 64);
      while (p.split < 64 && groups_per_slice * p.split < 512) p.split *= 2;
    }
    p.batch_chunk = largest_chunk(pb, p.size, p.split, cap, p.gauss != 0);
    while (p.split > 1 && layout(pb, p.size, p.batch_chunk, 1).tiles < p.split) p.split /= 2;
    const WorkLayout l = layout_of(pb, p, p.split);
    std::vector<gemm::TileParams> candidates = gemm::preferred_tiles(device.is_gpu);
    if (device.is_gpu && l.gemm_m >= 128 && l.gemm_n >= 128 * 16) candidates.insert(candidates.begin(), gemm::large_gpu_tiles());
    // A chunk of few tiles (large filter spectra leave the workspace room for few images: u8's 96 x 256 channels
    // at T = 32 take 32 images, 32 tiles a bin) half fills 64-column tiles: 64 x 32 tiles on 16 x 8 work-items.
    if (device.is_gpu && l.gemm_n <= 32 && pb.direction != Direction::BackwardFilter) {
      gemm::TileParams narrow = candidates.front();
      narrow.tile_n = 32, narrow.threads_n = 8;
      candidates.insert(candidates.begin(), narrow);
    }
    Config config;
    for (const gemm::TileParams& tiles : candidates) {
      if (!device.is_gpu && tiles.threads() > 64) continue;
      static_cast<gemm::TileParams&>(p) = tiles;
      for (int64_t width : {4, 2, 1}) {
        if (a_vectorizes(l, width) || b_vectorizes(pb, l, width)) {
          p.vector_width = width;
          break;
        }
      }
      config = table().write(p);
      if (config_problem(*this, config, generic, device).empty()) break;
    }
    return config;  // the smallest setup when none fits: Plan::create then names the failing constraint
  }

  Config carry_config(const Config& tuned, const Problem&, const Problem& problem, const DeviceInfo& device) const override {
    return carried_config(tuned, default_config(problem, device), problem.conv());
  }

  KernelRecipe recipe(const Problem& generic, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    const Params p = table().read(config);
    const WorkLayout l = layout_of(pb, p, p.split);
    KernelRecipe recipe;
    recipe.source.file = "fft/fft.cl";
    recipe.source.defines = layout_defines(pb, epilogue, l, p.transform_tiles);
    table().add_defines(p, recipe.source.defines);
    auto& d = recipe.source.defines;
    d.erase("FFT_SIZE");  // the kernels read FFT_T
    d["DFT_UNROLL"] = device.is_gpu ? "1" : "0";
    d["FFT_CHUNKS"] = std::to_string(ceil_div(pb.n, p.batch_chunk));  // one: backward-filter's GEMM writes M
    d["A_VECTOR"] = std::to_string(a_vectorizes(l, p.vector_width) ? p.vector_width : 1);
    d["B_VECTOR"] = std::to_string(b_vectorizes(pb, l, p.vector_width) ? p.vector_width : 1);
    recipe.workspace_bytes = l.total * sizeof(float);
    const int64_t layers = (pb.direction == Direction::BackwardFilter ? p.split : 1) * pb.groups * bins(p.size) * l.gemms;
    const LaunchGeometry gemm_geometry = gemm::launch_geometry(l.gemm_m, l.gemm_n, layers, p);
    recipe.steps = steps(pb, epilogue, l, p.batch_chunk, p.split, p.transform_tiles,
                         transform_steps::gemm_kernel_step(gemm_geometry));
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_fft() { return std::make_unique<FftFamily>(); }

}  // namespace convtune
