// The host side that winograd and winograd_tc share (same kernels for the transforms, same workspace): the layout
// of U, V and M, the workspace size, which tile sizes a math mode admits, the support and poor-fit rules, the
// transform parameters with their constraints, the kernels' layout defines and the launch steps around the GEMM.
// The families differ only in the GEMM (winograd: gemm.cl on FP32 cores; winograd_tc: tc_mainloop.h on tensor cores).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "convtune/extension/kernel_family.h"
#include "src/families/batch_chunks.h"
#include "src/families/parameter_table.h"
#include "src/families/transform_steps.h"

namespace convtune::winograd {

using batch_chunks::kMaxChunks;
inline const std::vector<int64_t>& kBatchChunks = batch_chunks::kSizes;
inline constexpr int64_t kMaxAlpha = 8;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The declared error bound of F(m x m, r x r) with alpha = m + r - 1 points, as a multiple of the direct sum's FP32
// tolerance, measured over tests/families/winograd_test.cpp and the conformance cases (docs/ARCHITECTURE.md,
// "Tolerance"): alpha 4 and 6 stay within the tolerance itself (at most 0.3x of it); alpha 8 reaches 0.5x on long
// reductions and 1.7x on the shortest (a 5x5 filter over a 5x5 input, where the tolerance is its 1e-6 floor and the
// transforms' own rounding dominates), so it is held to 4x, which only fp32-fast (and tf32) math admits.
double alpha_error_factor(int64_t alpha);

// Whether the problem's math mode admits the rounding of `alpha` points (see max_error_factor in convtune/types.h).
bool math_admits(const ConvProblem& pb, int64_t alpha);

// The family's error_factor: the bound of the configuration's tile (M_TILE), 1 without one.
double config_error_factor(const ConvProblem& pb, const Config& config);

// The shape of one Winograd plan: tiles, the GEMM per group and position, the workspace's three parts (floats).
struct WorkLayout {
  int64_t alpha = 0, tiles_y = 0, tiles_x = 0, tiles = 0;  // tiles: per channel and chunk, whole slices
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;            // one slice's GEMM
  size_t v_offset = 0, m_offset = 0, total = 0;
};

WorkLayout layout(const ConvProblem& pb, int64_t m_tile, int64_t chunk, int64_t split);
uint64_t workspace_bytes(const ConvProblem& pb, int64_t m_tile, int64_t chunk, int64_t split);

// Whether `width`-float loads of the GEMM's A (U) and B (V) stay aligned (gemm.cl's X_VECTOR contract, and the
// 16-byte copies of the tensor-core GEMM): the stored rows' length and pitch are multiples of it. A's rows are the
// reduction (channels; backward-filter: one slice's tiles); B's rows are the tiles (backward-filter: one slice's
// tiles again, B being stored transposed).
bool a_vectorizes(const WorkLayout& l, int64_t width);
bool b_vectorizes(const ConvProblem& pb, const WorkLayout& l, int64_t width);

// Empty when the problem's shape suits the Winograd kernels (stride 1, square 3x3/5x5/7x7 filter, a tile the math
// mode admits, the workspace of one image within the limit, few enough chunks); the family checks the device and
// the element type first.
std::string unsupported_shape_reason(const ConvProblem& pb, const Epilogue& epilogue, const DeviceInfo& device);

// Depthwise and few-channel layers make the GEMM a sliver: the transforms' memory traffic then dominates.
std::string poor_fit(const ConvProblem& pb);
// The layers where Winograd, untuned, is expected to beat the families ranked before it (a reason; empty
// elsewhere): 3x3 with at least 32 channels a group in and out, 5x5 with at least 48 (backward-filter: C x K per
// group at least 4,096), or 32 in forward and backward-data where `narrow_5x5` (winograd's FP32 kernels on a GPU,
// where that was measured). Each family adds the math modes it claims them in.
std::string wide_layer_claim(const ConvProblem& pb, bool narrow_5x5);

// The tile side a plan without tuning takes: F(4x4, 3x3) for 3x3 filters (alpha 6: 4x fewer multiplications than
// direct, errors still near FP32's) and F(2x2) for larger ones; F(2x2) also where a 4x4 tile would be mostly padding
// (outputs of 4 or less).
int64_t default_m_tile(const ConvProblem& pb);
// The largest batch chunk up to N whose workspace fits `cap` bytes, 1 when none does.
int64_t largest_chunk(const ConvProblem& pb, int64_t m_tile, int64_t split, uint64_t cap);

// The Winograd parameters (Params has m_tile, batch_chunk, split and transform_threads), first in a table.
template <typename P>
void add_transform_fields(std::vector<typename ParameterTable<P>::Field>& fields) {
  fields.push_back({"M_TILE", &P::m_tile, {2, 4, 6},
                    "Winograd tile: outputs per tile side (forward, backward-data) or dy taps per tile side "
                    "(backward-filter); larger tiles do fewer multiplications with larger rounding errors"});
  fields.push_back({"BATCH_CHUNK", &P::batch_chunk, kBatchChunks, "images whose transformed tiles the workspace holds per step"});
  fields.push_back({"SPLIT", &P::split, {1, 2, 4, 8, 16, 32, 64},
                    "backward-filter: slices of the tiles reduced by separate work-groups (fills the device when K x C "
                    "is small)"});
  fields.push_back({"TRANSFORM_THREADS", &P::transform_threads, {64, 128, 256}, "work-group size of the transform kernels"});
}

// The constraints on the Winograd parameters: alpha at most 8 and admitted by the math mode, the chunk and the
// slices within the batch, the workspace within the limit, the transform work-group within the device's.
template <typename P>
std::vector<Constraint> transform_constraints(const ParameterTable<P>& t, const ConvProblem& pb) {
  using X = ConstraintContext;
  std::vector<Constraint> list = {
      t.constraint("tile side + filter side - 1 (alpha) at most 8", {&P::m_tile},
                   [pb](const P& p, const X&) { return p.m_tile + pb.r - 1 <= kMaxAlpha; }),
      t.constraint(fmt::format("alpha's error bound within what {} math admits (alpha 8: fp32-fast)", to_string(pb.math)),
                   {&P::m_tile}, [pb](const P& p, const X&) { return math_admits(pb, p.m_tile + pb.r - 1); }),
  };
  const std::vector<Constraint> chunks = batch_chunks::constraints<P>(
      t, pb, &P::m_tile, [pb](const P& p) { return layout(pb, p.m_tile, p.batch_chunk, 1).tiles; });
  list.insert(list.end(), chunks.begin(), chunks.end());
  list.insert(list.end(), {
      t.constraint("workspace within the workspace limit", {&P::m_tile, &P::batch_chunk, &P::split},
                   [pb](const P& p, const X& x) {
                     return workspace_bytes(pb, p.m_tile, p.batch_chunk, p.split) <= workspace_limit(x.device);
                   }),
      t.constraint("transform work-group within the device limit", {&P::transform_threads},
                   [](const P& p, const X& x) { return static_cast<size_t>(p.transform_threads) <= x.device.max_work_group_size; }),
  });
  return list;
}

// The problem's and the layout's defines (shape, ALPHA, tiles, workspace offsets, transform matrices, epilogue);
// the family adds its parameters and the GEMM's.
std::map<std::string, std::string> layout_defines(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l,
                                                  int64_t m_tile);

// The launches of winograd.cl's transform kernels around the GEMM, chunk by chunk: `gemm(first, count)` is the
// family's GEMM step for the chunk starting at image `first` with `count` images.
using transform_steps::GemmStep;
std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l, int64_t batch_chunk,
                              int64_t split, int64_t transform_threads, const GemmStep& gemm);

// What winograd and winograd_tc answer alike: convolutions; winograd's poor fit; the tile's error bound; a carried
// entry keeps the tile side and the GEMM tiles (they shape the kernels) and takes the new problem's chunk and slices
// (they decompose it).
class FamilyBase : public KernelFamily {
 public:
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo&) const override {
    return poor_fit(problem.conv());
  }
  double error_factor(const Problem& problem, const Config& config) const override {
    return config_error_factor(problem.conv(), config);
  }
  Config carry_config(const Config& tuned, const Problem&, const Problem& problem, const DeviceInfo& device) const override {
    Config carried = tuned;
    const Config fresh = default_config(problem, device);
    // A GEMM tile larger than this problem's default takes (the default sizes its tile to the GEMM) leaves most of
    // it idle: the default serves instead. Measured on the H200: 128x128 tiles carried from larger layers ran 0.225
    // ms on a 64-channel U-Net layer, 0.21 on a 48-channel 5x5 layer and 0.086 on a batch-1 layer, where the defaults
    // took 0.150, 0.163 and 0.070. A tile of smaller area was fitted to the other problem's GEMM and leaves this
    // one's reuse unused: alex3's backward-data entry (32x64) ran 0.631 ms on the same layer with 256 channels, where
    // the default's 128x128 took 0.547; 64x64 tiles carried from N=32-64 layers (whose GEMMs are too short for the
    // default's 64x128) ran alex3-5 and a 384->256 layer at N=64 forward and backward-data 12-17% slower than the
    // default (alex4 backward-data 0.615 against 0.526 ms; H200).
    int64_t tuned_area = 1, fresh_area = 1;
    for (const char* name : {"TILE_M", "TILE_N"}) {
      const auto t = tuned.find(name), f = fresh.find(name);
      if (t == tuned.end() || f == fresh.end()) continue;
      if (t->second > f->second) return fresh;
      tuned_area *= t->second, fresh_area *= f->second;
    }
    if (tuned_area < fresh_area) return fresh;
    for (const char* name : {"BATCH_CHUNK", "SPLIT"}) carried[name] = fresh.at(name);
    return carried;
  }
};

}  // namespace convtune::winograd
