// The tiled GEMM kernel (kernels/gemm/gemm.cl) as every family that runs it sees it: its tile parameters, their
// named constraints and launch geometry, declared once here for the gemm family, im2col_gemm and the dense layers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "convtune/kernel_family.h"
#include "src/families/parameter_table.h"

namespace convtune::gemm {

// A family's typed parameters derive from this, so its ParameterTable can name these fields (a pointer to a base
// member converts to a pointer to the derived struct's member).
struct TileParams {
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  int64_t threads_m = 0, threads_n = 0;
  int64_t local_padding = 0, vector_width = 0;
  int64_t threads() const { return threads_m * threads_n; }
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

// The tile fields under their kernel names, appended to a family's table.
template <typename P>
void add_tile_fields(std::vector<typename ParameterTable<P>::Field>& fields) {
  fields.push_back({"TILE_M", &P::tile_m, {16, 32, 64, 128}, "GEMM rows per work-group"});
  fields.push_back({"THREADS_M", &P::threads_m, {4, 8, 16, 32}, "work-group rows; a thread owns TILE_M/THREADS_M rows"});
  fields.push_back({"TILE_N", &P::tile_n, {16, 32, 64, 128}, "GEMM columns per work-group"});
  fields.push_back(
      {"THREADS_N", &P::threads_n, {4, 8, 16, 32}, "work-group columns; a thread owns TILE_N/THREADS_N columns"});
  fields.push_back({"TILE_K", &P::tile_k, {4, 8, 16, 32}, "GEMM reduction depth per local-memory tile"});
  fields.push_back({"LOCAL_PADDING", &P::local_padding, {0, 1, 2}, "floats added to each local tile row against bank conflicts"});
  fields.push_back({"VECTOR_WIDTH", &P::vector_width, {1, 2, 4},
                    "floats per global load where an operand's layout keeps vectors aligned"});
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
      // since sm_50); launch bounds make the compiler spill instead. Estimate: accumulators + 32 per thread.
      t.constraint("estimated registers per work-group within 64K", {&P::tile_m, &P::threads_m, &P::tile_n, &P::threads_n},
                   [](const P& p, const X&) {
                     const int64_t accumulators = p.tile_m * p.tile_n / p.threads();
                     return p.threads() * (accumulators + kRegistersBesideAccumulators) <= kRegisterFile;
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
// threads (a small device), then 16x16 on 8x8 threads (tiny matrices on a device that wants 64 threads).
inline std::vector<TileParams> preferred_tiles() {
  auto make = [](int64_t tile, int64_t tile_k, int64_t threads) {
    TileParams t;
    t.tile_m = t.tile_n = tile, t.tile_k = tile_k, t.threads_m = t.threads_n = threads;
    t.local_padding = 1, t.vector_width = 1;
    return t;
  };
  return {make(64, 16, 16), make(32, 16, 8), make(16, 8, 4), make(16, 16, 8)};
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
