// The host side of FFT tiling (the fft family): tile geometry, the workspace's three parts (U, V, M per group and
// frequency bin, complex values as real blocks of twice the channels), the twiddle tables, support and the launches
// of kernels/fft/fft.cl around the batched GEMM.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "convtune/extension/kernel_family.h"
#include "src/families/gemm/gemm_tiles.h"
#include "src/families/batch_chunks.h"
#include "src/families/parameter_table.h"
#include "src/families/transform_steps.h"

namespace convtune::fft {

// The tile sides (T) the family builds: T x T input tiles give (T - R + 1) x (T - S + 1) outputs. Direct DFTs take
// any size; these cover the output sides of common layers exactly (7, 14, 28, 56 with 3x3: 10, 16, 30; 13 and 27
// with 3x3 and 5x5: 16, 32).
inline const std::vector<int64_t> kSizes = {8, 10, 12, 14, 16, 20, 24, 32};
using batch_chunks::kMaxChunks;  // launch steps: three per chunk
inline const std::vector<int64_t>& kBatchChunks = batch_chunks::kSizes;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bins of a T x T real DFT kept: T x (T/2 + 1) (the others are their conjugates).
inline int64_t bins(int64_t size) { return size * (size / 2 + 1); }

struct WorkLayout {
  int64_t size = 0, tile_h = 0, tile_w = 0;      // T, outputs per tile (T - R + 1, T - S + 1)
  bool gauss = false;                            // three real GEMMs a bin (Gauss's product) instead of one of 2x2
  int64_t gemms = 1;                             // real GEMMs a group and bin: 3 with gauss
  int64_t tiles_y = 0, tiles_x = 0, tiles = 0;  // tiles: per channel and chunk, whole slices
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;   // one bin's real GEMM
  size_t v_offset = 0, m_offset = 0, total = 0;  // floats
};

WorkLayout layout(const ConvProblem& pb, int64_t size, int64_t chunk, int64_t split, bool gauss = false);
uint64_t workspace_bytes(const ConvProblem& pb, int64_t size, int64_t chunk, int64_t split, bool gauss = false);

// The output side the tiles cover: P x Q (forward, backward-filter) or H x W (backward-data).
int64_t covered_side(const ConvProblem& pb);
// The smallest size of kSizes whose tile covers the larger output side in one tile (the largest size when none
// does); larger tiles would only pad.
int64_t covering_size(const ConvProblem& pb);
// The smallest size whose tile holds at least two outputs a side.
int64_t smallest_size(const ConvProblem& pb);

// Whether `width`-float loads of the GEMM's A and B stay aligned (gemm.cl's X_VECTOR contract).
bool a_vectorizes(const WorkLayout& l, int64_t width);
bool b_vectorizes(const ConvProblem& pb, const WorkLayout& l, int64_t width);

// Empty when the shape suits the kernels: stride 1, dilation 1, a filter up to 31 taps a side, the smallest tile's
// workspace for one image within the limit, few enough chunks.
std::string unsupported_shape_reason(const ConvProblem& pb, const Epilogue& epilogue, const DeviceInfo& device);

// Few channels, a 1x1 filter, or fewer than 25 taps (3x3: winograd's ground): where fft, untuned, lost or saves
// nothing against the transforms' traffic.
std::string poor_fit(const ConvProblem& pb);

// The size a plan without tuning takes: the fewest estimated operations (the bins' GEMMs and the direct DFTs
// around them) over the sizes that cover the output at most once.
int64_t default_size(const ConvProblem& pb);

// Where fft's and fft_tc's untuned claims start: filters of 5x5 and more over at least 32 channels a group (fft ran
// every direction of such layers 1.4-2.7x faster than winograd's F(2x2, 5x5) on the H200; see fft_family.cpp).
inline bool large_filter_layer(const ConvProblem& pb) {
  return pb.r >= 5 && pb.s >= 5 && std::min(pb.c_per_group(), pb.k_per_group()) >= 32;
}
int64_t largest_chunk(const ConvProblem& pb, int64_t size, int64_t split, uint64_t cap, bool gauss = false);

// The tensor-core forms' (fft_tc, fft_wgmma) shared rules. Their untuned claim's condition beyond the mode: a large
// filter layer whose batch fits the workspace in one chunk of the default tile size (where it does not, each chunk's
// GEMMs are narrow and fft_tc lost forward).
bool large_filter_layer_in_one_chunk(const ConvProblem& pb, const DeviceInfo& device);
// Work-group axis 2 of their GEMM: (slices x) groups x bins (x Gauss's three planes).
int64_t gemm_layers(const ConvProblem& pb, const WorkLayout& l, int64_t split);
// Backward-filter's slices and chunk without Gauss's planes: K x C tiles are few, so slices of the batch's tiles
// bring the GEMM's blocks (`blocks` per slice) up to about two per multiprocessor, each slice keeping at least
// `min_reduction` tiles of the reduction.
struct Slices {
  int64_t split = 1, chunk = 1;
};
Slices filter_slices(const ConvProblem& pb, int64_t size, int64_t blocks, int64_t min_reduction,
                     const DeviceInfo& device);

// cos(2 pi k / T) and sin(2 pi k / T), k < T, as float literals, exact zeros and ones where the value is (the
// kernels drop multiplications by zero at compile time).
std::string twiddles(int64_t size, bool sine);

std::map<std::string, std::string> layout_defines(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l,
                                                  int64_t transform_tiles);

// Local memory of one transform work-group: the first stage's T x (T/2 + 1) complex values per tile.
inline uint64_t transform_local_bytes(int64_t transform_tiles, int64_t size) {
  return static_cast<uint64_t>(2 * transform_tiles * bins(size)) * sizeof(float);
}

// The FFT tiling parameters (P has size, gauss, transform_tiles, batch_chunk and split), first in a table; fft and
// fft_tc add their GEMM's tile fields after them.
template <typename P>
void add_transform_fields(std::vector<typename ParameterTable<P>::Field>& fields) {
  fields.push_back({"FFT_SIZE", &P::size, kSizes,
                    "side T of the transformed tiles: (T - R + 1) x (T - S + 1) outputs each; larger tiles do fewer "
                    "multiplications per output in the GEMMs and more in the transforms"});
  fields.push_back({"GAUSS", &P::gauss, {0, 1},
                    "1: three real GEMMs a bin on planes of the channels' size (Gauss's complex product, 3/4 of the "
                    "multiplications); 0: one GEMM of twice the channels on 2x2 real blocks"});
  fields.push_back({"TRANSFORM_TILES", &P::transform_tiles, {1, 2, 4, 8, 16, 32},
                    "tiles per transform work-group (of TRANSFORM_TILES x T work-items)"});
  fields.push_back({"BATCH_CHUNK", &P::batch_chunk, kBatchChunks, "images whose transformed tiles the workspace holds per step"});
  fields.push_back({"SPLIT", &P::split, {1, 2, 4, 8, 16, 32, 64},
                    "backward-filter: slices of the tiles reduced by separate work-groups (fills the device when K x C "
                    "is small)"});
}

// The constraints on the FFT tiling parameters: two outputs a tile side at least, no tile beyond what covers the
// output, the GEMM's layers within the grid, the chunk and the slices within the batch, the workspace within the
// limit, the transform work-group and its local memory within the device's.
template <typename P>
std::vector<Constraint> transform_constraints(const ParameterTable<P>& t, const ConvProblem& pb) {
  using X = ConstraintContext;
  const int64_t cover = covering_size(pb);
  std::vector<Constraint> list = {
      t.constraint("at least 2 outputs a tile side (FFT_SIZE - filter side + 1)", {&P::size},
                   [pb](const P& p, const X&) { return p.size - std::max(pb.r, pb.s) + 1 >= 2; }),
      t.constraint(fmt::format("FFT_SIZE at most {} (one tile covers the output; larger ones only pad)", cover),
                   {&P::size}, [cover](const P& p, const X&) { return p.size <= cover; }),
      t.constraint("slices x groups x bins (x 3 with GAUSS) within the CUDA grid limit (GEMM axis 2)",
                   {&P::size, &P::split, &P::gauss}, [pb](const P& p, const X&) {
                     const int64_t slices = pb.direction == Direction::BackwardFilter ? p.split : 1;
                     return slices * pb.groups * bins(p.size) * (p.gauss ? 3 : 1) <= gemm::kMaxGridAxis;
                   }),
  };
  const std::vector<Constraint> chunks = batch_chunks::constraints<P>(
      t, pb, &P::size, [pb](const P& p) { return layout(pb, p.size, p.batch_chunk, 1).tiles; });
  list.insert(list.end(), chunks.begin(), chunks.end());
  list.insert(list.end(), {
      t.constraint("workspace within the workspace limit", {&P::size, &P::batch_chunk, &P::split, &P::gauss},
                   [pb](const P& p, const X& x) {
                     return layout(pb, p.size, p.batch_chunk, p.split, p.gauss != 0).total * sizeof(float) <=
                            workspace_limit(x.device);
                   }),
      t.constraint("transform work-group (TRANSFORM_TILES x FFT_SIZE) within the device limit",
                   {&P::size, &P::transform_tiles}, [](const P& p, const X& x) {
                     return static_cast<size_t>(p.transform_tiles * p.size) <= x.device.max_work_group_size;
                   }),
      t.constraint("transform local memory within the device limit and 48 KiB", {&P::size, &P::transform_tiles},
                   [](const P& p, const X& x) {
                     const uint64_t bytes = transform_local_bytes(p.transform_tiles, p.size);
                     return bytes <= x.device.local_memory_bytes && bytes <= gemm::kPortableLocalBytes;
                   }),
  });
  return list;
}

// The largest transform work-group of up to 256 work-items on GPUs, 64 on CPUs (PoCL runs a work-group's items one
// after another between barriers), as many tiles as fit its local memory.
int64_t default_transform_tiles(int64_t size, const DeviceInfo& device);

// A tuned entry carried to another problem keeps the tile size and the GEMM tiles (they shape the kernels) and takes
// `fresh`'s chunk and slices (the new problem's default); a size beyond what covers the new output gives way to
// `fresh` whole.
Config carried_config(const Config& tuned, const Config& fresh, const ConvProblem& problem);

using transform_steps::GemmStep;
std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l, int64_t batch_chunk,
                              int64_t split, int64_t transform_tiles, const GemmStep& gemm);

}  // namespace convtune::fft
