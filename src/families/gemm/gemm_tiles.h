// The tiled GEMM kernel (kernels/gemm/gemm.cl) as every family that runs it sees it: its tile parameters, their
// named constraints and launch geometry, declared once here for the gemm family, im2col_gemm and the dense layers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "convtune/backend.h"
#include "convtune/conv_problem.h"
#include "convtune/extension/kernel_family.h"
#include "src/families/parameter_table.h"

namespace convtune::gemm {

// A family's typed parameters derive from this, so its ParameterTable can name these fields (a pointer to a base
// member converts to a pointer to the derived struct's member).
struct TileParams {
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  int64_t threads_m = 0, threads_n = 0;
  int64_t local_padding = 0, vector_width = 0;
  int64_t register_vector = 1;  // runs of adjacent register-tile rows/columns read as one local vector
  int64_t prefetch = 0;         // 1: next tiles' global loads in flight during the FMAs
  int64_t threads() const { return threads_m * threads_n; }
  // Floats of both operands' tiles each thread holds between global load and local store.
  int64_t fetch_floats() const { return (tile_m * tile_k + tile_n * tile_k + threads() - 1) / threads(); }
};

inline constexpr uint64_t kPortableLocalBytes = 48 * 1024;  // CUDA's static shared memory limit
inline constexpr int64_t kMaxAccumulators = 64;            // register tile floats per thread, beyond which GPUs spill
inline constexpr size_t kMinThreads = 64;
inline constexpr int64_t kRegisterFile = 65536;              // 32-bit registers per multiprocessor
inline constexpr int64_t kRegistersBesideAccumulators = 32;  // addresses, indices, the a/b register slices
inline constexpr int64_t kMaxGridAxis = 65535;              // CUDA's grid limit on axes 1 and 2

inline size_t local_bytes(const TileParams& p) {
  return static_cast<size_t>(p.tile_k * (p.tile_m + p.local_padding) + p.tile_k * (p.tile_n + p.local_padding)) *
         sizeof(float);
}

// Whether `width`-float loads of A (or B) stay aligned and wholly inside or outside the matrix: the row pitch,
// the stored row length and the batch stride are multiples of it (gemm.cl's X_VECTOR contract; gemm_tc's too).
// Bytes of the partial products a split-K launch sums (none without a split): gemm and gemm_tc share it.
inline uint64_t split_k_workspace_bytes(const GemmProblem& g, int64_t split) {
  return split > 1 ? static_cast<uint64_t>(g.batch * split) * static_cast<uint64_t>(g.m * g.n) * sizeof(float) : 0;
}

// The split-K bounds of every GEMM family (gemm, gemm_tc, gemm_wgmma; P has split_k): batch x slices within the
// grid's axis 2, the partials within the workspace limit and a tensor's element bound.
template <typename P>
std::vector<Constraint> split_k_bounds(const ParameterTable<P>& t, const GemmProblem& g) {
  using X = ConstraintContext;
  return {
      t.constraint("batch x split-K slices within the grid limit", {&P::split_k},
                   [g](const P& p, const X&) { return g.batch * p.split_k <= kMaxGridAxis; }),
      t.constraint("split-K partials within the workspace limit", {&P::split_k},
                   [g](const P& p, const X& x) {
                     return split_k_workspace_bytes(g, p.split_k) <= workspace_limit(x.device) &&
                            static_cast<double>(g.batch * p.split_k) * g.m * g.n <= kMaxTensorElements;
                   }),
  };
}

inline bool a_vectorizes(const GemmProblem& g, int64_t width) {
  return g.ld_a() % width == 0 && g.a_cols() % width == 0 && (g.batch == 1 || g.batch_stride_a() % width == 0);
}
inline bool b_vectorizes(const GemmProblem& g, int64_t width) {
  return g.ld_b() % width == 0 && g.b_cols() % width == 0 && (g.batch == 1 || g.batch_stride_b() % width == 0);
}

// Reduction elements per split-K slice: a whole number of TILE_K tiles, so every slice but the last is full.
inline int64_t slice_length(int64_t k, int64_t split, int64_t tile_k) {
  return ((k + split - 1) / split + tile_k - 1) / tile_k * tile_k;
}

// The tile fields under their kernel names, appended to a family's table.
template <typename P>
void add_tile_fields(std::vector<typename ParameterTable<P>::Field>& fields) {
  fields.push_back({"TILE_M", &P::tile_m, {16, 32, 64, 128}, "GEMM rows per work-group"});
  fields.push_back({"THREADS_M", &P::threads_m, {4, 8, 16, 32}, "work-group rows; a thread owns TILE_M/THREADS_M rows"});
  fields.push_back({"TILE_N", &P::tile_n, {16, 32, 64, 128}, "GEMM columns per work-group"});
  fields.push_back(
      {"THREADS_N", &P::threads_n, {4, 8, 16, 32}, "work-group columns; a thread owns TILE_N/THREADS_N columns"});
  fields.push_back({"TILE_K", &P::tile_k, {4, 8, 16, 32}, "GEMM reduction depth per local-memory tile"});
  fields.push_back(
      {"LOCAL_PADDING", &P::local_padding, {0, 1, 2, 4}, "floats added to each local tile row against bank conflicts"});
  fields.push_back({"VECTOR_WIDTH", &P::vector_width, {1, 2, 4},
                    "floats per global load where an operand's layout keeps vectors aligned"});
  fields.push_back({"REGISTER_VECTOR", &P::register_vector, {1, 4},
                    "a thread's register tile in runs of this many adjacent rows/columns, one local-memory vector each"});
  fields.push_back({"PREFETCH", &P::prefetch, {0, 1},
                    "1: the next tiles' global loads go out before the FMAs on the current ones (more registers)"});
}

// The kernel's own limits. `max_rows`: the most GEMM rows any launch has (for the grid limit);
// `vector_allowed(width)`: whether some operand's layout allows loads of that width.
template <typename P, typename VectorAllowed>
std::vector<Constraint> tile_constraints(const ParameterTable<P>& t, int64_t max_rows, VectorAllowed vector_allowed) {
  using X = ConstraintContext;
  return {
      t.constraint("GEMM row tiles within the CUDA grid limit", {&P::tile_m},
                   [max_rows](const P& p, const X&) { return (max_rows + p.tile_m - 1) / p.tile_m <= kMaxGridAxis; }),
      t.constraint("TILE_M divisible by THREADS_M", {&P::tile_m, &P::threads_m},
                   [](const P& p, const X&) { return p.tile_m % p.threads_m == 0; }),
      t.constraint("TILE_N divisible by THREADS_N", {&P::tile_n, &P::threads_n},
                   [](const P& p, const X&) { return p.tile_n % p.threads_n == 0; }),
      t.constraint("GEMM threads per work-group within the device limit", {&P::threads_m, &P::threads_n},
                   [](const P& p, const X& x) { return static_cast<size_t>(p.threads()) <= x.device.max_work_group_size; }),
      // Work-groups of fewer than two warps leave most of a GPU multiprocessor idle (it holds a limited number of
      // work-groups); a device whose limit is lower still gets its largest work-group.
      t.constraint("at least 64 GEMM threads per work-group (or the device maximum)", {&P::threads_m, &P::threads_n},
                   [](const P& p, const X& x) {
                     size_t floor = 1;
                     while (floor * 2 <= x.device.max_work_group_size) floor *= 2;
                     return static_cast<size_t>(p.threads()) >= std::min(kMinThreads, floor);
                   }),
      t.constraint("register tile at most 64 accumulators", {&P::tile_m, &P::threads_m, &P::tile_n, &P::threads_n},
                   [](const P& p, const X&) {
                     return (p.tile_m / p.threads_m) * (p.tile_n / p.threads_n) <= kMaxAccumulators;
                   }),
      // CUDA launches fail outright when a block needs more registers than a multiprocessor has (64K on every GPU
      // since sm_50); launch bounds make the compiler spill instead. Estimate: accumulators + 32 per thread, plus
      // the prefetched tiles' floats with PREFETCH.
      t.constraint("estimated registers per work-group within 64K",
                   {&P::tile_m, &P::threads_m, &P::tile_n, &P::threads_n, &P::tile_k, &P::prefetch},
                   [](const P& p, const X&) {
                     const int64_t accumulators = p.tile_m * p.tile_n / p.threads();
                     const int64_t prefetched = p.prefetch ? p.fetch_floats() : 0;
                     return p.threads() * (accumulators + kRegistersBesideAccumulators + prefetched) <= kRegisterFile;
                   }),
      t.constraint("REGISTER_VECTOR divides each thread's rows and columns and the padded local rows",
                   {&P::tile_m, &P::threads_m, &P::tile_n, &P::threads_n, &P::local_padding, &P::register_vector},
                   [](const P& p, const X&) {
                     const int64_t rv = p.register_vector;
                     return (p.tile_m / p.threads_m) % rv == 0 && (p.tile_n / p.threads_n) % rv == 0 &&
                            (p.tile_m + p.local_padding) % rv == 0 && (p.tile_n + p.local_padding) % rv == 0;
                   }),
      t.constraint("local memory within the device limit and 48 KiB",
                   {&P::tile_m, &P::tile_n, &P::tile_k, &P::local_padding}, [](const P& p, const X& x) {
                     const size_t bytes = local_bytes(p);
                     return bytes <= x.device.local_memory_bytes && bytes <= kPortableLocalBytes;
                   }),
      t.constraint("tiles are multiples of VECTOR_WIDTH", {&P::tile_m, &P::tile_n, &P::tile_k, &P::vector_width},
                   [](const P& p, const X&) {
                     const int64_t v = p.vector_width;
                     return p.tile_m % v == 0 && p.tile_n % v == 0 && p.tile_k % v == 0;
                   }),
      t.constraint("VECTOR_WIDTH above 1 only where some operand's layout allows it", {&P::vector_width},
                   [vector_allowed](const P& p, const X&) { return p.vector_width == 1 || vector_allowed(p.vector_width); }),
  };
}

// The tile setups an untuned GEMM tries, largest first: 64x64 with 4x4 register tiles down to 16x16 tiles on 4x4
// threads (a small device), then 16x16 on 8x8 threads (tiny matrices on a device that wants 64 threads). On GPUs
// a setup whose register tile allows it reads that tile as float4 runs (REGISTER_VECTOR 4, local rows padded by 4
// to keep them aligned) and prefetches the next tiles: measured on an H200 in every one of winograd's 48 GEMM
// setups with 64x64 tiles of the stride1 suite, 0.76-0.97x the time without. CPUs (PoCL)
// keep scalar reads: their work-items are vectorised across, not within.
inline std::vector<TileParams> preferred_tiles(bool gpu = false) {
  auto make = [gpu](int64_t tile, int64_t tile_k, int64_t threads) {
    TileParams t;
    t.tile_m = t.tile_n = tile, t.tile_k = tile_k, t.threads_m = t.threads_n = threads;
    t.local_padding = 1, t.vector_width = 1;
    if (gpu && (tile / threads) % 4 == 0) t.register_vector = 4, t.local_padding = 4, t.prefetch = 1;
    return t;
  };
  return {make(64, 16, 16), make(32, 16, 8), make(16, 8, 4), make(16, 16, 8)};
}

// Large GEMMs on GPUs: 128x128 tiles on 16x16 threads, 8x8 register tiles read as float4 runs, TILE_K 16, the next
// tiles prefetched. On an H200 a 4096^3 product took 3.63 ms (37.9 TFLOP/s) this way against 5.58 ms with the
// 64x64 setup and 4.06 ms with scalar reads and no prefetch; with TILE_K 32 it was 5.5 ms (registers).
inline TileParams large_gpu_tiles() {
  TileParams t;
  t.tile_m = t.tile_n = 128, t.tile_k = 16, t.threads_m = t.threads_n = 16;
  t.local_padding = 4, t.vector_width = 1, t.register_vector = 4, t.prefetch = 1;
  return t;
}

// The geometry of one launch of the `gemm` kernel: TILE_M x TILE_N blocks of an m x n result, `layers` of them
// (groups, batch items or split-K slices) on axis 2.
inline LaunchGeometry launch_geometry(int64_t m, int64_t n, int64_t layers, const TileParams& p) {
  auto round_up = [](int64_t v, int64_t multiple) { return static_cast<size_t>((v + multiple - 1) / multiple * multiple); };
  LaunchGeometry g;
  g.dims = 3;
  g.global = {round_up(n, p.tile_n) / static_cast<size_t>(p.tile_n) * static_cast<size_t>(p.threads_n),
              round_up(m, p.tile_m) / static_cast<size_t>(p.tile_m) * static_cast<size_t>(p.threads_m),
              static_cast<size_t>(layers)};
  g.local = {static_cast<size_t>(p.threads_n), static_cast<size_t>(p.threads_m), 1};
  return g;
}

}  // namespace convtune::gemm
