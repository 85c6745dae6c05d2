// im2col_gemm launches: per chunk of BATCH_CHUNK images, unroll + GEMM (forward; backward-filter after one
// zero_filter) or GEMM + col2im (backward-data), all from one program (kernels/im2col_gemm/im2col_gemm.cl).
#include <algorithm>

#include "src/families/im2col_gemm/im2col_gemm_spec.h"

namespace convtune::im2col_gemm {

namespace {

size_t round_up(int64_t value, int64_t multiple) {
  return static_cast<size_t>((value + multiple - 1) / multiple * multiple);
}

}  // namespace

uint64_t workspace_cap_bytes(const DeviceInfo& device) {
  constexpr uint64_t kCap = uint64_t{256} << 20;
  // A device that reports no global memory size keeps the fixed cap rather than a cap of zero.
  return device.global_memory_bytes == 0 ? kCap : std::min(kCap, device.global_memory_bytes / 4);
}

uint64_t column_bytes(const ConvProblem& pb, int64_t batch_chunk) {
  return static_cast<uint64_t>(pb.c * pb.r * pb.s) * static_cast<uint64_t>(batch_chunk * pb.p() * pb.q()) *
         sizeof(float);
}

GemmShape gemm_shape(const ConvProblem& pb, int64_t chunk_images) {
  const int64_t crs = pb.c_per_group() * pb.r * pb.s, cols = chunk_images * pb.p() * pb.q();
  switch (pb.direction) {
    case Direction::Forward: return {pb.k_per_group(), cols, crs};
    case Direction::BackwardData: return {crs, cols, pb.k_per_group()};
    case Direction::BackwardFilter: return {pb.k_per_group(), crs, cols};
  }
  return {};
}

KernelRecipe make_recipe(const ConvProblem& pb, const Config& config) {
  KernelRecipe recipe;
  recipe.source.file = "im2col_gemm/im2col_gemm.cl";
  recipe.source.defines = problem_defines(pb);  // the shape and DIRECTION (0 fwd, 1 bwd-data, 2 bwd-filter)
  for (const auto& [name, value] : config) recipe.source.defines[name] = std::to_string(value);

  const int64_t chunk = config.at("BATCH_CHUNK"), unroll_threads = config.at("UNROLL_THREADS");
  const int64_t tile_m = config.at("TILE_M"), tile_n = config.at("TILE_N");
  const int64_t threads_m = config.at("THREADS_M"), threads_n = config.at("THREADS_N");
  recipe.workspace_bytes = {column_bytes(pb, chunk)};

  // unroll and col2im cover every slot of the chunk; the kernels skip images past a short last chunk.
  LaunchGeometry unroll_geometry;
  unroll_geometry.global[0] = round_up(pb.c * chunk * pb.p() * pb.q(), unroll_threads);
  unroll_geometry.local[0] = static_cast<size_t>(unroll_threads);
  LaunchGeometry col2im_geometry;
  col2im_geometry.global[0] = round_up(pb.c * chunk * pb.h * pb.w, unroll_threads);
  col2im_geometry.local[0] = static_cast<size_t>(unroll_threads);

  if (pb.direction == Direction::BackwardFilter) {
    // Every chunk's GEMM adds into dw, so it is cleared first: it arrives poisoned with NaN.
    LaunchGeometry zero_geometry;
    zero_geometry.global[0] = round_up(pb.w_elements(), unroll_threads);
    zero_geometry.local[0] = static_cast<size_t>(unroll_threads);
    recipe.steps.push_back({"zero_filter", {"w"}, {}, zero_geometry});
  }
  for (int64_t image0 = 0; image0 < pb.n; image0 += chunk) {
    const int64_t images = std::min(chunk, pb.n - image0);
    const std::map<std::string, KernelArg> scalars = {{"image0", static_cast<int32_t>(image0)},
                                                       {"chunk_images", static_cast<int32_t>(images)}};
    const GemmShape shape = gemm_shape(pb, images);
    LaunchGeometry gemm_geometry;
    gemm_geometry.dims = 3;
    gemm_geometry.global = {round_up(shape.n, tile_n) / tile_n * threads_n,
                            round_up(shape.m, tile_m) / tile_m * threads_m, static_cast<size_t>(pb.groups)};
    gemm_geometry.local = {static_cast<size_t>(threads_n), static_cast<size_t>(threads_m), 1};

    switch (pb.direction) {
      case Direction::Forward:
        recipe.steps.push_back({"unroll", {"x", "workspace0", "image0", "chunk_images"}, scalars, unroll_geometry});
        recipe.steps.push_back(
            {"gemm", {"w", "workspace0", "y", "image0", "chunk_images"}, scalars, gemm_geometry});
        break;
      case Direction::BackwardData:
        recipe.steps.push_back(
            {"gemm", {"w", "y", "workspace0", "image0", "chunk_images"}, scalars, gemm_geometry});
        recipe.steps.push_back({"col2im", {"workspace0", "x", "image0", "chunk_images"}, scalars, col2im_geometry});
        break;
      case Direction::BackwardFilter:
        recipe.steps.push_back({"unroll", {"x", "workspace0", "image0", "chunk_images"}, scalars, unroll_geometry});
        recipe.steps.push_back(
            {"gemm", {"y", "workspace0", "w", "image0", "chunk_images"}, scalars, gemm_geometry});
        break;
    }
  }
  return recipe;
}

}  // namespace convtune::im2col_gemm
