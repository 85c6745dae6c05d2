// The transform-domain families' launch sequence: see transform_steps.h.
#include "src/families/transform_steps.h"

#include <algorithm>

namespace convtune::transform_steps {

GemmStep gemm_kernel_step(const LaunchGeometry& geometry) {
  return [geometry](const ArgSource& first, const ArgSource& count) -> LaunchStep {
    const ArgSource workspace = ArgSource::workspace();
    return {"gemm", {workspace, workspace, workspace, first, count}, geometry};
  };
}

GemmStep workspace_gemm_step(const std::string& kernel, const LaunchGeometry& geometry) {
  return [kernel, geometry](const ArgSource&, const ArgSource&) -> LaunchStep {
    return {kernel, {ArgSource::workspace()}, geometry};
  };
}

std::vector<LaunchStep> steps(const ConvProblem& pb, const Epilogue& epilogue, int64_t batch_chunk,
                              const Transforms& t, const GemmStep& gemm) {
  constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
  auto op = ArgSource::of_operand;
  const ArgSource workspace = ArgSource::workspace();
  auto groups_of = [&](int64_t items, int64_t per_group) {
    LaunchGeometry g;
    g.global[0] = static_cast<size_t>((items + per_group - 1) / per_group * t.group_size);
    g.local[0] = static_cast<size_t>(t.group_size);
    return g;
  };
  auto tiled = [&](int64_t items) { return groups_of(items, t.tiles_per_group); };
  auto flat = [&](int64_t items) { return groups_of(items, t.group_size); };
  auto kernel = [&](const char* name) { return t.prefix + name; };
  const int64_t cg = pb.c_per_group(), kg = pb.k_per_group();
  std::vector<LaunchStep> list;
  if (pb.direction != Direction::BackwardFilter) {
    const bool forward = pb.direction == Direction::Forward;
    const int64_t in = forward ? cg : kg, out = forward ? kg : cg;
    const int in_operand = forward ? x : y, out_operand = forward ? y : x;
    list.push_back({kernel("_filter_transform"), {op(w), workspace}, flat(pb.groups * out * in * t.filter_factor)});
    for (int64_t image0 = 0; image0 < pb.n; image0 += batch_chunk) {
      const ArgSource first = ArgSource::fixed(static_cast<int32_t>(image0));
      const ArgSource count = ArgSource::fixed(static_cast<int32_t>(std::min(batch_chunk, pb.n - image0)));
      list.push_back({kernel("_input_transform"), {op(in_operand), workspace, first, count}, tiled(pb.groups * in * t.tiles)});
      list.push_back(gemm(first, count));
      std::vector<ArgSource> output_args = {workspace, op(out_operand), first, count};
      if (epilogue.bias) output_args.push_back(op(kBiasOperand));
      list.push_back({kernel("_output_transform"), output_args, tiled(pb.groups * out * t.tiles)});
    }
  } else {
    if (t.zero_items > 0) list.push_back({kernel("_zero"), {workspace}, flat(t.zero_items)});
    for (int64_t image0 = 0; image0 < pb.n; image0 += batch_chunk) {
      const ArgSource first = ArgSource::fixed(static_cast<int32_t>(image0));
      const ArgSource count = ArgSource::fixed(static_cast<int32_t>(std::min(batch_chunk, pb.n - image0)));
      list.push_back({kernel("_gradient_transform"), {op(y), workspace, first, count}, tiled(pb.groups * kg * t.tiles)});
      list.push_back({kernel("_input_transform"), {op(x), workspace, first, count}, tiled(pb.groups * cg * t.tiles)});
      list.push_back(gemm(first, count));
    }
    list.push_back({kernel("_filter_output_transform"), {workspace, op(w)}, flat(pb.groups * kg * cg)});
  }
  return list;
}

}  // namespace convtune::transform_steps
