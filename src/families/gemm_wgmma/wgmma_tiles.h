// The wgmma tile description shared by gemm_wgmma and im2col_wgmma (kernels/tensor_core/wgmma.h): typed parameters,
// their constraints (shared memory, the grid), which problems and devices Hopper's warpgroup MMA serves, the
// element-type defines and the main kernel's launch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/extension/kernel_family.h"
#include "src/families/parameter_table.h"

namespace convtune::wgmma {

struct Params {
  int64_t wg_m = 0;     // warpgroups along M: block tiles of 64 * WG_M rows
  int64_t block_n = 0;  // block tile columns: one m64nBLOCK_N wgmma per warpgroup and reduction step
  int64_t stages = 0;   // shared-memory stages (copies run STAGES-2 tiles ahead)
  int64_t split_k = 0;  // reduction slices, FP32 partials summed by a second kernel
  int64_t block_m() const { return 64 * wg_m; }
  int64_t threads() const { return 128 * wg_m; }
};

inline constexpr int64_t kMaxGridAxis = 65535;  // CUDA's limit on grid axes 1 and 2

// The families' size arithmetic: ceil(a / b), a rounded up to a multiple of b, and a workspace region's bytes
// rounded up to 256 (every region starts aligned for 16-byte copies and coalesced access).
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
inline uint64_t aligned(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

// Empty when `family` computes problems of this element type and math mode on the device: BF16 or FP16 tensors (fp32
// math), or FP32 tensors in tf32 math (and 3xtf32 where the family's kernel splits them: `split_tf32`), through CUDA
// on a compute capability 9.0 GPU (wgmma exists on sm_90a only).
std::string unsupported_reason(std::string_view family, const Problem& problem, const DeviceInfo& device,
                               bool split_tf32 = false);

// Bytes of one element in shared memory and global memory (2 for 16-bit tensors, 4 for TF32's FP32 storage), and the
// reduction elements of one stage (128-byte rows) and of one 16-byte copy.
int64_t element_bytes(ElementType type);
int64_t tile_k(ElementType type);
int64_t chunk_elements(ElementType type);

// The table of WG_M, BLOCK_N, STAGES and SPLIT_K with the given split candidates.
ParameterTable<Params> make_table(std::vector<int64_t> split_candidates, std::string split_description);
size_t shared_bytes(const Params& p);  // all stages plus 1024 bytes to align them
// Shared memory and threads; the family adds its problem's (grid, split-K, workspace). A table of a struct derived
// from Params (a family's further parameters) takes them too.
template <typename P>
std::vector<Constraint> tile_constraints(const ParameterTable<P>& t) {
  using X = ConstraintContext;
  return {
      t.constraint("shared memory of all stages within the device's opt-in limit", {&P::wg_m, &P::block_n, &P::stages},
                   [](const P& p, const X& x) {
                     return shared_bytes(p) <= std::max(x.device.local_memory_bytes, x.device.local_memory_optin_bytes);
                   }),
      t.constraint("threads within the device limit", {&P::wg_m},
                   [](const P& p, const X& x) { return static_cast<size_t>(p.threads()) <= x.device.max_work_group_size; }),
      // 64 x 256 accumulators of two warpgroups take 128 registers a thread beside the copies' addresses: ptxas
      // reported 203 for WG_M 2, BLOCK_N 256 (tensor_core_nvrtc_test); one warpgroup would not hide the latency.
  };
}

// Block tiles for an m x n GEMM: two warpgroups where M fills 128 rows, BLOCK_N 256/128/64 by n, four stages.
Params default_tiles(int64_t m, int64_t n);
// `p` with SPLIT_K doubled while `blocks` x SPLIT_K x 2 still fits in twice the device's multiprocessors, SPLIT_K
// stays within `max_split`, each slice keeps at least `min_tiles` reduction tiles of `reduction` elements, and
// `valid` holds (the family's constraints).
Params split_to_fill(Params p, int64_t blocks, int64_t reduction, ElementType type, int64_t max_split,
                     int64_t min_tiles, const DeviceInfo& device, const std::function<bool(const Params&)>& valid);

// The backward-filter families' parameters (implicit_gemm_shifted_wgmma, wgrad_nhwc_wgmma): the tiles and SPLIT_K
// up to 128 slices of the N*P*Q reduction.
const ParameterTable<Params>& filter_table();
// A split-K convolution GEMM's constraints beside the tiles' (implicit_gemm_shifted_wgmma, wgrad_nhwc_wgmma): `m`
// rows of M-tiles and `groups` x SPLIT_K layers within the grid, every slice at least one reduction tile of
// `reduction`, and workspace_bytes(SPLIT_K) within the device's workspace limit.
std::vector<Constraint> split_gemm_constraints(const ParameterTable<Params>& t, int64_t m, int64_t reduction,
                                               int64_t groups, ElementType type,
                                               std::function<uint64_t(int64_t)> workspace_bytes);
// Their untuned configuration: default_tiles for m x cols, stages lowered to 3 while not `valid`, then the reduction
// split until the blocks fill the GPU twice over (at most 128 slices, 8 reduction tiles or more each).
Params split_gemm_default(int64_t m, int64_t cols, int64_t reduction, int64_t groups, ElementType type,
                          const DeviceInfo& device, const std::function<bool(const Params&)>& valid);

// The parameters as defines plus ELEM (0 BF16, 1 FP16, 2 TF32), and the sm_90a target option.
void add_defines(const ParameterTable<Params>& t, const Params& p, ElementType type, KernelRecipe& recipe);
// ceil(n / BLOCK_N) x ceil(m / BLOCK_M) x layers blocks of 128 WG_M threads with the stages' shared memory.
LaunchGeometry main_geometry(int64_t m, int64_t n, int64_t layers, const Params& p);
// A one-dimensional launch of `count` work-items in groups of 256 (the gathers, transposes and reductions).
LaunchStep elementwise_step(std::string kernel, std::vector<ArgSource> args, int64_t count);

// The convolution families' shared rules: what they refuse beyond wgmma::unsupported_reason (a fused max-pool,
// epilogues outside forward, 32-bit indexing, the grid's group axis), and their untuned poor fit (GEMMs narrower than
// one 8-column wgmma tile, depthwise layers).
std::string conv_unsupported_reason(std::string_view family, const Problem& problem, const Epilogue& epilogue,
                                    const DeviceInfo& device, bool split_tf32 = false);
std::string conv_poor_fit(const ConvProblem& problem);

}  // namespace convtune::wgmma
