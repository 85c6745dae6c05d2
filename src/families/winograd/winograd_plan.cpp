// The host side winograd and winograd_tc share: see winograd_plan.h.
#include "src/families/winograd/winograd_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "src/families/gemm/gemm_tiles.h"
#include "src/families/winograd/winograd_transforms.h"

namespace convtune::winograd {

namespace {

constexpr size_t kWorkspaceAlignFloats = 64;  // V and M start on 256-byte boundaries: vector loads stay aligned

size_t align(uint64_t floats) {
  return static_cast<size_t>((floats + kWorkspaceAlignFloats - 1) / kWorkspaceAlignFloats * kWorkspaceAlignFloats);
}

}  // namespace

double alpha_error_factor(int64_t alpha) { return alpha > 6 ? 4.0 : 1.0; }

bool math_admits(const ConvProblem& pb, int64_t alpha) {
  return alpha_error_factor(alpha) <= max_error_factor(pb.type, pb.math);
}

double config_error_factor(const ConvProblem& pb, const Config& config) {
  const auto it = config.find("M_TILE");
  return it == config.end() ? 1.0 : alpha_error_factor(it->second + pb.r - 1);
}

WorkLayout layout(const ConvProblem& pb, int64_t m_tile, int64_t chunk, int64_t split) {
  WorkLayout l;
  l.alpha = m_tile + pb.r - 1;
  const bool to_x = pb.direction == Direction::BackwardData;
  l.tiles_y = ceil_div(to_x ? pb.h : pb.p(), m_tile);
  l.tiles_x = ceil_div(to_x ? pb.w : pb.q(), m_tile);
  const int64_t s = pb.direction == Direction::BackwardFilter ? split : 1;
  l.tiles = ceil_div(chunk * l.tiles_y * l.tiles_x, s) * s;
  const uint64_t positions = static_cast<uint64_t>(pb.groups * l.alpha * l.alpha);
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group();
  uint64_t u = 0, v = 0, m = 0;
  switch (pb.direction) {
    case Direction::Forward:
    case Direction::BackwardData: {
      const int64_t in = to_x ? kg : cg, out = to_x ? cg : kg;
      l.gemm_m = out, l.gemm_n = l.tiles, l.gemm_k = in;
      u = positions * static_cast<uint64_t>(out * in);
      v = positions * static_cast<uint64_t>(in * l.tiles);
      m = positions * static_cast<uint64_t>(out * l.tiles);
      break;
    }
    case Direction::BackwardFilter:
      l.gemm_m = kg, l.gemm_n = cg, l.gemm_k = l.tiles / s;
      u = positions * static_cast<uint64_t>(kg * l.tiles);
      v = positions * static_cast<uint64_t>(cg * l.tiles);
      m = positions * static_cast<uint64_t>(kg * cg * s);
      break;
  }
  l.v_offset = align(u);
  l.m_offset = l.v_offset + align(v);
  l.total = l.m_offset + m;
  return l;
}

uint64_t workspace_bytes(const ConvProblem& pb, int64_t m_tile, int64_t chunk, int64_t split) {
  return layout(pb, m_tile, chunk, split).total * sizeof(float);
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
  if (pb.r != pb.s || (pb.r != 3 && pb.r != 5 && pb.r != 7))
    return fmt::format("needs a square 3x3, 5x5 or 7x7 filter, not {}x{}", pb.r, pb.s);
  // The smallest tile, F(2x2), is the most accurate: if its points are too many for the mode, every tile is.
  if (!math_admits(pb, 2 + pb.r - 1)) {
    return fmt::format("a {}x{} filter needs alpha {} (F(2x2,{}x{})), held to {:g}x the FP32 tolerance: {} math "
                       "admits {:g}x (fp32-fast admits it)",
                       pb.r, pb.s, 2 + pb.r - 1, pb.r, pb.s, alpha_error_factor(2 + pb.r - 1), to_string(pb.math),
                       max_error_factor(pb.type, pb.math));
  }
  if (pb.groups * 16 > gemm::kMaxGridAxis)
    return fmt::format("groups={} exceeds {} (groups x transform positions on CUDA grid axis 2)", pb.groups,
                       gemm::kMaxGridAxis / 16);
  if (workspace_bytes(pb, 2, 1, 1) > workspace_limit(device)) {
    return fmt::format("the transformed tiles of one image ({} bytes) exceed the workspace limit of {} bytes",
                       workspace_bytes(pb, 2, 1, 1), workspace_limit(device));
  }
  const int64_t chunk = largest_chunk(pb, 2, 1, workspace_limit(device));
  if (ceil_div(pb.n, chunk) > kMaxChunks) {
    return fmt::format("N={} needs more than {} chunks of at most {} images (three launch steps each)", pb.n,
                       kMaxChunks, chunk);
  }
  return {};
}

// Measured on the H200 with no tuning data: on 3x3 layers with at least 32 channels a group, winograd's default ran
// 1.3-3.7x faster than the best other family's in every direction (N=1 to 32, 7x7 to 128x128 images); on 5x5 layers
// with at least 48, 1.1-1.7x, but backward-filter only where C x K per group reaches 4,096 (48 x 64 ran 0.31 ms
// against implicit_gemm's 0.22). Below 32 channels (19, 8) it lost. On a GPU, 5x5 forward and backward-data from 32
// channels (scripts/gpu/sweeps/winograd_5x5_narrow.txt and winograd_narrow_backward_data.txt, four layers of 32-40
// channels, N=32 to 10,000): forward fastest on three (1.04-1.40x ahead of the next family's default), 2% behind
// implicit_gemm on Fashion-MNIST's conv2; backward-data, with its 32-row tiles, fastest on all four (1.13-1.42x
// ahead: conv2 5.57 against direct_tiled's 6.96 ms). Backward-filter lost to implicit_gemm there by 1.29-1.45x. Not
// measured on PoCL or for winograd_tc: they keep 48.
std::string wide_layer_claim(const ConvProblem& pb, bool narrow_5x5) {
  const int64_t channels = std::min(pb.c_per_group(), pb.k_per_group());
  const bool wide_3x3 = pb.r == 3 && pb.s == 3 && channels >= 32;
  const int64_t least_5x5 = narrow_5x5 && pb.direction != Direction::BackwardFilter ? 32 : 48;
  const bool wide_5x5 = pb.r == 5 && pb.s == 5 && channels >= least_5x5 &&
                        (pb.direction != Direction::BackwardFilter || pb.c_per_group() * pb.k_per_group() >= 4096);
  if (!wide_3x3 && !wide_5x5) return {};
  return fmt::format("a {}x{} stride-1 layer with {} channels a group: the transforms save 2-4x the multiplies", pb.r,
                     pb.s, channels);
}

std::string poor_fit(const ConvProblem& pb) {
  if (std::min(pb.c_per_group(), pb.k_per_group()) < 16)
    return fmt::format("{} channels per group: the transforms' traffic outweighs the GEMM",
                       std::min(pb.c_per_group(), pb.k_per_group()));
  return {};
}

int64_t default_m_tile(const ConvProblem& pb) {
  const bool to_x = pb.direction == Direction::BackwardData;
  const int64_t out_side = std::min(to_x ? pb.h : pb.p(), to_x ? pb.w : pb.q());
  return pb.r == 3 && out_side > 4 ? 4 : 2;
}

int64_t largest_chunk(const ConvProblem& pb, int64_t m_tile, int64_t split, uint64_t cap) {
  int64_t chunk = 1;
  for (int64_t c : kBatchChunks)
    if (c <= pb.n && workspace_bytes(pb, m_tile, c, split) <= cap) chunk = c;
  return chunk;
}

std::map<std::string, std::string> layout_defines(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l,
                                                  int64_t m_tile) {
  std::map<std::string, std::string> d = problem_defines(pb);
  auto s = [](int64_t v) { return std::to_string(v); };
  d["ALPHA"] = s(l.alpha);
  d["TILES_Y"] = s(l.tiles_y);
  d["TILES_X"] = s(l.tiles_x);
  d["V_OFFSET"] = s(static_cast<int64_t>(l.v_offset));
  d["M_OFFSET"] = s(static_cast<int64_t>(l.m_offset));
  const int m = static_cast<int>(m_tile), r = static_cast<int>(pb.r);
  // Forward and backward-data: F(m, r). Backward-filter: F(r, m), the dy tile being the filter.
  const Transforms transforms = pb.direction == Direction::BackwardFilter ? make_transforms(r, m, default_points(r, m))
                                                                          : make_transforms(m, r, default_points(m, r));
  add_defines(transforms, d);
  d["HAS_BIAS"] = epilogue.bias ? "1" : "0";  // bias and ReLU fused into the forward output transform
  d["HAS_RELU"] = epilogue.relu ? "1" : "0";
  return d;
}

std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, const WorkLayout& l, int64_t batch_chunk,
                              int64_t split, int64_t transform_threads, const GemmStep& gemm) {
  transform_steps::Transforms t;
  t.prefix = "winograd";
  t.tiles = l.tiles;
  // Every transform: a work-item per tile or channel pair, in work-groups of transform_threads.
  t.tiles_per_group = transform_threads;
  t.group_size = transform_threads;
  // Backward-filter: the slices add into M, which starts at zero.
  t.zero_items = split * pb.groups * l.alpha * l.alpha * pb.k_per_group() * pb.c_per_group();
  return transform_steps::steps(pb, epilogue, batch_chunk, t, gemm);
}

}  // namespace convtune::winograd
