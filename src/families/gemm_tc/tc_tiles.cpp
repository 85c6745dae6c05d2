// The tensor-core tile description shared by gemm_tc and implicit_gemm_tc: see tc_tiles.h.
#include "src/families/gemm_tc/tc_tiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/families/nvidia_arch.h"

namespace convtune::tensor_core {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t accumulators(const Params& p) { return (p.tile_m / p.warps_m / 16) * (p.tile_n / p.warps_n / 8) * 4; }

// Warps for a tile: one warp row per 64 rows and one warp column per 32 columns (64x32 warp tiles), at least two
// warps, at most four each way.
void set_warps(Params& p) {
  p.warps_m = std::clamp<int64_t>(p.tile_m / 64, 1, 4);
  p.warps_n = std::clamp<int64_t>(p.tile_n / 32, 1, 4);
  if (p.threads() < 64) {
    if (p.tile_n % (8 * p.warps_n * 2) == 0) p.warps_n *= 2;
    else p.warps_m *= 2;
  }
}

}  // namespace

std::vector<ParameterTable<Params>::Field> tile_fields(ElementType type) {
  using P = Params;
  if (type != ElementType::F32) {
    std::vector<ParameterTable<Params>::Field> fields = tile_fields(ElementType::F32);
    for (auto& f : fields) {
      if (f.name == "TILE_K") f.values = {16, 32, 64}, f.description = "reduction depth of one shared-memory stage (MMA steps of 16)";
      if (f.name == "SMEM_PADDING")
        f.description = "1: shared-memory rows padded by 8 elements (16 bytes) so ldmatrix's row reads are bank-conflict free";
      if (f.name == "STAGES") f.description = "shared-memory stages of the pipeline (tiles in flight + 1)";
    }
    return fields;
  }
  return {
      {"TILE_M", &P::tile_m, {32, 64, 128, 256}, "block tile rows (GEMM M)"},
      {"TILE_N", &P::tile_n, {32, 64, 128, 256}, "block tile columns (GEMM N)"},
      {"TILE_K", &P::tile_k, {8, 16, 32}, "reduction depth of one shared-memory stage (MMA steps of 8)"},
      {"WARPS_M", &P::warps_m, {1, 2, 4}, "warps along M; a warp tile has TILE_M/WARPS_M rows (m16 MMA tiles)"},
      {"WARPS_N", &P::warps_n, {1, 2, 4}, "warps along N; a warp tile has TILE_N/WARPS_N columns (n8 MMA tiles)"},
      {"STAGES", &P::stages, {2, 3, 4}, "shared-memory stages of the cp.async pipeline (tiles in flight + 1)"},
      {"SMEM_PADDING", &P::smem_padding, {0, 1},
       "1: shared-memory rows padded (4 floats K-contiguous, 8 otherwise) so fragment reads are bank-conflict free"},
      {"BLOCKS_PER_SM", &P::blocks_per_sm, {1, 2},
       "blocks a multiprocessor must hold (CUDA __launch_bounds__; NVIDIA OpenCL -cl-nv-maxrregcount): caps registers"},
  };
}

const ParameterTable<Params>& tile_table() {
  static const ParameterTable<Params> t(tile_fields());
  return t;
}

ParameterTable<Params> make_table(std::vector<int64_t> split_candidates, std::string split_description,
                                  ElementType type) {
  std::vector<ParameterTable<Params>::Field> fields = tile_fields(type);
  fields.push_back({"SPLIT_K", &Params::split_k, std::move(split_candidates), std::move(split_description)});
  return ParameterTable<Params>(std::move(fields));
}

bool emulated() {
  const char* text = std::getenv("CONVTUNE_EMULATE_TENSOR_CORES");
  return text && std::strcmp(text, "1") == 0;
}

std::string unsupported_reason(std::string_view family, const Problem& problem, const DeviceInfo& device,
                               bool sixteen_bit) {
  if (!device.can_run_kernels) return fmt::format("needs a device that compiles kernels: {}", device.cannot_run_reason);
  const bool narrow = problem.type() != ElementType::F32;
  if (narrow && !sixteen_bit) {
    return fmt::format("{} computes fp32 tensors (in tf32 or 3xtf32 math), not {} tensors", family,
                       to_string(problem.type()));
  }
  // fp32-fast asks for FP32 multiplies as fp32 does (it loosens the algorithm's bound, not the multiplies). 16-bit
  // tensors are in fp32 math (their products are exact in FP32).
  if (!narrow && (problem.math() == MathMode::FP32 || problem.math() == MathMode::FP32Fast)) {
    return fmt::format("{} multiplies on TF32 tensor cores: it computes tf32 and 3xtf32 math, not {}", family,
                       to_string(problem.math()));
  }
  if (families::nvidia_compute_capability(device) < 80 && !emulated()) {
    return fmt::format("{} needs an NVIDIA GPU of compute capability 8.0 or newer ({} mma.sync and cp.async in "
                       "PTX), not {} ({}, architecture {}), for {} {}",
                       family, narrow ? to_string(problem.type()) : "TF32", device.id, device.name,
                       device.architecture.empty() ? "-" : device.architecture,
                       narrow ? to_string(problem.type()) : to_string(problem.math()), narrow ? "tensors" : "math");
  }
  return {};
}

int64_t element_bytes(ElementType type) { return type == ElementType::F32 ? 4 : 2; }

size_t shared_bytes(const Params& p, TileLayout layout, ElementType type) {
  // Padding (tc_common.h, tc16_common.h): FP32 tiles 4 elements K-contiguous and 8 otherwise, 16-bit tiles 8 (16
  // bytes) either way.
  const bool narrow = type != ElementType::F32;
  const int64_t pad_k = p.smem_padding ? (narrow ? 8 : 4) : 0, pad_rows = p.smem_padding ? 8 : 0;
  const int64_t a = layout.a_kcontig ? p.tile_m * (p.tile_k + pad_k) : p.tile_k * (p.tile_m + pad_rows);
  const int64_t b = layout.b_kcontig ? p.tile_n * (p.tile_k + pad_k) : p.tile_k * (p.tile_n + pad_rows);
  return static_cast<size_t>(p.stages * (a + b) * element_bytes(type));
}

uint64_t shared_limit(const DeviceInfo& device) {
  if (device.backend == BackendKind::Cuda) return std::max(device.local_memory_bytes, device.local_memory_optin_bytes);
  return device.local_memory_bytes;
}

// Calibrated on ptxas's reports for sm_90 (docs/ARCHITECTURE.md): the accumulators, the fragments of two MMA steps
// (the compiler loads the next step's while multiplying; 1.75 times that for 3xTF32, whose residuals are made from
// them), one register a copy (its address) and 24 for indices and loop state. 3xTF32 also keeps a second set of
// accumulators (tc_mainloop.h). Measured on 7 tile setups x 4 problems x 2 modes: every setup this accepts compiled
// without spilling, and every one that spilled (64x64 warp tiles with TILE_K 32, or in 3xTF32) is refused; it
// refuses a few that fit (3xTF32 with 64x32 warp tiles and TILE_K 32).
int64_t register_estimate(const Params& p, MathMode math, ElementType type) {
  const bool split = math == MathMode::TF32x3;
  const int64_t fragments = (p.tile_m / p.warps_m / 16) * 4 + (p.tile_n / p.warps_n / 8) * 2;
  const int64_t copies = (p.tile_m + p.tile_n) * p.tile_k / p.threads();
  if (type != ElementType::F32) {
    // Per k16 step the same fragment registers as a TF32 k8 step; each element a thread copies counted twice: the
    // value staged in a register across the stage's MMAs (tc16_mainloop.h) and its gather's address. Checked against
    // ptxas by tensor_core_nvrtc_test: a 128x128x64 tile of 8 warps (64 copies per thread) counted once estimated
    // 232 registers and spilled 32 bytes on sm_80.
    const int64_t live_steps = std::min<int64_t>(p.tile_k / 16, 2);
    return accumulators(p) + fragments * live_steps + 2 * copies + kRegistersBesideTiles;
  }
  const int64_t live_steps = std::min<int64_t>(p.tile_k / 8, 2);
  return accumulators(p) * (split ? 2 : 1) + fragments * live_steps * (split ? 7 : 4) / 4 + copies +
         kRegistersBesideTiles;
}

bool fits_registers_with_copies(const Params& p, MathMode math, bool scalar_a, bool scalar_b) {
  int64_t scalar = 0;  // floats per thread per stage copied one at a time
  if (scalar_a) scalar += p.tile_m * p.tile_k / p.threads();
  if (scalar_b) scalar += p.tile_n * p.tile_k / p.threads();
  return register_estimate(p, math) + 3 * scalar <= register_cap(p);
}

int64_t register_cap(const Params& p) {
  return std::min(kMaxRegisters, kRegisterFile / (p.threads() * p.blocks_per_sm));
}

std::vector<Constraint> tile_constraints(const ParameterTable<Params>& t, TileLayout layout, MathMode math,
                                         ElementType type) {
  using P = Params;
  using X = ConstraintContext;
  return {
      t.constraint("warp tile rows a multiple of the MMA's 16", {&P::tile_m, &P::warps_m},
                   [](const P& p, const X&) { return p.tile_m % (16 * p.warps_m) == 0; }),
      t.constraint("warp tile columns a multiple of the MMA's 8", {&P::tile_n, &P::warps_n},
                   [](const P& p, const X&) { return p.tile_n % (8 * p.warps_n) == 0; }),
      t.constraint("at least 2 warps per block and threads within the device limit", {&P::warps_m, &P::warps_n},
                   [](const P& p, const X& x) {
                     return p.threads() >= 64 && static_cast<size_t>(p.threads()) <= x.device.max_work_group_size;
                   }),
      t.constraint("at most 128 accumulators per thread", {&P::tile_m, &P::tile_n, &P::warps_m, &P::warps_n},
                   [](const P& p, const X&) { return accumulators(p) <= kMaxAccumulators; }),
      t.constraint("tile elements divide evenly over the threads",
                   {&P::tile_m, &P::tile_n, &P::tile_k, &P::warps_m, &P::warps_n}, [](const P& p, const X&) {
                     return p.tile_m * p.tile_k % p.threads() == 0 && p.tile_n * p.tile_k % p.threads() == 0;
                   }),
      t.constraint("at most 64 copies per thread per stage", {&P::tile_m, &P::tile_n, &P::tile_k, &P::warps_m, &P::warps_n},
                   [](const P& p, const X&) {
                     return (p.tile_m + p.tile_n) * p.tile_k / p.threads() <= kMaxCopiesPerThread;
                   }),
      // ptxas spills what does not fit the cap (launch bounds), and a block needing more than the register file
      // does not launch at all.
      t.constraint("estimated registers within the cap BLOCKS_PER_SM leaves (255 at most)",
                   {&P::tile_m, &P::tile_n, &P::tile_k, &P::warps_m, &P::warps_n, &P::blocks_per_sm},
                   [math, type](const P& p, const X&) { return register_estimate(p, math, type) <= register_cap(p); }),
      t.constraint("shared memory of all stages within the device's per-block limit",
                   {&P::tile_m, &P::tile_n, &P::tile_k, &P::stages, &P::smem_padding},
                   [layout, type](const P& p, const X& x) {
                     return shared_bytes(p, layout, type) <= shared_limit(x.device);
                   }),
  };
}

Params default_tiles(int64_t m, int64_t n, int64_t reduction, ElementType type) {
  auto tile = [](int64_t extent) -> int64_t { return extent >= 96 ? 128 : extent >= 48 ? 64 : 32; };
  Params p;
  p.tile_m = tile(m), p.tile_n = tile(n);
  set_warps(p);
  p.smem_padding = 1, p.blocks_per_sm = 1, p.split_k = 1;
  if (type != ElementType::F32) {
    p.tile_k = reduction >= 32 ? 32 : 16;
    p.stages = 4;
  } else {
    p.tile_k = reduction >= 128 ? 32 : reduction >= 16 ? 16 : 8;
    p.stages = 3;
  }
  return p;
}

Params fit_default(Params start, const std::function<bool(const Params&)>& valid, int64_t min_tile_k) {
  Params p = start;
  while (true) {
    set_warps(p);
    for (p.stages = start.stages; p.stages >= 2; --p.stages)
      for (p.tile_k = start.tile_k; p.tile_k >= min_tile_k; p.tile_k /= 2)
        if (valid(p)) return p;
    p.stages = start.stages, p.tile_k = start.tile_k;
    if (p.tile_m == 32 && p.tile_n == 32) return start;
    p.tile_m = std::max<int64_t>(32, p.tile_m / 2), p.tile_n = std::max<int64_t>(32, p.tile_n / 2);
  }
}

int64_t default_split(int64_t blocks, int64_t reduction, const Params& p, const DeviceInfo& device, int64_t max_split,
                      const std::function<bool(const Params&)>& valid) {
  const int64_t target = 2 * std::max(1, device.compute_units);
  Params q = p;
  int64_t split = 1;
  while (split * 2 <= max_split && blocks * split * 2 <= target && reduction / (split * 2) >= 4 * p.tile_k) {
    q.split_k = split * 2;
    if (!valid(q)) break;
    split *= 2;
  }
  return split;
}

void add_defines(const ParameterTable<Params>& t, const Params& p, MathMode math, std::map<std::string, std::string>& d,
                 ElementType type) {
  t.add_defines(p, d);
  if (emulated()) d["TC_EMULATE"] = "1";
  if (type != ElementType::F32) {
    d["ELEM_BF16"] = type == ElementType::BF16 ? "1" : "0";
    return;
  }
  d["MATH_SPLIT"] = math == MathMode::TF32x3 ? "1" : "0";
}

LaunchGeometry main_geometry(int64_t m, int64_t n, int64_t layers, const Params& p, TileLayout layout, ElementType type) {
  LaunchGeometry g;
  g.dims = 3;
  g.global = {static_cast<size_t>(ceil_div(n, p.tile_n) * p.threads()), static_cast<size_t>(ceil_div(m, p.tile_m)),
              static_cast<size_t>(layers)};
  g.local = {static_cast<size_t>(p.threads()), 1, 1};
  g.dynamic_local_bytes = shared_bytes(p, layout, type);  // CUDA; NVIDIA's OpenCL kernel declares the array itself
  return g;
}

LaunchStep splitk_reduce_step(std::vector<ArgSource> args, int64_t elements, const DeviceInfo& device) {
  const int64_t local = static_cast<int64_t>(std::min<size_t>(256, std::max<size_t>(1, device.max_work_group_size)));
  LaunchStep step;
  step.kernel = "tc_splitk_reduce";
  step.args = std::move(args);
  step.geometry.dims = 1;
  step.geometry.global = {static_cast<size_t>(ceil_div(elements, local) * local), 1, 1};
  step.geometry.local = {static_cast<size_t>(local), 1, 1};
  return step;
}

void add_register_cap(KernelRecipe& recipe, const Params& p, const DeviceInfo& device) {
  if (device.backend == BackendKind::OpenCL && p.blocks_per_sm > 1) {
    recipe.source.options.push_back(fmt::format("-cl-nv-maxrregcount={}", register_cap(p)));
  }
}

}  // namespace convtune::tensor_core
