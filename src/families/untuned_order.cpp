// The untuned order of the kernel families: where no tuning entry or cost model decides, a plan takes the first
// family of this list that computes the problem and is not a poor fit for it (a family's untuned_claim goes ahead).
#include "src/families/untuned_order.h"

namespace convtune {

const std::vector<std::vector<std::string_view>>& untuned_order() {
  static const std::vector<std::vector<std::string_view>> order = {
      // Hopper's wgmma families for the layers each is built for, ahead of implicit_gemm_wgmma. col2im_wgmma:
      // strided backward-data and few input channels, where implicit_gemm_wgmma's phases gather dy through registers
      // and its GEMM has C/groups columns. implicit_gemm_nhwc_wgmma: forward and backward-data (on the H100 its
      // default took 0.43-0.75 of implicit_gemm_wgmma's tuned time in bf16 on every AlexNet, seed and
      // unseen_shapes.txt row but the thin first layers, which its poor-fit rule leaves to implicit_gemm_wgmma).
      // wgrad_nhwc_wgmma: channels-last 16-bit backward-filter, read in place; implicit_gemm_shifted_wgmma: the
      // other backward-filter layers (NCHW, tf32, channel counts off 8), through copies of x and dy.
      {"col2im_wgmma", "implicit_gemm_nhwc_wgmma", "wgrad_nhwc_wgmma", "implicit_gemm_shifted_wgmma"},
      {"implicit_gemm_wgmma"},
      // The other wgmma families before the mma.sync tensor-core families, where they apply.
      {"gemm_wgmma", "im2col_wgmma"},
      {"gemm_tc", "implicit_gemm_tc"},
      {"gemm", "implicit_gemm"},
      // Channels-last depthwise layers are depthwise_nhwc's, which reads them in place; then depthwise, to which the
      // other families leave depthwise layers (leave_to_depthwise).
      {"depthwise_nhwc"},
      {"depthwise"},
      {"direct_tiled"},
      {"im2col_gemm"},
      // Before cpu_blocked: on depthwise layers cpu_blocked's blocks tile the one channel of a group.
      {"cpu_depthwise"},
      // The FFT families before winograd and winograd_tc, so that their claims go first where both claim a layer:
      // fft_wgmma's (3xtf32) before fft_tc's, fft's (5x5 and larger filters on GPUs) before winograd's.
      {"fft_wgmma"},
      {"fft"},
      {"fft_tc"},
      // cpu_blocked before cpu_direct and cpu_reference, with no poor fit: untuned, it runs faster than cpu_direct on
      // every layer measured, every direction, on one thread and two, tiny and depthwise layers included.
      {"cpu_blocked", "winograd"},
      {"winograd_tc"},
      {"cpu_direct", "cpu_gemm"},
      {"cpu_reference"},
      // The widened families (16-bit tensors through an FP32 family) after every family that computes 16-bit
      // tensors itself, in the order of the families they widen.
      {"widened_implicit_gemm", "widened_gemm"},
      {"widened_depthwise"},
      {"widened_direct_tiled"},
      {"widened_im2col_gemm"},
      {"widened_fft"},
      {"widened_fft_tc"},
      {"widened_winograd", "widened_cpu_blocked"},
      {"widened_winograd_tc"},
      {"widened_cpu_direct", "widened_cpu_gemm"},
  };
  return order;
}

int untuned_rank(std::string_view family) {
  const auto& order = untuned_order();
  for (size_t line = 0; line < order.size(); ++line) {
    for (std::string_view name : order[line])
      if (name == family) return static_cast<int>(line);
  }
  return static_cast<int>(order.size());
}

size_t untuned_position(std::string_view family) {
  size_t position = 0;
  for (const auto& line : untuned_order()) {
    for (std::string_view name : line) {
      if (name == family) return position;
      ++position;
    }
  }
  return position;
}

}  // namespace convtune
