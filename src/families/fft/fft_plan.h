// The host side of FFT tiling (the fft family): tile geometry, the workspace's three parts (U, V, M per group and
// frequency bin, complex values as real blocks of twice the channels), the twiddle tables, support and the launches
// of kernels/fft/fft.cl around the batched GEMM.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "convtune/kernel_family.h"

namespace convtune::fft {

// The tile sides (T) the family builds: T x T input tiles give (T - R + 1) x (T - S + 1) outputs. Direct DFTs take
// any size; these cover the output sides of common layers exactly (7, 14, 28, 56 with 3x3: 10, 16, 30; 13 and 27
// with 3x3 and 5x5: 16, 32).
inline const std::vector<int64_t> kSizes = {8, 10, 12, 14, 16, 20, 24, 32};
inline const std::vector<int64_t> kBatchChunks = {1, 2, 4, 8, 16, 32, 64, 128, 256};
inline constexpr int64_t kMaxChunks = 4096;  // launch steps: three per chunk (see winograd_plan.h)

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bins of a T x T real DFT kept: T x (T/2 + 1) (the others are their conjugates).
inline int64_t bins(int64_t size) { return size * (size / 2 + 1); }

struct Layout {
  int64_t size = 0, tile_h = 0, tile_w = 0;      // T, outputs per tile (T - R + 1, T - S + 1)
  bool gauss = false;                            // three real GEMMs a bin (Gauss's product) instead of one of 2x2
  int64_t gemms = 1;                             // real GEMMs a group and bin: 3 with gauss
  int64_t tiles_y = 0, tiles_x = 0, tiles = 0;  // tiles: per channel and chunk, whole slices
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;   // one bin's real GEMM
  size_t v_offset = 0, m_offset = 0, total = 0;  // floats
};

Layout layout(const ConvProblem& pb, int64_t size, int64_t chunk, int64_t split, bool gauss = false);
uint64_t workspace_bytes(const ConvProblem& pb, int64_t size, int64_t chunk, int64_t split, bool gauss = false);

// The output side the tiles cover: P x Q (forward, backward-filter) or H x W (backward-data).
int64_t covered_side(const ConvProblem& pb);
// The smallest size of kSizes whose tile covers the larger output side in one tile (the largest size when none
// does); larger tiles would only pad.
int64_t covering_size(const ConvProblem& pb);
// The smallest size whose tile holds at least two outputs a side.
int64_t smallest_size(const ConvProblem& pb);

// Whether `width`-float loads of the GEMM's A and B stay aligned (gemm.cl's X_VECTOR contract).
bool a_vectorizes(const Layout& l, int64_t width);
bool b_vectorizes(const ConvProblem& pb, const Layout& l, int64_t width);

// Empty when the shape suits the kernels: stride 1, dilation 1, a filter up to 31 taps a side, the smallest tile's
// workspace for one image within the limit, few enough chunks.
std::string unsupported_shape_reason(const ConvProblem& pb, const Epilogue& epilogue, const DeviceInfo& device);

// Few channels, a 1x1 filter, or fewer than 25 taps (3x3: winograd's ground): where fft, untuned, lost or saves
// nothing against the transforms' traffic.
std::string poor_fit(const ConvProblem& pb);

// The size a plan without tuning takes: the fewest estimated operations (the bins' GEMMs and the direct DFTs
// around them) over the sizes that cover the output at most once.
int64_t default_size(const ConvProblem& pb);
int64_t largest_chunk(const ConvProblem& pb, int64_t size, int64_t split, uint64_t cap, bool gauss = false);

// cos(2 pi k / T) and sin(2 pi k / T), k < T, as float literals, exact zeros and ones where the value is (the
// kernels drop multiplications by zero at compile time).
std::string twiddles(int64_t size, bool sine);

std::map<std::string, std::string> layout_defines(const ConvProblem& pb, const Epilogue& epilogue, const Layout& l,
                                                  int64_t transform_tiles);

using GemmStep = std::function<LaunchStep(const ArgSource& first, const ArgSource& count)>;
std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, const Layout& l, int64_t batch_chunk,
                              int64_t split, int64_t transform_tiles, const GemmStep& gemm);

}  // namespace convtune::fft
