// cpu_blocked: FP32 convolution on the CPU for every direction, stride, padding, dilation and group count, from
// register-blocked SIMD micro-kernels (Highway: AVX-512, AVX2, scalar) over packed, padded operand copies, split
// over the persistent thread pool. What the cpu_blocked kernel family (cpu_blocked_family.cpp) is made of: the
// typed parameters and their table, named constraints, a default configuration from a block cost model, and a
// Convolution prepared once per problem + configuration.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "convtune/conv_problem.h"
#include "convtune/extension/kernel_family.h"
#include "src/backend/cpu/isa.h"
#include "src/families/parameter_table.h"

namespace convtune::cpu_blocked {

// The ISA the kernels run (CONVTUNE_CPU_ISA, force_isa()) is the CPU backend's: src/backend/cpu/isa.h.
using cpu::active_isa;
using cpu::available_isas;
using cpu::force_isa;
using cpu::Isa;
using cpu::vector_lanes;
using cpu::vector_registers;
using cpu::to_string;

inline constexpr const char* kFamilyName = "cpu_blocked";

// The tunable parameters, one field each (their names, candidates and meanings: parameter_table()):
//   algo       0 = direct convolution, 1 = Winograd F(4x4, 3x3) (3x3 filters, stride 1, dilation 1): 36 GEMMs over
//              channels in vecs x cols blocks; the other parameters then stay at 0
//   orient     forward/backward-data: 0 = vectors over output channels (weights loaded as vectors, input pixels
//              broadcast), 1 = vectors over output pixels (input rows loaded, weights broadcast).
//              backward-filter: 0 = vectors over input channels (broadcast kernel), 1 = vectors along output rows
//              (dot kernel, lanes summed at the end), 2 = vectors over output channels (dy copied channel-
//              interleaved), x broadcast along a row of filter taps.
//   vecs       vectors in the register block (backward-filter orient 1: output channels, one dot product each)
//   cols       broadcast columns in the register block: output pixels (orient 0) or output channels (orient 1);
//              backward-filter: output channels (orient 0) or filter taps along a row (orient 1, 2)
//   row_block  output rows per work item handed to a thread (backward-filter: rows per reduction tile); 0 = all
//   order      forward/backward-data: 0 = channel blocks outside row blocks (weights stay in cache), 1 = rows
//              outside channel blocks (input rows stay in cache). backward-filter: 0 = threads split the output
//              tiles, 1 = threads split the reduction (each sums into its own copy, added at the end)
//   layout     forward/backward-data with orient 0: the input copy, 0 = planar (padded NCHW), 1 = channel-
//              blocked (a vector of input channels per pixel: nChw16c on AVX-512, nChw8c on AVX2), 2 = channel-
//              blocked, by the thread about to compute on it, an image at a time or (an image's copy over 1 MB) a
//              row block's rows at a time (a buffer that stays in L2). backward-filter
//              with orient 2: 0 = x and dy copied whole up front, 1 = each reduction tile's rows copied right before
//              its kernels (copies that stay in L2); with orient 1: 0 = dots along output rows over x copied whole,
//              1 = dots over whole output planes (stride_h 1): each tile's x copied once per filter column kw (rows
//              Q wide, so a tap's reads over consecutive output rows are one run), dy read in place; orient 0: 0
//   ic_chunk   forward/backward-data: input channels per pass over a row block (0 = all), so a pass's filter
//              slab and input rows stay in L2; later passes add to the outputs. backward-filter: 0
//   width      0 = the active ISA's vectors; 1 = on an AVX-512 host, the AVX2 kernels (8 lanes, 16 registers), for
//              layers whose channels (a group's) or rows fill half a 16-lane vector or less. On a core with two
//              256-bit FMA pipes (AMD Zen 4) an 8-lane FMA does as many useful FLOPs a cycle as a 16-lane one.
struct Choice {
  int64_t algo = 0;
  int64_t orient = 0;
  int64_t vecs = 1;
  int64_t cols = 1;
  int64_t row_block = 0;
  int64_t order = 0;
  int64_t layout = 0;
  int64_t ic_chunk = 0;
  int64_t width = 0;
};

// The parameters for a problem: names (ALGO, ORIENT, VECS, COLS, ROW_BLOCK, ORDER, LAYOUT, IC_CHUNK, WIDTH), candidate
// values (they depend on the direction and on whether Winograd applies) and descriptions. The one declaration:
// the family's parameter list, Config <-> Choice and the host program's defines all come from it.
ParameterTable<Choice> parameter_table(const ConvProblem& problem);
// The ISA a configuration's kernels run: the active one, or AVX2 for WIDTH 1.
Isa isa_of(const Choice& choice);
// Named constraints over those parameters for the problem on the active ISA (register file, compiled blocks,
// unit-stride rows for pixel vectors); each name says which parameters must hold what. They read ISA facts, not
// the DeviceInfo they are given.
std::vector<Constraint> constraints(const ConvProblem& problem);
// A valid configuration that is reasonably fast without tuning, from a cost model of the register blocks.
Config default_config(const ConvProblem& problem);
// The problem the strategies compute for `problem`: itself, or for a 1x1 filter at stride 1 without padding the
// same convolution over planes of one row of H*W pixels (the same bytes). Constraints, defaults and the
// Convolution all read this form.
ConvProblem computed_problem(const ConvProblem& problem);
// Why a configuration tuned for `tuned` says little about `asked` (empty when it may be carried): the channels
// the vectors run over fill less than one vector in one shape and at least one in the other, so the orientation
// and blocks tuning chose for half-empty vectors (or for full ones) are no guide to the other.
std::string vector_fill_change(const ConvProblem& tuned, const ConvProblem& asked);

// Where a run's time went, host clock: the edge conversions (padded / channel-blocked input copies, the
// backward-filter result's conversion to KCRS), weight packing, and the micro-kernels.
struct StageTimes {
  double input_ms = 0;
  double weights_ms = 0;
  double compute_ms = 0;
  double output_ms = 0;
};

struct Plan;  // internal: geometry, packing layouts and the work split

// One problem + configuration, prepared once (layouts, work split, the ISA's kernels) and run many times.
class Convolution {
 public:
  // Throws Unsupported when the problem is not FP32 with FP32 math, InvalidArgument naming the parameter or
  // constraint when `config` is not valid for it (the same check as a plan's: config_problem).
  Convolution(const ConvProblem& problem, const Config& config);
  ~Convolution();
  Convolution(Convolution&&) noexcept;
  Convolution& operator=(Convolution&&) noexcept;

  // Scratch run() needs: packed weights, padded input copies, per-thread partial sums. Bounded by a small
  // multiple of the operands' sizes (about one input copy plus the weights).
  size_t workspace_bytes() const;

  // NCHW / KCRS operands named after the forward pass: forward writes y from x and w, backward-data writes x
  // from y and w, backward-filter writes w from x and y. The written operand is overwritten; the others are only
  // read. `workspace` holds workspace_bytes() bytes (any alignment).
  void run(float* x, float* w, float* y, void* workspace);

  // Packs `w` once into memory the Convolution owns; later runs use that copy and skip packing (weights that do
  // not change between runs: inference, benchmarks). Call again after w changes; forget_weights() goes back to
  // packing on every run. No effect for backward-filter, which writes the weights.
  void pack_weights(const float* w);
  void forget_weights();

  const StageTimes& last_times() const;
  Isa isa() const;
  const ConvProblem& problem() const;
  // Floating-point operations one run performs: the direct sum's problem().flops() less the taps skipped for
  // reading only padding, and less for Winograd (its transformed products and the transforms), so `% peak`
  // divides what the CPU really computed.
  double performed_flops() const;
  // "avx512, vectors over output channels, 2x14 block, ..." for logs and tables.
  std::string describe() const;

 private:
  std::unique_ptr<Plan> plan_;
};

}  // namespace convtune::cpu_blocked
