// The CPU convolution module's micro-kernels as seen by its ISA-independent planner: argument blocks, and per
// instruction set a table of kernels compiled with Highway for each register-block shape.
#pragma once

#include <cstdint>
#include <string>

#include "src/backend/cpu/isa.h"

namespace convtune::cpu_blocked::detail {

using cpu::Isa;  // the CPU backend's ISA choice (src/backend/cpu/isa.h)

// Broadcast kernel: a register block acc[v][j] of NV vectors x NJ columns,
//   acc[v][j] += A[v] (Lanes contiguous floats) * broadcast(B[j]),
// summed over a reduction of three nested levels (n0 outer .. n2 inner) that each advance A and B by a fixed
// number of floats. A's NV vectors are contiguous (a packed layout), so one block reads NV*Lanes floats a step.
// Forward with vectors over output channels: A = packed weights, B = input pixels, j = output pixels.
struct BcastArgs {
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  int64_t b_j = 1;  // floats between broadcast columns j
  int64_t n0 = 1, n1 = 1, n2 = 1;
  int64_t a0 = 0, a1 = 0, a2 = 0;
  int64_t b0 = 0, b1 = 0, b2 = 0;
  // Output element (v, lane, j) is out[v * o_v + lane * o_lane + j * o_j]; o_lane == 1 stores whole vectors.
  int64_t o_v = 0, o_lane = 1, o_j = 0;
  int64_t valid = 0;        // lanes of the NV*Lanes stored (the rest are channel or pixel padding)
  bool accumulate = false;  // add to out (a later chunk of the reduction) instead of overwriting
  // Whole vectors (o_lane 1, every lane valid, outputs aligned to a vector) written with streaming stores, for
  // results read back only after more data than the caches hold has gone by: no read for ownership per line.
  bool stream = false;
  // When set (with b_j 1 or the vector width), prefetch + s * prefetch_step is prefetched into L2 at every
  // reduction step s (counted over all three levels): data later calls read from memory, a line a step, so the
  // stream stays steady instead of arriving as a burst of misses (Winograd backward-filter: the next xi's
  // operands; fused Winograd: the next panel of U).
  const float* prefetch = nullptr;
  int64_t prefetch_step = 0;
};

// Dot kernel: acc[i][j] += A_i[x] * B_j[x] over runs x in [0, len) (vectors of Lanes, a masked tail), summed over
// two outer levels, then each accumulator's lanes are added: out[i * o_i + j * o_j] (+)= sum. Used where the
// reduction runs along contiguous pixels (backward-filter with few channels). With `vectors`, the lanes are not
// added: out + i * o_i + j * o_j holds a vector of Lanes partial sums, stored (or added to) as a whole, and the
// caller adds the lanes once at the end (a horizontal sum per block costs as much as ~100 FMAs of port time).
struct DotArgs {
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  int64_t a_i = 0;  // floats between rows i of A
  int64_t b_j = 0;  // floats between columns j of B
  int64_t len = 0;
  int64_t n0 = 1, n1 = 1;
  int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  int64_t o_i = 0, o_j = 0;
  bool accumulate = false;
  bool vectors = false;
  // Peel the lanes of each run below A's next vector boundary off first (masked), so A's loads are aligned where
  // its rows and runs are whole vectors apart (x86 vector targets; elsewhere ignored). For long runs.
  bool align = false;
  // When set, prefetch + x is prefetched into L2 at every full vector step x of each run: data the next calls
  // read from memory, a line a step, so the stream stays steady instead of arriving as a burst of misses when the
  // next call starts (whole-plane dots, fmnist1: 1.03 -> 0.89-0.95 ms for the kernels of a run).
  const float* prefetch = nullptr;
};

using BcastFn = void (*)(const BcastArgs&);
using DotFn = void (*)(const DotArgs&);
// dst[i] = src[i * stride] for i in [0, count): one column of a strided layout into a contiguous run (vector
// gathers); how the layout copies transpose (channel interleaving, weight packing).
using GatherFn = void (*)(const float* src, int64_t stride, int64_t count, float* dst);
// dst[p * block + c] = src[c * plane + p] for pixels p in [0, pixels) and c in [0, block), zero for c >= channels
// (channels <= block): `channels` planes' runs of pixels interleaved into pixels of `block` channels each
// (backward-filter's per-tile dy copies, and every channel-blocked copy of x). Whole lanes x lanes tiles are
// transposed in registers (AVX-512, AVX2): alex1's per-tile copies with a vector gather per pixel instead ran 16.9
// ms against 15.8 (one thread, Intel). Whole-tensor copies (copy_channel_blocked) measured level either way on that
// Intel host but 2-3x faster transposed on an AMD EPYC (Zen 4), whose gathers are slow: ResNet-50's 2048 -> 512 1x1
// backward-filter, 8 images, two threads, its x copy 1.3-1.6 -> 0.46-0.55 ms; alex2's 1.2-1.7 -> 0.67-0.71.
using InterleaveFn = void (*)(const float* src, int64_t plane, int64_t channels, int64_t pixels, float* dst,
                              int64_t block);

// Largest register blocks compiled: kMaxNv vectors, and per vector count the most columns.
inline constexpr int kMaxNv = 4;
inline constexpr int kMaxNj = 28;
inline constexpr int kMaxDotRows = 8;
inline constexpr int kMaxDotColumns = 6;

// Winograd F(4x4, 3x3) transforms, vectorised over a vector's worth of channels (each element below is Lanes
// contiguous floats): tile element (i, j) of a transform's input is at src + i * row + j * col, element xi of a
// 6 x 6 transform domain at dst + xi * stride (xi = 6 i + j).
// input and dy store with ordinary stores (into a caller's staging buffer, streamed out by stream_run).
//   input:   V = B^T d B, 6 x 6 input patch -> 6 x 6
//   output:  Y = A^T M A, 6 x 6 -> 4 x 4 written to out[16][Lanes]
//   dy:      Z = A dY A^T, 4 x 4 gradient tile -> 6 x 6 (backward-filter)
//   filter:  dW = G^T dU G, 6 x 6 -> 3 x 3 written to out[9][Lanes] (backward-filter)
//   weights: U = G g G^T, 3 x 3 read from src[9][Lanes] -> 6 x 6 (forward, backward-data)
// The order of the members is the order FillTable sets them in.
struct WinogradFns {
  void (*weights)(const float* src, float* dst, int64_t stride) = nullptr;
  void (*input)(const float* src, int64_t row, int64_t col, float* dst, int64_t stride) = nullptr;
  void (*output)(const float* src, int64_t stride, float* out) = nullptr;
  void (*dy)(const float* src, int64_t row, int64_t col, float* dst, int64_t stride) = nullptr;
  void (*filter)(const float* src, int64_t stride, float* out) = nullptr;
};

struct KernelTable {
  Isa isa = Isa::Scalar;
  int lanes = 1;      // floats per vector
  int registers = 16; // vector registers the ISA names
  // bcast[nv - 1][nj - 1], dot[ni - 1][nj - 1]: null where the block was not compiled (it does not fit the
  // registers, or the count is not one of the compiled ones).
  BcastFn bcast[kMaxNv][kMaxNj] = {};
  DotFn dot[kMaxDotRows][kMaxDotColumns] = {};
  GatherFn gather = nullptr;
  InterleaveFn interleave = nullptr;
  // dst[i] = src[i] for i in [0, count): whole vectors, dst vector-aligned, written with streaming stores. The
  // Winograd transforms stage a few tiles' or channel blocks' outputs and stream each destination's lines out
  // together: streaming stores one line at a time to 36 places far apart ran at 13 GB/s on one core, four
  // adjacent lines at a time at 24 GB/s.
  void (*stream_run)(const float* src, float* dst, int64_t count) = nullptr;
  // Padded runs of `width` floats, run k at dst + k * dst_step: `left` zeros, then n floats from src + k * src_step,
  // then zeros to `width`. Whole vectors: up to a vector less one float is written past each run's end (the next
  // run, written after it, or the caller's slack); a source run is read past its end only where the whole vector
  // lies before src_end (the tensor's end), else lane by lane. ALGO 2's shifted input copies are such runs, one per
  // input row, filter column and channel, read from the image itself: a padded copy of the rows first, then runs of
  // it, took a third of the time of a layer of 8-channel groups (32 -> 32 in 4 groups, 20x20, 3x3).
  void (*padded_runs)(const float* src, int64_t src_step, const float* src_end, int64_t left, int64_t n, float* dst,
                      int64_t dst_step, int64_t width, int64_t runs) = nullptr;
  WinogradFns winograd;
};

// The kernels compiled for `isa`; throws Unsupported when this binary or CPU lacks it.
const KernelTable& kernel_table(Isa isa);

// Per ISA (one Highway target each): fills the table. Defined in microkernels.cpp.
void fill_kernel_table(Isa isa, KernelTable& table);

}  // namespace convtune::cpu_blocked::detail
