// The fft_wgmma family: the fft family's FFT tiling (same transforms, workspace, tile sizes and Gauss planes) with
// the per-bin GEMMs on Hopper's wgmma (kernels/fft/fft_wgmma.cu), in tf32 or 3xtf32 math, all three directions; CUDA
// on compute capability 9.0. fft_tc runs the same GEMMs on mma.sync, at half wgmma's rate on Hopper: in 3xtf32 its
// three products cost what FP32 FMAs cost, so on alex2 the split mode ran no faster than fft in FP32.
#include <fmt/format.h>

#include <algorithm>

#include "convtune/plan.h"
#include "src/families/families.h"
#include "src/families/fft/fft_plan.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

using namespace fft;

struct Params {
  int64_t size = 0, gauss = 0, transform_tiles = 0, batch_chunk = 0, split = 0;
  int64_t wg_m = 0, block_n = 0, loads_ahead = 0;
  int64_t block_m() const { return 64 * wg_m; }
  int64_t threads() const { return 128 * wg_m; }
};

const ParameterTable<Params>& table() {
  static const ParameterTable<Params> t = [] {
    std::vector<ParameterTable<Params>::Field> fields;
    add_transform_fields<Params>(fields);
    fields.push_back({"WG_M", &Params::wg_m, {2, 1}, "warpgroups along M: block tiles of 64 x WG_M rows, 128 x WG_M threads"});
    fields.push_back({"BLOCK_N", &Params::block_n, {128, 64, 256},
                      "block tile columns: one m64nBLOCK_N wgmma per warpgroup and reduction step"});
    fields.push_back({"LOADS_AHEAD", &Params::loads_ahead, {2, 1},
                      "reduction tiles whose loads are in flight in registers: 2 hides their latency behind two "
                      "tiles' MMAs, at a second set of registers"});
    return ParameterTable<Params>(std::move(fields));
  }();
  return t;
}

bool split3(const ConvProblem& pb) { return pb.math == MathMode::TF32x3; }

WorkLayout layout_of(const ConvProblem& pb, const Params& p) {
  return layout(pb, p.size, p.batch_chunk, p.split, p.gauss != 0);
}

// Two buffers of the big parts' A and B tiles (and in 3xtf32 the residuals'), 128-byte rows, plus 1024 bytes to
// align them (wg_workspace_gemm.h).
size_t shared_bytes(const Params& p, bool split) {
  return static_cast<size_t>(2 * (split ? 2 : 1) * (p.block_m() + p.block_n) * 128 + 1024);
}

// Registers a thread holds beside addresses: the accumulators (and in 3xtf32 a tile's partial sums), the 16-byte
// groups of LOADS_AHEAD tiles in flight (in 3xtf32 one more tile's worth for the big parts and residuals being
// stored), and an N-contiguous B's (forward, backward-data) transposing stores. ptxas's count
// (tensor_core_nvrtc_test) is the judge; this keeps the search away from configurations that spill: in 3xtf32, WG_M 1
// with BLOCK_N 128 (240 here) spilled 212-288 bytes and WG_M 2, BLOCK_N 128, LOADS_AHEAD 2 (240) 404 bytes in
// backward-data, where WG_M 2 with one tile ahead (208) took 242-255 registers and none spilled.
int64_t estimated_registers(const Params& p, bool split, bool n_contiguous_b) {
  const int64_t groups = (p.block_m() + p.block_n) * 8 / p.threads();
  return p.block_n / 2 * (split ? 2 : 1) + 4 * groups * (p.loads_ahead + (split ? 1 : 0)) + (n_contiguous_b ? 16 : 0);
}
constexpr int64_t kRegisterBudget = 208;

class FftWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "fft_wgmma"; }
  std::string description() const override {
    return "FFT tiling for stride-1 filters up to 31x31 as the fft family computes it, the per-bin GEMMs of the "
           "complex products on Hopper's wgmma (tf32 or 3xtf32 math, operands rounded and split on their way into "
           "shared memory); all directions; CUDA on compute capability 9.0";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }

  // In 3xtf32, the layers fft_tc claims: filters of 5x5 and more over at least 32 channels a group whose batch fits
  // the workspace in one chunk. Measured on the H200 with the built-in defaults, alex2 in 3xtf32: 0.394 / 0.342 / 0.382
  // ms forward / backward-data / backward-filter, where fft_tc took 0.442 / 0.384 / 0.447 and fft in FP32 0.48 / 0.43 /
  // 0.56. In tf32 the two ran level (0.363 / 0.294 / 0.354 tuned against fft_tc's 0.361 / 0.301 / 0.361), so fft_tc
  // keeps its claim there. On AlexNet's 3x3 layers fft_wgmma's defaults in 3xtf32 ran 0.84-0.94x winograd_tc's tuned
  // time, but 3x3 layers of other sizes were not measured: tuning entries choose it there, winograd_tc keeps the claim.
  std::string untuned_claim(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    if (pb.math != MathMode::TF32x3 || !large_filter_layer_in_one_chunk(pb, device)) return {};
    return fmt::format("a {}x{} stride-1 layer with {} channels a group whose batch fits the workspace in one chunk, in "
                       "3xtf32: the bins' three TF32 products on wgmma",
                       pb.r, pb.s, std::min(pb.c_per_group(), pb.k_per_group()));
  }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (!generic.is_conv()) return "computes convolutions, not matrix products";
    if (generic.type() != ElementType::F32) {
      return fmt::format("fft_wgmma computes fp32 tensors in tf32 or 3xtf32 math, not {} tensors",
                         to_string(generic.type()));
    }
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device, true); !why.empty())
      return why;
    return unsupported_shape_reason(generic.conv(), epilogue, device);
  }

  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo&) const override {
    return poor_fit(problem.conv());
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& generic) const override {
    using X = ConstraintContext;
    const ConvProblem pb = generic.conv();
    const ParameterTable<Params>& t = table();
    const bool split = split3(pb);
    const bool n_contiguous_b = pb.direction != Direction::BackwardFilter;
    std::vector<Constraint> list = transform_constraints(t, pb);
    // The GEMM's rows: output channels, twice them without Gauss's planes; the larger count bounds both.
    const int64_t rows = 2 * (pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group());
    list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&Params::wg_m}, [rows](const Params& p, const X&) {
      return ceil_div(rows, p.block_m()) <= wgmma::kMaxGridAxis;
    }));
    list.push_back(t.constraint("both buffers' shared memory within the device's opt-in limit",
                                {&Params::wg_m, &Params::block_n}, [split](const Params& p, const X& x) {
                                  return shared_bytes(p, split) <=
                                         std::max(x.device.local_memory_bytes, x.device.local_memory_optin_bytes);
                                }));
    list.push_back(t.constraint("threads within the device limit", {&Params::wg_m}, [](const Params& p, const X& x) {
      return static_cast<size_t>(p.threads()) <= x.device.max_work_group_size;
    }));
    list.push_back(t.constraint(
        fmt::format("estimated registers (accumulators{}, the loads in flight) within {}",
                    split ? ", a tile's partial sums" : "", kRegisterBudget),
        {&Params::wg_m, &Params::block_n, &Params::loads_ahead},
        [split, n_contiguous_b](const Params& p, const X&) {
          return estimated_registers(p, split, n_contiguous_b) <= kRegisterBudget;
        }));
    return list;
  }

  Config default_config(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& pb = generic.conv();
    const uint64_t cap = workspace_limit(device);
    Params p;
    p.size = default_size(pb);
    p.gauss = 0;  // one GEMM of twice the channels: the tensor cores' multiplications are cheap (as fft_tc)
    p.transform_tiles = default_transform_tiles(p.size, device);
    p.split = 1;
    p.batch_chunk = largest_chunk(pb, p.size, 1, cap, false);
    const WorkLayout l = layout_of(pb, p);
    const wgmma::Params tiles = wgmma::default_tiles(l.gemm_m, l.gemm_n);
    p.wg_m = tiles.wg_m;
    p.block_n = tiles.block_n;
    if (split3(pb)) p.block_n = std::min<int64_t>(p.block_n, 128);
    p.loads_ahead = 2;
    if (pb.direction == Direction::BackwardFilter) {
      // Each slice keeps at least 4 reduction tiles of 32 (as fft_tc does).
      const int64_t blocks = gemm_layers(pb, l, 1) * ceil_div(l.gemm_m, p.block_m()) * ceil_div(l.gemm_n, p.block_n);
      const Slices slices = filter_slices(pb, p.size, blocks, 4 * 32, device);
      p.split = slices.split, p.batch_chunk = slices.chunk;
    }
    // One tile's loads in flight, then narrower tiles, where the defaults' do not fit (registers, shared memory on a
    // smaller device).
    for (int64_t block_n : {p.block_n, int64_t{128}, int64_t{64}}) {
      for (int64_t ahead : {int64_t{2}, int64_t{1}}) {
        Params q = p;
        q.block_n = block_n;
        q.loads_ahead = ahead;
        if (config_problem(*this, table().write(q), generic, device).empty()) return table().write(q);
      }
    }
    return table().write(p);  // when nothing fits, Plan::create names the failing constraint
  }

  Config carry_config(const Config& tuned, const Problem&, const Problem& problem, const DeviceInfo& device) const override {
    return carried_config(tuned, default_config(problem, device), problem.conv());
  }

  KernelRecipe recipe(const Problem& generic, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    (void)device;
    const ConvProblem& pb = generic.conv();
    const Params p = table().read(config);
    const WorkLayout l = layout_of(pb, p);
    const bool split = split3(pb);
    KernelRecipe recipe;
    recipe.source.file = "fft/fft_wgmma.cu";
    recipe.source.defines = layout_defines(pb, epilogue, l, p.transform_tiles);
    auto& d = recipe.source.defines;
    table().add_defines(p, d);
    d.erase("FFT_SIZE");  // the kernels read FFT_T
    d["ELEM"] = "2";      // TF32 operands in FP32 storage (wgmma.h)
    d["MATH_SPLIT"] = split ? "1" : "0";
    d["DFT_UNROLL"] = "1";
    d["FFT_CHUNKS"] = std::to_string(ceil_div(pb.n, p.batch_chunk));  // one: backward-filter's GEMM writes M
    d["A_VECTOR"] = a_vectorizes(l, 4) ? "4" : "1";
    d["B_VECTOR"] = b_vectorizes(pb, l, 4) ? "4" : "1";
    recipe.source.options.push_back("--gpu-architecture=sm_90a");
    recipe.workspace_bytes = l.total * sizeof(float);
    LaunchGeometry geometry;
    geometry.dims = 3;
    geometry.global = {static_cast<size_t>(ceil_div(l.gemm_n, p.block_n) * p.threads()),
                       static_cast<size_t>(ceil_div(l.gemm_m, p.block_m())),
                       static_cast<size_t>(gemm_layers(pb, l, p.split))};
    geometry.local = {static_cast<size_t>(p.threads()), 1, 1};
    geometry.dynamic_local_bytes = shared_bytes(p, split);
    recipe.steps = steps(pb, epilogue, l, p.batch_chunk, p.split, p.transform_tiles,
                         transform_steps::workspace_gemm_step("fft_gemm_wgmma", geometry));
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_fft_wgmma() { return std::make_unique<FftWgmmaFamily>(); }

}  // namespace convtune
