// implicit_gemm launches: one main kernel per direction (grid: N-tiles x M-tiles x groups*slices), plus the
// split-K reduction with SPLIT_K > 1. One source (kernels/implicit_gemm/implicit_gemm.cl) serves OpenCL and CUDA;
// every shape and parameter is a compile-time constant.
#include <fmt/format.h>

#include <algorithm>

#include "src/families/implicit_gemm/implicit_gemm_spec.h"

namespace convtune::implicit_gemm {

namespace {

size_t ceil_div(int64_t a, int64_t b) { return static_cast<size_t>((a + b - 1) / b); }

}  // namespace

KernelRecipe make_recipe(const ConvProblem& pb, const Epilogue& epilogue, const Params& params,
                         const DeviceInfo& device) {
  KernelRecipe recipe;
  recipe.source.file = "implicit_gemm/implicit_gemm.cl";
  recipe.source.defines = problem_defines(pb);
  recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
  recipe.source.defines["HAS_RELU"] = epilogue.relu ? "1" : "0";
  parameter_table(pb).add_defines(params, recipe.source.defines);
  if (params.max_registers > 0 && device.backend == BackendKind::OpenCL &&
      device.vendor.find("NVIDIA") != std::string::npos) {
    // NVIDIA's OpenCL has no __launch_bounds__; its compiler option caps registers the same way.
    recipe.source.options.push_back(fmt::format("-cl-nv-maxrregcount={}", params.max_registers));
  }

  const GemmShape gemm = gemm_shape(pb);
  const int64_t split = params.split_k;
  const Problem generic(pb);
  const int written = generic.written_operand();

  LaunchStep main;
  main.geometry.dims = 3;
  main.geometry.global = {ceil_div(gemm.n, params.tile_n) * static_cast<size_t>(params.threads()),
                          ceil_div(gemm.m, params.tile_m), static_cast<size_t>(pb.groups * split)};
  main.geometry.local = {static_cast<size_t>(params.threads()), 1, 1};
  // Arguments x, w, y; with split-K the written operand's place takes the workspace of partial outputs.
  for (int operand = 0; operand < Problem::kOperands; ++operand) {
    main.args.push_back(operand == written && split > 1 ? ArgSource::workspace() : ArgSource::of_operand(operand));
  }
  switch (pb.direction) {
    case Direction::Forward:
      main.kernel = "implicit_gemm_fwd";
      if (epilogue.bias && split == 1) main.args.push_back(ArgSource::of_operand(kBiasOperand));
      break;
    case Direction::BackwardData: main.kernel = "implicit_gemm_bwd_data"; break;
    case Direction::BackwardFilter: main.kernel = "implicit_gemm_bwd_filter"; break;
  }
  recipe.steps.push_back(main);

  if (split > 1) {
    const int64_t elements = pb.written_elements();
    recipe.workspace_bytes = static_cast<size_t>(split * elements) * sizeof(float);
    LaunchStep reduce;
    reduce.kernel = "implicit_gemm_splitk_reduce";
    reduce.args = {ArgSource::workspace(), ArgSource::of_operand(written)};
    if (epilogue.bias) reduce.args.push_back(ArgSource::of_operand(kBiasOperand));
    const size_t local = std::min<size_t>(256, device.max_work_group_size);
    reduce.geometry.dims = 1;
    reduce.geometry.global = {ceil_div(elements, static_cast<int64_t>(local)) * local, 1, 1};
    reduce.geometry.local = {local, 1, 1};
    recipe.steps.push_back(reduce);
  }
  return recipe;
}

}  // namespace convtune::implicit_gemm
