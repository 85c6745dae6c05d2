// direct_tiled: seed 000's direct convolution as a KernelFamily; support checks here, per-direction parameters,
// constraints and launches in the output-tiled (forward, backward-data) and filter-tiled (backward-filter) halves.
#include <fmt/format.h>

#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/direct_tiled/direct_tiled_variant.h"
#include "src/families/families.h"

namespace convtune {

namespace {

// CUDA's limit of blocks on grid axes 1 and 2.
constexpr int64_t kMaxGridYZ = 65535;

class DirectTiledFamily final : public KernelFamily {
 public:
  std::string name() const override { return "direct_tiled"; }
  std::string description() const override {
    return "direct convolution, each work-item a (channel, row, column) output tile, the input tile + halo in "
           "local memory; fused bias/ReLU/2x2 max-pool (seed 000)";
  }

  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = fp32_kernel_conv_reason(name(), generic, device); !why.empty()) return why;
    const ConvProblem& problem = generic.conv();
    if (epilogue.any() && problem.direction != Direction::Forward) {
      return fmt::format("the fused epilogue ({}) applies to forward only: {} computes a gradient, which has no "
                         "bias, ReLU or pooling to fuse",
                         to_string(epilogue), to_string(problem.direction));
    }
    if (epilogue.pool != 1 && epilogue.pool != 2) {
      return fmt::format("pool={} is not implemented: only the 2x2 max-pool with stride 2 (pool=2)", epilogue.pool);
    }
    if (epilogue.pool == 2 && (problem.p() < 2 || problem.q() < 2)) {
      return fmt::format("a 2x2 max-pool needs at least 2x2 convolution outputs, the problem has {}x{}", problem.p(),
                         problem.q());
    }
    // Launch axis 1 holds row blocks (forward, backward-data) or channel blocks (backward-filter), axis 2
    // channel blocks (forward, backward-data): at most one block per row or channel.
    const bool data = problem.direction == Direction::BackwardData;
    const bool filter = problem.direction == Direction::BackwardFilter;
    const int64_t rows = filter ? 1 : data ? problem.h : problem.p();
    const int64_t channels = data ? problem.c : problem.k;
    if (rows > kMaxGridYZ || channels > kMaxGridYZ) {
      return fmt::format("{} rows and {} channels of the written tensor exceed the {} blocks CUDA launches on grid "
                         "axes 1 and 2",
                         rows, channels, kMaxGridYZ);
    }
    if (device.max_work_group_size < 1) return "the device reports no work-group size";
    return {};
  }

  // Depthwise layers: its work-items tile C/groups or K/groups channels, one (or the multiplier) there.
  // Strided backward-data on ungrouped layers: measured on the H200 against im2col_gemm's default, 0.130 vs 0.013 ms
  // (7x5 stride 2), 0.228 vs 0.184 and 0.95 (tuned) vs 0.48 (3x3 stride 2), 1.71 vs 0.51 (C=3 7x7 stride 2), 8.40 vs
  // 0.94 (C=3 11x11 stride 4); it won only on two layers of under 0.02 ms, by less than 10%.
  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo& device) const override {
    const ConvProblem& problem = generic.conv();
    if (depthwise::direct_tiled_backward_data(problem, device)) return {};  // the depthwise family gives way here
    // Except 3x3 and smaller filters over at most 32 input channels, where it won on layers never tuned (H200):
    // C=3 at N=256 0.050 ms against im2col_gemm's 0.071, C=32 on a 208x208 image 0.335 against 0.414 (C=64 lost,
    // 0.228 against 0.184). Up to 15 taps over at most 8 channels too: a 3x5 stride-2 layer of 5 channels (untuned
    // check, H200) ran direct_tiled's default at 0.0104-0.0107 ms in two runs and im2col_gemm's at 0.0116-0.0121 in
    // six; 35 taps over 16 channels lost 10x (0.130 against 0.013).
    const bool small_filter_few_channels =
        (problem.r * problem.s <= 9 && problem.c <= 32) || (problem.r * problem.s <= 15 && problem.c <= 8);
    if (problem.direction == Direction::BackwardData && problem.groups == 1 && !small_filter_few_channels &&
        (problem.stride.h > 1 || problem.stride.w > 1)) {
      return fmt::format("ungrouped backward-data with stride {}x{} runs 1.2-10x slower than im2col_gemm",
                         problem.stride.h, problem.stride.w);
    }
    return depthwise::leave_to_depthwise(problem);
  }

  std::vector<Parameter> parameters(const Problem& problem) const override {
    return variant(problem)->parameters();
  }
  std::vector<Constraint> constraints(const Problem& problem) const override {
    return variant(problem)->constraints();
  }
  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    return variant(problem)->default_config(device);
  }
  KernelRecipe recipe(const Problem& problem, const Epilogue& epilogue, const Config& config,
                      const DeviceInfo& device) const override {
    return variant(problem)->recipe(epilogue, config, device);
  }

 private:
  static std::unique_ptr<direct_tiled::DirectTiledVariant> variant(const Problem& generic) {
    const ConvProblem& problem = generic.conv();
    return problem.direction == Direction::BackwardFilter ? direct_tiled::make_filter_tiled(problem)
                                                          : direct_tiled::make_output_tiled(problem);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_direct_tiled() { return std::make_unique<DirectTiledFamily>(); }

}  // namespace convtune
