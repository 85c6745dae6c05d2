// The wgmma tile description shared by gemm_wgmma and im2col_wgmma: see wgmma_tiles.h.
#include "src/families/gemm_wgmma/wgmma_tiles.h"

#include <fmt/format.h>

#include <algorithm>

#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/nvidia_arch.h"

namespace convtune::wgmma {

std::string unsupported_reason(std::string_view family, const Problem& problem, const DeviceInfo& device,
                               bool split_tf32) {
  if (!device.can_run_kernels) return fmt::format("needs a device that compiles kernels: {}", device.cannot_run_reason);
  const bool narrow = problem.type() != ElementType::F32;
  const bool split = !narrow && split_tf32 && problem.math() == MathMode::TF32x3;
  if (!narrow && problem.math() != MathMode::TF32 && !split) {
    return fmt::format("{} computes bf16 and fp16 tensors and fp32 tensors in {} math, not {} math", family,
                       split_tf32 ? "tf32 or 3xtf32" : "tf32", to_string(problem.math()));
  }
  const std::string what =
      narrow ? fmt::format("{} tensors", to_string(problem.type())) : fmt::format("{} math", to_string(problem.math()));
  if (device.backend != BackendKind::Cuda) {
    return fmt::format("{} runs Hopper's wgmma through CUDA (sm_90a), not on {} ({}), for {}", family, device.id,
                       device.name, what);
  }
  if (families::nvidia_compute_capability(device) != 90) {
    return fmt::format("{} needs an NVIDIA GPU of compute capability 9.0 (wgmma exists on sm_90a only), not {} ({}, "
                       "architecture {}), for {}",
                       family, device.id, device.name, device.architecture.empty() ? "-" : device.architecture, what);
  }
  return {};
}

int64_t element_bytes(ElementType type) { return type == ElementType::F32 ? 4 : 2; }
int64_t tile_k(ElementType type) { return 128 / element_bytes(type); }
int64_t chunk_elements(ElementType type) { return 16 / element_bytes(type); }

ParameterTable<Params> make_table(std::vector<int64_t> split_candidates, std::string split_description) {
  using P = Params;
  return ParameterTable<Params>({
      {"WG_M", &P::wg_m, {2, 1}, "warpgroups along M: block tiles of 64 x WG_M rows, 128 x WG_M threads"},
      {"BLOCK_N", &P::block_n, {128, 256, 64}, "block tile columns: one m64nBLOCK_N wgmma per warpgroup and step"},
      {"STAGES", &P::stages, {4, 3, 5, 6}, "shared-memory stages; the copies run STAGES-2 tiles ahead"},
      {"SPLIT_K", &P::split_k, std::move(split_candidates), std::move(split_description)},
  });
}

size_t shared_bytes(const Params& p) {
  return static_cast<size_t>(p.stages * (p.block_m() + p.block_n) * 128 + 1024);
}

Params default_tiles(int64_t m, int64_t n) {
  Params p;
  p.wg_m = m >= 128 ? 2 : 1;
  p.block_n = n >= 192 ? 256 : n >= 96 ? 128 : 64;
  // Two warpgroups on 256 columns hold 128 FP32 accumulators each: keep it for wide outputs only.
  if (p.block_n == 256 && m < 256) p.block_n = 128;
  p.stages = 4;
  p.split_k = 1;
  return p;
}

Params split_to_fill(Params p, int64_t blocks, int64_t reduction, ElementType type, int64_t max_split,
                     int64_t min_tiles, const DeviceInfo& device, const std::function<bool(const Params&)>& valid) {
  const int64_t target = 2 * std::max(1, device.compute_units);
  while (p.split_k < max_split && blocks * p.split_k * 2 <= target &&
         reduction / (p.split_k * 2) >= min_tiles * tile_k(type)) {
    Params q = p;
    q.split_k *= 2;
    if (!valid(q)) break;
    p = q;
  }
  return p;
}

const ParameterTable<Params>& filter_table() {
  static const ParameterTable<Params> t = make_table(
      {1, 2, 4, 8, 16, 32, 64, 128},
      "slices of the N*P*Q reduction, FP32 partials summed by a second kernel (fills the GPU: backward-filter's output "
      "is only K x R*S*C/groups, one or two tiles on 1x1 layers of few channels)");
  return t;
}

std::vector<Constraint> split_gemm_constraints(const ParameterTable<Params>& t, int64_t m, int64_t reduction,
                                               int64_t groups, ElementType type,
                                               std::function<uint64_t(int64_t)> workspace_bytes) {
  using X = ConstraintContext;
  std::vector<Constraint> list = tile_constraints(t);
  list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&Params::wg_m},
                              [m](const Params& p, const X&) { return ceil_div(m, p.block_m()) <= kMaxGridAxis; }));
  list.push_back(t.constraint("groups x split-K slices within the grid limit", {&Params::split_k},
                              [groups](const Params& p, const X&) { return groups * p.split_k <= kMaxGridAxis; }));
  list.push_back(t.constraint("each split-K slice gets at least one reduction tile", {&Params::split_k},
                              [reduction, type](const Params& p, const X&) {
                                const int64_t tiles = ceil_div(reduction, tile_k(type));
                                return (p.split_k - 1) * ceil_div(tiles, p.split_k) < tiles;
                              }));
  list.push_back(t.constraint("workspace within the limit", {&Params::split_k},
                              [bytes = std::move(workspace_bytes)](const Params& p, const X& x) {
                                return bytes(p.split_k) <= workspace_limit(x.device);
                              }));
  return list;
}

Params split_gemm_default(int64_t m, int64_t cols, int64_t reduction, int64_t groups, ElementType type,
                          const DeviceInfo& device, const std::function<bool(const Params&)>& valid) {
  Params p = default_tiles(m, cols);
  while (!valid(p) && p.stages > 3) --p.stages;
  const int64_t blocks = ceil_div(m, p.block_m()) * ceil_div(cols, p.block_n) * groups;
  return split_to_fill(p, blocks, reduction, type, 128, 8, device, valid);
}

void add_defines(const ParameterTable<Params>& t, const Params& p, ElementType type, KernelRecipe& recipe) {
  t.add_defines(p, recipe.source.defines);
  recipe.source.defines["ELEM"] = type == ElementType::BF16 ? "0" : type == ElementType::F16 ? "1" : "2";
  recipe.source.options.push_back("--gpu-architecture=sm_90a");
}

LaunchGeometry main_geometry(int64_t m, int64_t n, int64_t layers, const Params& p) {
  LaunchGeometry g;
  g.dims = 3;
  g.global = {static_cast<size_t>(ceil_div(n, p.block_n) * p.threads()), static_cast<size_t>(ceil_div(m, p.block_m())),
              static_cast<size_t>(layers)};
  g.local = {static_cast<size_t>(p.threads()), 1, 1};
  g.dynamic_local_bytes = shared_bytes(p);
  return g;
}

LaunchStep elementwise_step(std::string kernel, std::vector<ArgSource> args, int64_t count) {
  LaunchStep step{std::move(kernel), std::move(args), {}};
  step.geometry.dims = 1;
  step.geometry.global = {static_cast<size_t>(ceil_div(std::max<int64_t>(count, 1), 256) * 256), 1, 1};
  step.geometry.local = {256, 1, 1};
  return step;
}

std::string conv_unsupported_reason(std::string_view family, const Problem& problem, const Epilogue& epilogue,
                                    const DeviceInfo& device, bool split_tf32) {
  if (!problem.is_conv()) return "computes convolutions, not matrix products";
  if (std::string why = unsupported_reason(family, problem, device, split_tf32); !why.empty()) return why;
  const ConvProblem& pb = problem.conv();
  if (epilogue.pool > 1) return "a fused max-pool is not implemented (bias and ReLU are)";
  if (epilogue.any() && pb.direction != Direction::Forward) return "epilogues apply to the forward direction only";
  for (int64_t elements : {pb.x_elements(), pb.w_elements(), pb.y_elements()}) {
    if (elements > kMaxTensorElements) return "a tensor exceeds 2^31-1 elements (32-bit indexing)";
  }
  if (pb.groups > kMaxGridAxis) return fmt::format("groups={} exceeds the grid limit", pb.groups);
  return {};
}

// In tf32 the FP32 families and depthwise compute these; in 16 bits nothing else does, and a plan whose every family
// is a poor fit still takes the first.
std::string conv_poor_fit(const ConvProblem& pb) {
  const int64_t cols = pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group();
  if (cols < 8) return fmt::format("a GEMM of {} columns per group fills less than one 8-column wgmma tile", cols);
  return depthwise::leave_to_depthwise(pb);
}

}  // namespace convtune::wgmma
