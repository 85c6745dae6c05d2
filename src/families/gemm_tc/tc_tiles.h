// The tensor-core tile description shared by gemm_tc and implicit_gemm_tc (kernels/tensor_core/tc_common.h):
// typed parameters, their named constraints (MMA shape, warps, registers, shared memory), the support test, the
// shared-memory size each layout takes, the defines and a starting default.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/extension/kernel_family.h"
#include "src/families/parameter_table.h"

namespace convtune::tensor_core {

struct Params {
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  int64_t warps_m = 0, warps_n = 0;
  int64_t stages = 0, smem_padding = 0, blocks_per_sm = 0;
  int64_t split_k = 0;
  int64_t threads() const { return 32 * warps_m * warps_n; }
};

// Which dimension of each operand's tile is contiguous in shared memory (the one contiguous in global memory).
struct TileLayout {
  bool a_kcontig = true;  // A tile [TILE_M][TILE_K]; else [TILE_K][TILE_M]
  bool b_kcontig = false;  // B tile [TILE_N][TILE_K]; else [TILE_K][TILE_N]
};

inline constexpr int64_t kMaxAccumulators = 128;       // FP32 accumulators per thread (4 per m16n8 tile)
inline constexpr int64_t kRegistersBesideTiles = 24;   // indices, loop state
inline constexpr int64_t kMaxRegisters = 255;          // per thread on every NVIDIA GPU since sm_35
inline constexpr int64_t kRegisterFile = 65536;        // 32-bit registers per multiprocessor
inline constexpr int64_t kMaxCopiesPerThread = 64;     // cp.async per thread per stage (the copy loops unroll)
inline constexpr int64_t kMaxGridAxis = 65535;         // CUDA's limit on grid axes 1 and 2

// A table of the tile parameters plus SPLIT_K with the given candidates and meaning. 16-bit element types step the
// reduction 16 at a time (m16n8k16), so their TILE_K candidates are 16, 32 and 64 instead of 8, 16 and 32.
ParameterTable<Params> make_table(std::vector<int64_t> split_candidates, std::string split_description,
                                  ElementType type = ElementType::F32);
// The tile parameters alone (make_table's fields without SPLIT_K), for a family whose Params extends these
// (winograd_tc: a table of its own; tile_constraints over a table of these fields holds for it too, the constraints
// naming their fields).
std::vector<ParameterTable<Params>::Field> tile_fields(ElementType type = ElementType::F32);
// The FP32 tile fields as a table of their own: the workspace GEMMs (fft_tc, winograd_tc) state their tile
// constraints and defines over it. Their SPLIT slices the reduction instead of SPLIT_K: each slice adds into its own
// copy of M across the chunks, which a split-K reduction per chunk would not.
const ParameterTable<Params>& tile_table();

// CONVTUNE_EMULATE_TENSOR_CORES=1: the tensor-core families run on every device that compiles kernels, with mma.sync,
// ldmatrix and cp.async emulated in plain OpenCL C (TC_EMULATE=1; slow). For testing what sits above the kernels
// (the nn layers' 16-bit path, plans, the tuner) on a machine without an NVIDIA GPU; tests/nn sets it.
bool emulated();

// Empty when `family` computes the problem on the device: FP32 tensors in tf32 or 3xtf32 math, or (where `sixteen_bit`
// says the family has the 16-bit kernels) BF16 or FP16 tensors, on an NVIDIA GPU of compute capability 8.0 or newer
// (CUDA or NVIDIA's OpenCL) whose compiler builds kernels.
std::string unsupported_reason(std::string_view family, const Problem& problem, const DeviceInfo& device,
                               bool sixteen_bit = false);

// Bytes of one shared-memory element: 4 (FP32 tiles, rounded to TF32 as they are read) or 2 (BF16/FP16 tiles).
int64_t element_bytes(ElementType type);
size_t shared_bytes(const Params& p, TileLayout layout, ElementType type = ElementType::F32);
// Shared memory one block may take on the device: the opt-in limit through CUDA (dynamic shared memory), the
// local-memory limit elsewhere (NVIDIA's OpenCL: static __local arrays).
uint64_t shared_limit(const DeviceInfo& device);
// Registers a thread needs, estimated: accumulators, a stage's fragments (twice for 3xTF32's split parts), copy
// addresses, the rest.
// 16-bit kernels stage their element-wise copies in registers (tc16_mainloop.h): those count too.
int64_t register_estimate(const Params& p, MathMode math, ElementType type = ElementType::F32);
// The register cap that BLOCKS_PER_SM blocks on one multiprocessor leave each thread.
int64_t register_cap(const Params& p);
// Whether the estimate fits that cap when the A or B tile (scalar_a, scalar_b) is copied one float at a time, as the
// transform families' GEMMs over the workspace (winograd_tc, fft_tc) copy rows whose length is not a multiple of 4.
// register_estimate counts one register per copied float, which fits 16-byte copies (a 64-bit address and the
// zero-fill size for four floats) but not single-float ones, which each take those for one float: these count 4.
// Measured through ptxas: winograd_tc's backward-filter slices of an odd number of tiles (alex2's F(2x2,5x5) with
// SPLIT=4: 49) spilled 60 bytes at 255 registers with an estimate of 184 (gemm_tc spills the same with an odd K).
bool fits_registers_with_copies(const Params& p, MathMode math, bool scalar_a, bool scalar_b);

// The tile constraints; the family adds its problem's (split-K, grid).
std::vector<Constraint> tile_constraints(const ParameterTable<Params>& t, TileLayout layout, MathMode math,
                                         ElementType type = ElementType::F32);

// A workspace GEMM's tile constraints (tile_table's) and its M-tiles within the grid limit, `rows` being the GEMM's
// rows; P extends Params.
template <typename P>
std::vector<Constraint> workspace_gemm_constraints(const ParameterTable<P>& t, TileLayout layout, MathMode math,
                                                   int64_t rows) {
  std::vector<Constraint> list = tile_constraints(tile_table(), layout, math);
  list.push_back(t.constraint("M-tiles within the CUDA grid limit", {&P::tile_m}, [rows](const P& p, const ConstraintContext&) {
    return (rows + p.tile_m - 1) / p.tile_m <= kMaxGridAxis;
  }));
  return list;
}

// A starting configuration for an m x n GEMM with this reduction: 128x128 tiles of 2x4 warps (64x32 warp tiles)
// where the GEMM fills them, smaller ones where it does not, TILE_K 32, three stages, padded rows, no split.
// 16-bit types: TILE_K 32 where the reduction allows, four stages.
Params default_tiles(int64_t m, int64_t n, int64_t reduction, ElementType type = ElementType::F32);
// `start` if valid, else the first valid of: TILE_K halved, fewer stages, then the tiles halved (the warps
// following); `start` when none is (the plan then names the failing constraint).
Params fit_default(Params start, const std::function<bool(const Params&)>& valid, int64_t min_tile_k = 8);
// The split of the reduction that brings the blocks up to about two per multiprocessor, doubling while each slice
// keeps at least 4 TILE_K tiles and `valid` holds, at most `max_split`.
int64_t default_split(int64_t blocks, int64_t reduction, const Params& p, const DeviceInfo& device, int64_t max_split,
                      const std::function<bool(const Params&)>& valid);

// The parameters as -D defines plus MATH_SPLIT (1 for 3xTF32) and, for 16-bit tensors, ELEM_BF16 (1 BF16, 0 FP16).
void add_defines(const ParameterTable<Params>& t, const Params& p, MathMode math, std::map<std::string, std::string>& d,
                 ElementType type = ElementType::F32);
// The main kernel's launch: ceil(n / TILE_N) x ceil(m / TILE_M) x `layers` blocks (layers: batch items or groups,
// times split-K slices) of TILE_THREADS, with the layout's shared memory (CUDA: dynamic shared memory).
LaunchGeometry main_geometry(int64_t m, int64_t n, int64_t layers, const Params& p, TileLayout layout,
                             ElementType type = ElementType::F32);
// tc_splitk_reduce over `elements` outputs, one thread each; `args` after the workspace.
LaunchStep splitk_reduce_step(std::vector<ArgSource> args, int64_t elements, const DeviceInfo& device);
// On NVIDIA's OpenCL, which has no __launch_bounds__, BLOCKS_PER_SM's register cap as a compiler option.
void add_register_cap(KernelRecipe& recipe, const Params& p, const DeviceInfo& device);

}  // namespace convtune::tensor_core
