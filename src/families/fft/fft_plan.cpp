// The host side of FFT tiling: see fft_plan.h.
#include "src/families/fft/fft_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "src/families/gemm/gemm_tiles.h"

namespace convtune::fft {

namespace {

constexpr size_t kWorkspaceAlignFloats = 64;  // V and M start on 256-byte boundaries: vector loads stay aligned
constexpr int64_t kMaxFilterSide = 31;         // the largest size, 32, keeps two outputs a side

size_t align(uint64_t floats) {
  return static_cast<size_t>((floats + kWorkspaceAlignFloats - 1) / kWorkspaceAlignFloats * kWorkspaceAlignFloats);
}

}  // namespace

int64_t covered_side(const ConvProblem& pb) {
  const bool to_x = pb.direction == Direction::BackwardData;
  return std::max(to_x ? pb.h : pb.p(), to_x ? pb.w : pb.q());
}

WorkLayout layout(const ConvProblem& pb, int64_t size, int64_t chunk, int64_t split, bool gauss) {
  WorkLayout l;
  l.size = size;
  l.gauss = gauss, l.gemms = gauss ? 3 : 1;
  l.tile_h = size - pb.r + 1, l.tile_w = size - pb.s + 1;
  const bool to_x = pb.direction == Direction::BackwardData;
  l.tiles_y = ceil_div(to_x ? pb.h : pb.p(), l.tile_h);
  l.tiles_x = ceil_div(to_x ? pb.w : pb.q(), l.tile_w);
  const int64_t s = pb.direction == Direction::BackwardFilter ? split : 1;
  l.tiles = ceil_div(chunk * l.tiles_y * l.tiles_x, s) * s;
  const uint64_t places = static_cast<uint64_t>(pb.groups * bins(size));
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group();
  uint64_t u = 0, v = 0, m = 0;
  switch (pb.direction) {
    case Direction::Forward:
    case Direction::BackwardData: {
      // U: the 2x2 blocks (2 out x 2 in), or Gauss's three planes; V and M: re, im (and Gauss's third) planes.
      const int64_t in = to_x ? kg : cg, out = to_x ? cg : kg;
      const int64_t planes = gauss ? 3 : 2;
      l.gemm_m = gauss ? out : 2 * out, l.gemm_n = l.tiles, l.gemm_k = gauss ? in : 2 * in;
      u = places * static_cast<uint64_t>((gauss ? 3 : 4) * out * in);
      v = places * static_cast<uint64_t>(planes * in * l.tiles);
      m = places * static_cast<uint64_t>(planes * out * l.tiles);
      break;
    }
    case Direction::BackwardFilter: {
      const int64_t planes = gauss ? 3 : 2;
      l.gemm_m = gauss ? kg : 2 * kg, l.gemm_n = gauss ? cg : 2 * cg, l.gemm_k = l.tiles / s;
      u = places * static_cast<uint64_t>(planes * kg * l.tiles);
      v = places * static_cast<uint64_t>(planes * cg * l.tiles);
      m = places * static_cast<uint64_t>((gauss ? 3 : 4) * kg * cg * s);
      break;
    }
  }
  l.v_offset = align(u);
  l.m_offset = l.v_offset + align(v);
  l.total = l.m_offset + m;
  return l;
}

uint64_t workspace_bytes(const ConvProblem& pb, int64_t size, int64_t chunk, int64_t split, bool gauss) {
  return layout(pb, size, chunk, split, gauss).total * sizeof(float);
}

int64_t smallest_size(const ConvProblem& pb) {
  for (int64_t size : kSizes)
    if (size - std::max(pb.r, pb.s) + 1 >= 2) return size;
  return kSizes.back();
}

int64_t covering_size(const ConvProblem& pb) {
  for (int64_t size : kSizes)
    if (size - std::max(pb.r, pb.s) + 1 >= 2 && size - std::max(pb.r, pb.s) + 1 >= covered_side(pb)) return size;
  return kSizes.back();
}

bool a_vectorizes(const WorkLayout& l, int64_t width) { return l.gemm_k % width == 0; }
bool b_vectorizes(const ConvProblem& pb, const WorkLayout& l, int64_t width) {
  return (pb.direction == Direction::BackwardFilter ? l.gemm_k : l.tiles) % width == 0;
}

std::string unsupported_shape_reason(const ConvProblem& pb, const Epilogue& epilogue, const DeviceInfo& device) {
  if (epilogue.pool > 1) return "a fused max-pool is not implemented (bias and ReLU are)";
  if (epilogue.any() && pb.direction != Direction::Forward) return "epilogues apply to the forward direction only";
  if (pb.stride.h != 1 || pb.stride.w != 1) return fmt::format("needs stride 1, not {}x{}", pb.stride.h, pb.stride.w);
  if (pb.dilation.h != 1 || pb.dilation.w != 1)
    return fmt::format("needs dilation 1, not {}x{}", pb.dilation.h, pb.dilation.w);
  if (std::max(pb.r, pb.s) > kMaxFilterSide)
    return fmt::format("a {}x{} filter: at most {} taps a side (tiles of {} keep two outputs)", pb.r, pb.s,
                       kMaxFilterSide, kSizes.back());
  const int64_t smallest = smallest_size(pb);
  if (pb.groups * bins(smallest) > gemm::kMaxGridAxis)
    return fmt::format("groups={} x {} bins exceeds {} (CUDA grid axis 2)", pb.groups, bins(smallest), gemm::kMaxGridAxis);
  if (workspace_bytes(pb, smallest, 1, 1) > workspace_limit(device)) {
    return fmt::format("the transformed tiles of one image ({} bytes) exceed the workspace limit of {} bytes",
                       workspace_bytes(pb, smallest, 1, 1), workspace_limit(device));
  }
  const int64_t chunk = largest_chunk(pb, smallest, 1, workspace_limit(device));
  if (ceil_div(pb.n, chunk) > kMaxChunks) {
    return fmt::format("N={} needs more than {} chunks of at most {} images (three launch steps each)", pb.n,
                       kMaxChunks, chunk);
  }
  return {};
}

std::string poor_fit(const ConvProblem& pb) {
  if (pb.r * pb.s == 1) return "a 1x1 filter: the frequency domain saves nothing";
  // Measured on the H200: on 3x3 layers winograd's F(4x4, 3x3) ran forward and backward-data 1.05-1.4x faster than
  // fft, and backward-filter was split (fft 0.76-0.87x of winograd's time on alex3, alex5 and a 256-channel 13x13
  // layer, 1.1-1.9x on seven others). Left as candidates, the shipped entries taught the untuned cost model to pick
  // fft on 3x3 backward-filter layers it lost (a 512-channel 14x14 one at 0.75 of winograd's speed): tuning entries
  // alone choose it there.
  if (pb.r * pb.s < 25)
    return fmt::format("a {}x{} filter: fewer than 25 taps, where Winograd's tiles do fewer operations", pb.r, pb.s);
  if (std::min(pb.c_per_group(), pb.k_per_group()) < 16)
    return fmt::format("{} channels per group: the transforms' traffic outweighs the GEMM",
                       std::min(pb.c_per_group(), pb.k_per_group()));
  return {};
}

int64_t default_size(const ConvProblem& pb) {
  const bool to_x = pb.direction == Direction::BackwardData;
  const int64_t in = to_x ? pb.k_per_group() : pb.c_per_group(), out = to_x ? pb.c_per_group() : pb.k_per_group();
  const int64_t cover = covering_size(pb);
  int64_t best = smallest_size(pb);
  double best_cost = std::numeric_limits<double>::max();
  for (int64_t size : kSizes) {
    if (size < smallest_size(pb) || size > cover) continue;
    const WorkLayout l = layout(pb, size, 1, 1);
    // Per tile and bin: 4 in x out multiplications in the GEMM; each input channel's direct DFTs about 6 T per bin,
    // each output channel's inverse about as many.
    const double cost = static_cast<double>(l.tiles_y * l.tiles_x * bins(size)) *
                        (4.0 * static_cast<double>(in * out) + 6.0 * static_cast<double>(size * (in + out)));
    if (cost < best_cost) best_cost = cost, best = size;
  }
  return best;
}

int64_t largest_chunk(const ConvProblem& pb, int64_t size, int64_t split, uint64_t cap, bool gauss) {
  int64_t chunk = 1;
  for (int64_t c : kBatchChunks)
    if (c <= pb.n && workspace_bytes(pb, size, c, split, gauss) <= cap) chunk = c;
  return chunk;
}

bool large_filter_layer_in_one_chunk(const ConvProblem& pb, const DeviceInfo& device) {
  return large_filter_layer(pb) && largest_chunk(pb, default_size(pb), 1, workspace_limit(device), false) >= pb.n;
}

int64_t gemm_layers(const ConvProblem& pb, const WorkLayout& l, int64_t split) {
  return (pb.direction == Direction::BackwardFilter ? split : 1) * pb.groups * bins(l.size) * l.gemms;
}

Slices filter_slices(const ConvProblem& pb, int64_t size, int64_t blocks, int64_t min_reduction,
                     const DeviceInfo& device) {
  const uint64_t cap = workspace_limit(device);
  Slices s;
  const int64_t target = 2 * std::max(1, device.compute_units);
  while (s.split < 64 && blocks * s.split * 2 <= target) s.split *= 2;
  s.chunk = largest_chunk(pb, size, s.split, cap, false);
  while (s.split > 1 && layout(pb, size, s.chunk, 1).tiles < s.split * min_reduction) s.split /= 2;
  return s;
}

int64_t default_transform_tiles(int64_t size, const DeviceInfo& device) {
  const int64_t max_threads = std::min<int64_t>(static_cast<int64_t>(device.max_work_group_size), device.is_gpu ? 256 : 64);
  const uint64_t local = std::min<uint64_t>(device.local_memory_bytes, gemm::kPortableLocalBytes);
  for (int64_t tiles : {32, 16, 8, 4, 2})
    if (tiles * size <= max_threads && transform_local_bytes(tiles, size) <= local) return tiles;
  return 1;
}

Config carried_config(const Config& tuned, const Config& fresh, const ConvProblem& problem) {
  if (tuned.at("FFT_SIZE") > covering_size(problem)) return fresh;
  Config carried = tuned;
  for (const char* name : {"BATCH_CHUNK", "SPLIT"}) carried[name] = fresh.at(name);
  return carried;
}

std::string twiddles(int64_t size, bool sine) {
  std::string list;
  for (int64_t k = 0; k < size; ++k) {
    const double angle = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(size);
    double value = sine ? std::sin(angle) : std::cos(angle);
    // Exact where the value is: 0 and +-1 at multiples of a quarter turn (sin(pi) is 1.2e-16 in double).
    if (std::abs(value) < 1e-12) value = 0.0;
    if (std::abs(std::abs(value) - 1.0) < 1e-12) value = value > 0 ? 1.0 : -1.0;
    // Scientific notation is always a float literal with the suffix ("1f" would not be).
    list += fmt::format("{}{:.9e}f", k == 0 ? "" : ",", static_cast<float>(value));  // defines hold no spaces
  }
  return list;
}

std::map<std::string, std::string> layout_defines(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l,
                                                  int64_t transform_tiles) {
  std::map<std::string, std::string> d = problem_defines(pb);
  auto s = [](int64_t v) { return std::to_string(v); };
  d["FFT_T"] = s(l.size);
  d["FFT_H2"] = s(l.size / 2 + 1);
  d["TILE_OH"] = s(l.tile_h);
  d["TILE_OW"] = s(l.tile_w);
  d["TILES_Y"] = s(l.tiles_y);
  d["TILES_X"] = s(l.tiles_x);
  d["TRANSFORM_TILES"] = s(transform_tiles);
  d["V_OFFSET"] = s(static_cast<int64_t>(l.v_offset));
  d["M_OFFSET"] = s(static_cast<int64_t>(l.m_offset));
  d["FFT_COS"] = twiddles(l.size, false);
  d["FFT_SIN"] = twiddles(l.size, true);
  d["HAS_BIAS"] = epilogue.bias ? "1" : "0";  // bias and ReLU fused into the forward output transform
  d["HAS_RELU"] = epilogue.relu ? "1" : "0";
  return d;
}

std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l, int64_t batch_chunk,
                              int64_t split, int64_t transform_tiles, const GemmStep& gemm) {
  transform_steps::Transforms t;
  t.prefix = "fft";
  t.tiles = l.tiles;
  // The tile transforms: work-groups of transform_tiles tiles x T lanes; the filter transforms: a thread per
  // channel pair and kept column of the spectrum, in work-groups of the same size.
  t.tiles_per_group = transform_tiles;
  t.group_size = transform_tiles * l.size;
  t.filter_factor = l.size / 2 + 1;
  // Several chunks add into M, which starts at zero; a single chunk's GEMM writes it (FFT_CHUNKS in the kernels).
  if (batch_chunk < pb.n)
    t.zero_items = split * pb.groups * bins(l.size) * (l.gauss ? 3 : 4) * pb.k_per_group() * pb.c_per_group();
  return transform_steps::steps(pb, epilogue, batch_chunk, t, gemm);
}

}  // namespace convtune::fft
