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

KernelRecipe make_recipe(const ConvProblem& pb, const Params& params) {
  KernelRecipe recipe;
  recipe.source.file = "im2col_gemm/im2col_gemm.cl";
  recipe.source.defines = problem_defines(pb);  // the shape and DIRECTION (0 fwd, 1 bwd-data, 2 bwd-filter)
  parameter_table().add_defines(params, recipe.source.defines);

  const int64_t chunk = params.batch_chunk, unroll_threads = params.unroll_threads;
  recipe.workspace_bytes = column_bytes(pb, chunk);
  constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
  const ArgSource columns = ArgSource::workspace();

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
    recipe.steps.push_back({"zero_filter", {ArgSource::of_operand(w)}, zero_geometry});
  }
  for (int64_t image0 = 0; image0 < pb.n; image0 += chunk) {
    const int64_t images = std::min(chunk, pb.n - image0);
    const ArgSource first = ArgSource::fixed(static_cast<int32_t>(image0));
    const ArgSource count = ArgSource::fixed(static_cast<int32_t>(images));
    const GemmShape shape = gemm_shape(pb, images);
    const LaunchGeometry gemm_geometry = gemm::launch_geometry(shape.m, shape.n, pb.groups, params);
    auto op = ArgSource::of_operand;
    switch (pb.direction) {
      case Direction::Forward:
        recipe.steps.push_back({"unroll", {op(x), columns, first, count}, unroll_geometry});
        recipe.steps.push_back({"gemm", {op(w), columns, op(y), first, count}, gemm_geometry});
        break;
      case Direction::BackwardData:
        recipe.steps.push_back({"gemm", {op(w), op(y), columns, first, count}, gemm_geometry});
        recipe.steps.push_back({"col2im", {columns, op(x), first, count}, col2im_geometry});
        break;
      case Direction::BackwardFilter:
        recipe.steps.push_back({"unroll", {op(x), columns, first, count}, unroll_geometry});
        recipe.steps.push_back({"gemm", {op(y), columns, op(w), first, count}, gemm_geometry});
        break;
    }
  }
  return recipe;
}

}  // namespace convtune::im2col_gemm
