// The col2im_wgmma family: backward-data convolutions as a GEMM into FP32 columns on Hopper's warpgroup MMA, dy
// channels-last times the filters with both operands by 16-byte cp.async, then a gather of the columns into dx
// (kernels/tensor_core/col2im_wgmma.cu), in chunks of IMAGES images. For strided layers and layers of few input
// channels: every product is computed once, where a masked implicit GEMM multiplies zeros at all but one in
// stride x stride taps and a GEMM of C/groups columns (alex1's 3) is mostly empty. BF16/FP16 tensors and FP32 in
// tf32 or 3xtf32 math (the copies split each FP32 element into TF32 big part and residual). CUDA on compute
// capability 9.0. Channels-last problems copy from and gather into their own layout.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "convtune/plan.h"
#include "src/families/depthwise/depthwise_layer.h"
#include "src/families/families.h"
#include "src/families/gemm_wgmma/wgmma_tiles.h"

namespace convtune {

namespace {

// The wgmma tiles (SPLIT_K unused: the reduction is K/groups) and the images of one chunk.
struct Params : wgmma::Params {
  int64_t images = 0;
};

const ParameterTable<Params>& table() {
  using P = Params;
  static const ParameterTable<Params> t({
      {"WG_M", &P::wg_m, {2, 1}, "warpgroups along M: block tiles of 64 x WG_M dy pixels, 128 x WG_M threads"},
      {"BLOCK_N", &P::block_n, {128, 256, 64}, "block tile columns (c,r,s): one m64nBLOCK_N wgmma per warpgroup"},
      {"STAGES", &P::stages, {3, 4}, "shared-memory stages (the reduction is K/groups: a few 128-byte tiles)"},
      {"IMAGES", &P::images, {16, 8, 32, 4, 64, 128, 2, 1},
       "images per chunk: the FP32 columns of IMAGES x P x Q dy pixels are written, then gathered into dx"},
  });
  return t;
}

using wgmma::aligned;
using wgmma::ceil_div;
using wgmma::round_up;

constexpr int64_t kMaxChunks = 256;   // each chunk is two launches
constexpr int64_t kMaxImages = 128;   // IMAGES' largest candidate

// The fewest images per chunk (a power of two, as IMAGES' candidates) that keeps the batch within kMaxChunks chunks.
int64_t min_images(const ConvProblem& pb) {
  int64_t images = 1;
  while ((pb.n + images - 1) / images > kMaxChunks) images *= 2;
  return images;
}

// 3xTF32: FP32 tensors whose copies hold TF32 big parts and residuals (the kernel's SPLIT3).
bool split3(const ConvProblem& pb) { return pb.type == ElementType::F32 && pb.math == MathMode::TF32x3; }

// The GEMM per group (rows N*P*Q in chunks, columns C/groups*R*S, reduction KP) and the workspace. In 3xTF32 the
// copies of dy and the filters are followed by their residuals' copies (lo_bytes() later).
struct Shape {
  int64_t cols = 0;
  int64_t kp = 0;          // K/groups padded to a whole 16-byte chunk
  int64_t images = 0;      // per chunk (at most N)
  int64_t chunk_rows = 0;  // images x P x Q
  bool split = false;
  uint64_t dy_bytes = 0, w_bytes = 0, col_bytes = 0;
  uint64_t lo_bytes() const { return split ? dy_bytes + w_bytes : 0; }
  uint64_t workspace() const { return dy_bytes + w_bytes + lo_bytes() + col_bytes; }
};

Shape shape(const ConvProblem& pb, int64_t images) {
  Shape s;
  s.split = split3(pb);
  const int64_t eb = wgmma::element_bytes(pb.type);
  s.cols = pb.c_per_group() * pb.r * pb.s;
  s.kp = round_up(pb.k_per_group(), wgmma::chunk_elements(pb.type));
  s.images = std::clamp<int64_t>(images, 1, pb.n);
  s.chunk_rows = s.images * pb.p() * pb.q();
  s.dy_bytes = aligned(static_cast<uint64_t>(pb.n * pb.p() * pb.q() * pb.groups * s.kp * eb));
  s.w_bytes = aligned(static_cast<uint64_t>(pb.groups * s.cols * s.kp * eb));
  s.col_bytes = aligned(static_cast<uint64_t>(pb.groups * s.cols * s.chunk_rows * 4));
  return s;
}

// The stages' shared memory: both halves of each stage in 3xTF32.
size_t shared_bytes(const ConvProblem& pb, const Params& p) {
  return wgmma::shared_bytes(p) + (split3(pb) ? wgmma::shared_bytes(p) - 1024 : 0);
}

class Col2imWgmmaFamily final : public KernelFamily {
 public:
  std::string name() const override { return "col2im_wgmma"; }
  std::string description() const override {
    return "backward-data as a GEMM into FP32 columns on Hopper's warpgroup MMA (wgmma, sm_90a), dy channels-last "
           "times the filters by cp.async, then a gather into dx, in chunks of images: every product once, for "
           "strided layers and few input channels; BF16/FP16 tensors and FP32 in tf32 or 3xtf32 math";
  }
  Problem::Kind problem_kind() const override { return Problem::Kind::Convolution; }
  bool uses_tensor_cores() const override { return true; }
  bool computes_nhwc() const override { return true; }

  std::string unsupported_reason(const Problem& generic, const Epilogue& epilogue,
                                 const DeviceInfo& device) const override {
    if (std::string why = wgmma::conv_unsupported_reason(name(), generic, epilogue, device, /*split_tf32=*/true);
        !why.empty())
      return why;
    const ConvProblem& pb = generic.conv();
    if (pb.direction != Direction::BackwardData)
      return fmt::format("computes backward-data, not {}", to_string(pb.direction));
    if (min_images(pb) > kMaxImages)
      return fmt::format("N={} needs more than {} chunks of at most {} images", pb.n, kMaxChunks, kMaxImages);
    const Shape fewest = shape(pb, min_images(pb));
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    if (pb.n * pb.p() * pb.q() * pb.groups * fewest.kp > kMax || pb.groups * fewest.cols * fewest.chunk_rows > kMax)
      return "dy's channels-last copy or one chunk's columns exceed 2^31-1 elements (32-bit indexing)";
    if (fewest.workspace() > workspace_limit(device)) {
      return fmt::format("{} needs {} bytes of workspace for its smallest chunk of {} images (dy channels-last, the "
                         "filters, the FP32 columns), over the limit of {} bytes",
                         name(), fewest.workspace(), fewest.images, workspace_limit(device));
    }
    if (ceil_div(pb.p() * pb.q(), 32) > wgmma::kMaxGridAxis || pb.n > wgmma::kMaxGridAxis)
      return fmt::format("N={} or {} dy pixels exceed the grid limits of the channels-last copy", pb.n,
                         pb.p() * pb.q());
    return {};
  }

  std::string untuned_poor_fit(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    // The GEMM has C/groups*R*S columns: few input channels fill it (wgmma::conv_poor_fit's C/groups does not apply).
    if (std::string why = depthwise::leave_to_depthwise(pb); !why.empty()) return why;
    if (pb.stride.h == 1 && pb.stride.w == 1)
      return "unit stride: implicit_gemm_nhwc_wgmma computes each product once without the columns' round trip "
             "through memory";
    return {};
  }

  // Strided layers of few input channels: the other families' GEMMs have C/groups columns, a first layer's 3. On the
  // H100 alex1, u7 and n1_stem ran 0.10-0.76 of cuDNN's time in bf16 and tf32, where the plans without this family
  // ran alex1 and u7 at 0.85-1.76; with 32 and 128 channels (yolo_s2, r50_s2) this family read 1.2-1.7 and
  // implicit_gemm_wgmma's phases 1.0-1.6, so it claims no more.
  std::string untuned_claim(const Problem& generic, const DeviceInfo&) const override {
    const ConvProblem& pb = generic.conv();
    if (pb.direction != Direction::BackwardData || (pb.stride.h == 1 && pb.stride.w == 1) || pb.c_per_group() >= 8)
      return {};
    return fmt::format("strided backward-data of {} input channels per group: every product once in a GEMM of "
                       "C/groups*R*S = {} columns",
                       pb.c_per_group(), pb.c_per_group() * pb.r * pb.s);
  }

  std::vector<Parameter> parameters(const Problem&) const override { return table().parameters(); }

  std::vector<Constraint> constraints(const Problem& problem) const override {
    using X = ConstraintContext;
    using P = Params;
    const ConvProblem pb = problem.conv();
    const ParameterTable<Params>& t = table();
    std::vector<Constraint> list = wgmma::tile_constraints(t);
    list.insert(list.end(), {
        // Past the batch a larger chunk is the same chunk: one candidate stands for all.
        t.constraint("IMAGES at most the batch rounded up to a power of two", {&P::images},
                     [pb](const P& p, const X&) { return p.images < 2 * pb.n; }),
        t.constraint("at most 256 chunks (two launches each)", {&P::images},
                     [pb](const P& p, const X&) { return ceil_div(pb.n, p.images) <= kMaxChunks; }),
        t.constraint("M-tiles of a chunk within the CUDA grid limit", {&P::wg_m, &P::images},
                     [pb](const P& p, const X&) {
                       return ceil_div(shape(pb, p.images).chunk_rows, p.block_m()) <= wgmma::kMaxGridAxis;
                     }),
        t.constraint("workspace within the limit", {&P::images}, [pb](const P& p, const X& x) {
          return shape(pb, p.images).workspace() <= workspace_limit(x.device);
        }),
    });
    if (split3(pb)) {
      // A tile's partial sums beside the accumulators: 2 x 64 registers a thread at BLOCK_N 128; and the residuals'
      // half of every stage.
      list.push_back(t.constraint("3xtf32: BLOCK_N at most 128 (the accumulators and a tile's partial sums in registers)",
                                  {&P::block_n}, [](const P& p, const X&) { return p.block_n <= 128; }));
      list.push_back(t.constraint("3xtf32: both halves of all stages within the device's opt-in shared memory",
                                  {&P::wg_m, &P::block_n, &P::stages}, [pb](const P& p, const X& x) {
                                    return shared_bytes(pb, p) <= std::max(x.device.local_memory_bytes,
                                                                           x.device.local_memory_optin_bytes);
                                  }));
    }
    return list;
  }

  Config default_config(const Problem& problem, const DeviceInfo& device) const override {
    const ConvProblem& pb = problem.conv();
    const Shape one = shape(pb, 1);
    Params p;
    static_cast<wgmma::Params&>(p) = wgmma::default_tiles(pb.n * pb.p() * pb.q(), one.cols);
    p.stages = 3;
    if (split3(pb)) p.block_n = std::min<int64_t>(p.block_n, 128);
    // Chunks of columns up to 128 MiB (the gather reads them back soon after they are written), but never more than
    // kMaxChunks of them; smaller where the workspace limit asks.
    const uint64_t per_image = one.col_bytes;
    const int64_t fewest = min_images(pb);
    p.images = fewest;
    while (p.images * 2 < 2 * pb.n && p.images < kMaxImages &&
           per_image * static_cast<uint64_t>(p.images * 2) <= (uint64_t{128} << 20))
      p.images *= 2;
    auto valid = [&](const Params& q) { return config_problem(*this, table().write(q), problem, device).empty(); };
    while (!valid(p) && p.images > fewest) p.images /= 2;
    return table().write(p);
  }

  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config,
                      const DeviceInfo&) const override {
    const ConvProblem& pb = problem.conv();
    const Params p = table().read(config);
    const Shape s = shape(pb, p.images);
    KernelRecipe recipe;
    recipe.source.file = "tensor_core/col2im_wgmma.cu";
    recipe.source.defines = problem_defines(pb);
    recipe.source.defines["KP"] = std::to_string(s.kp);
    recipe.source.defines["CHUNK_ROWS"] = std::to_string(s.chunk_rows);
    recipe.source.defines["WS_DY"] = "0";
    recipe.source.defines["WS_W"] = std::to_string(s.dy_bytes);
    recipe.source.defines["WS_COL"] = std::to_string(s.dy_bytes + s.w_bytes);
    if (pb.layout == Layout::NHWC) recipe.source.defines["LAYOUT_NHWC"] = "1";  // NCHW keeps its defines
    if (s.split) {
      recipe.source.defines["SPLIT3"] = "1";
      recipe.source.defines["WS_LO_SHIFT"] = std::to_string(s.lo_bytes() / 4);  // in FP32 elements
      recipe.source.defines["WS_COL"] = std::to_string(s.dy_bytes + s.w_bytes + s.lo_bytes());
    }
    table().add_defines(p, recipe.source.defines);
    recipe.source.defines["ELEM"] = pb.type == ElementType::BF16 ? "0" : pb.type == ElementType::F16 ? "1" : "2";
    recipe.source.options.push_back("--gpu-architecture=sm_90a");
    recipe.workspace_bytes = s.workspace();

    constexpr int dx = 0, w = 1, dy = 2;
    const auto value = [](int64_t v) { return ArgSource::fixed(static_cast<int32_t>(v)); };
    LaunchStep copy{"col2im_wgmma_dy", {ArgSource::of_operand(dy), ArgSource::workspace()}, {}};
    copy.geometry.dims = 3;
    copy.geometry.global = {static_cast<size_t>(ceil_div(pb.groups * s.kp, 32) * 32),
                            static_cast<size_t>(ceil_div(pb.p() * pb.q(), 32) * 8), static_cast<size_t>(pb.n)};
    copy.geometry.local = {32, 8, 1};
    recipe.steps.push_back(std::move(copy));
    recipe.steps.push_back(wgmma::elementwise_step("col2im_wgmma_weights",
                                                   {ArgSource::of_operand(w), ArgSource::workspace()},
                                                   pb.groups * s.cols * s.kp));
    for (int64_t n0 = 0; n0 < pb.n; n0 += s.images) {
      const int64_t images = std::min(s.images, pb.n - n0), rows = images * pb.p() * pb.q();
      LaunchStep gemm;
      gemm.kernel = "col2im_wgmma_gemm";
      gemm.geometry = wgmma::main_geometry(rows, s.cols, pb.groups, p);
      gemm.geometry.dynamic_local_bytes = shared_bytes(pb, p);
      gemm.args = {ArgSource::workspace(), value(n0 * pb.p() * pb.q()), value(rows)};
      recipe.steps.push_back(std::move(gemm));
      recipe.steps.push_back(wgmma::elementwise_step(
          "col2im_wgmma_gather", {ArgSource::workspace(), ArgSource::of_operand(dx), value(n0), value(images)},
          images * pb.c * pb.h * pb.w));
    }
    return recipe;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_col2im_wgmma() { return std::make_unique<Col2imWgmmaFamily>(); }

}  // namespace convtune
