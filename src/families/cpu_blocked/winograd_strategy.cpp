// Winograd F(4x4, 3x3) for 3x3 filters at stride 1 and dilation 1, all three directions (ALGO 1): tiles of 4x4
// outputs from 6x6 input patches, so the 36 element-wise products of the transformed domain become 36 GEMMs over
// channels with 2.25x fewer multiplications than the direct convolution (4x at whole tiles). Forward and
// backward-data (a forward pass over dy with the filter transposed and flipped, padding 2 - pad):
//   V = B^T d B per input tile, U = G g G^T per filter, M[xi] = V[xi] U[xi], y = A^T M A;
// backward-filter (the same identity differentiated): Z = A dy A^T per gradient tile, dU[xi] = sum over tiles of
// V[xi] Z[xi], dW = G^T dU G. Transforms run on channel-blocked copies, a vector of channels at a time; the GEMMs
// are the broadcast micro-kernel with vectors over output channels (VECS x COLS blocks). Forward and backward-data
// run either in three phases over the whole batch (V and M written to memory between them) or fused (ROW_BLOCK
// tile rows at a time per thread: input transform, 36 GEMMs and output transform while the block's V and M are
// in L2, U streamed from L3 or memory).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "convtune/error.h"
#include "src/families/cpu_blocked/plan.h"

namespace convtune::cpu_blocked::detail {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

constexpr int64_t kXi = 36;  // elements of the 6 x 6 transformed domain

class WinogradStrategy final : public Strategy {
 public:
  WinogradStrategy(const ConvProblem& pb, const Choice& choice, const KernelTable& kt)
      : pb_(pb), kt_(kt), lanes_(kt.lanes), nv_(choice.vecs), nj_(choice.cols) {
    filter_ = pb.direction == Direction::BackwardFilter;
    // Channels the transformed input has (ic) and the GEMM's vectors run over (oc): forward and backward-data read
    // ic and write oc; backward-filter reads x (ic) and dy (oc = output channels k).
    ic_ = pb.direction == Direction::BackwardData ? pb.k_per_group() : pb.c_per_group();
    oc_ = pb.direction == Direction::BackwardData ? pb.c_per_group() : pb.k_per_group();
    // The tiled (output) extent and the transformed input: forward tiles y (P x Q) over x; backward-data tiles dx
    // (H x W) over dy padded by 2 - pad; backward-filter tiles dy (P x Q) over x.
    out_rows_ = pb.direction == Direction::BackwardData ? pb.h : pb.p();
    out_cols_ = pb.direction == Direction::BackwardData ? pb.w : pb.q();
    src_rows_ = pb.direction == Direction::BackwardData ? pb.p() : pb.h;
    src_cols_ = pb.direction == Direction::BackwardData ? pb.q() : pb.w;
    pad_h_ = pb.direction == Direction::BackwardData ? 2 - pb.pad.h : pb.pad.h;
    pad_w_ = pb.direction == Direction::BackwardData ? 2 - pb.pad.w : pb.pad.w;
    tiles_h_ = (out_rows_ + 3) / 4;
    tiles_w_ = (out_cols_ + 3) / 4;
    tiles_ = pb.n * tiles_h_ * tiles_w_;
    // Forward and backward-data: tiles in blocks of tb_ (the GEMM's block width). M is laid out [tile block][xi]
    // [tile][channel], so one tile's 36 vectors lie within one block's slab rather than 36 places a whole tensor
    // apart, and V [tile][xi][channel], so a tile's 36 transformed vectors (all its channels) are one contiguous
    // run of 36 x icp floats: the input transform's streaming stores then fill one region per tile instead of 36
    // lines tb_ x icp floats apart, and the GEMM reads its panel's tiles 36 x icp floats apart (one thread: alex3
    // backward-data 13.4-13.6 -> 12.9 ms, alex4 forward 17.1-17.2 -> 16.5-16.6; the other rows level or a little
    // faster). Streaming stores to many lines far apart measured 13 GB/s on this machine's one core, to a few
    // streams 23 GB/s.
    tb_ = filter_ ? 1 : nj_;
    tile_blocks_ = (tiles_ + tb_ - 1) / tb_;
    // Fused (forward and backward-data with ROW_BLOCK): blocks of ROW_BLOCK tile rows (counted across images).
    fused_ = !filter_ && choice.row_block > 0;
    if (fused_) {
      fused_tiles_ = std::min(tiles_, choice.row_block * tiles_w_);
      fused_blocks_ = (tiles_ + fused_tiles_ - 1) / fused_tiles_;
    }
    icp_ = (ic_ + lanes_ - 1) / lanes_ * lanes_;
    ocp_ = (oc_ + lanes_ - 1) / lanes_ * lanes_;
    nv_ = static_cast<int>(std::min<int64_t>(nv_, ocp_ / lanes_));
    block_ = int64_t{nv_} * lanes_;
    oc_blocks_ = (oc_ + block_ - 1) / block_;
    in_layout_ = {pb.n * pb.groups, ic_, src_rows_, src_cols_, pad_h_, pad_w_,
                  std::max(4 * tiles_h_ + 2, src_rows_ + pad_h_), std::max(4 * tiles_w_ + 2, src_cols_ + pad_w_),
                  lanes_};
    if (filter_) dy_layout_ = {pb.n * pb.groups, oc_, pb.p(), pb.q(), 0, 0, 4 * tiles_h_, 4 * tiles_w_, lanes_};
    threads_ = threads_for(pb);
    // The channel-blocked copies made an image at a time, by the thread about to transform that image's tiles, into
    // a buffer of its own that stays in L2 (as the direct form's LAYOUT 2), where every thread has images of its
    // own: a copy of the whole tensor up front writes it to memory and the transforms read it back.
    per_image_ = pb.n >= 2 * static_cast<int64_t>(threads_) &&
                 4 * std::max(image_floats(in_layout_), filter_ ? image_floats(dy_layout_) : 0) <= half_l2();
    // Decided once, with the caches' sizes as the plan is made: carve() lays out the same buffers at every run.
    stage_outputs_ = !filter_ && !fused_ && 4 * output_item_floats() <= half_l2();
    Carver size(nullptr);
    carve(size);
    workspace_ = size.used();
  }

  size_t workspace_bytes() const override { return workspace_; }
  // U[group][xi][oc block][ic (padded)][block] for forward and backward-data.
  size_t packed_weight_floats() const override {
    return filter_ ? 0 : static_cast<size_t>(pb_.groups * kXi * oc_blocks_ * icp_ * block_);
  }

  // U's panel (group g, xi, oc block ob): icp x block floats. Three phases: [g][xi][ob], so one xi's panels are
  // adjacent; fused: [g][ob][xi], the order a block's GEMMs read them in, so U streams through in one run per block.
  int64_t u_offset(int64_t g, int64_t xi, int64_t ob) const {
    const int64_t panel = fused_ ? (g * oc_blocks_ + ob) * kXi + xi : (g * kXi + xi) * oc_blocks_ + ob;
    return panel * icp_ * block_;
  }

  void pack_weights(const float* w, float* packed) const override {
    const int64_t rs = 9;
    const bool data = pb_.direction == Direction::BackwardData;
    // Zero only what nothing else writes: input channels past ic (each oc block's rows ic..icp) and output
    // channels past oc (lanes of the last block).
    for (int64_t g = 0; g < pb_.groups; ++g)
      for (int64_t xi = 0; xi < kXi; ++xi)
        for (int64_t ob = 0; ob < oc_blocks_; ++ob) {
          float* base = packed + u_offset(g, xi, ob);
          std::fill(base + ic_ * block_, base + icp_ * block_, 0.0f);
          if (ob == oc_blocks_ - 1 && oc_blocks_ * block_ > oc_) {
            const int64_t used = oc_ - (oc_blocks_ - 1) * block_;
            for (int64_t i = 0; i < ic_; ++i) std::fill(base + i * block_ + used, base + (i + 1) * block_, 0.0f);
          }
        }
    // One item per (group, oc vector): gather a vector of output channels' 3 x 3 filters, transform, scatter the
    // 36 vectors into the oc block's slab.
    const int64_t oc_vectors = ocp_ / lanes_;
    parallel_items(pb_.groups * oc_vectors, threads_, [&](int64_t item, unsigned) {
      const int64_t g = item / oc_vectors, o0 = (item % oc_vectors) * lanes_;
      const int64_t count = std::min(lanes_, oc_ - o0);
      std::vector<float> taps(static_cast<size_t>(9 * lanes_), 0.0f), u(static_cast<size_t>(kXi * lanes_));
      const int64_t ob = o0 / block_, lane0 = o0 % block_;
      for (int64_t i = 0; i < ic_; ++i) {
        // Filter (o, i)'s tap (kh, kw); backward-data reads w[i][o] flipped.
        for (int64_t t = 0; t < 9; ++t) {
          const int64_t src_t = data ? 8 - t : t;
          const float* base = data ? w + ((g * ic_ + i) * oc_ + o0) * rs + src_t : w + ((g * oc_ + o0) * ic_ + i) * rs + src_t;
          const int64_t stride = data ? rs : ic_ * rs;
          kt_.gather(base, stride, count, taps.data() + t * lanes_);
        }
        kt_.winograd.weights(taps.data(), u.data(), lanes_);
        for (int64_t xi = 0; xi < kXi; ++xi) {
          float* dst = packed + u_offset(g, xi, ob) + i * block_ + lane0;
          std::copy(u.data() + xi * lanes_, u.data() + xi * lanes_ + count, dst);
        }
      }
    });
  }

  void run(float* x, const float* packed, float* w, float* y, void* workspace, StageTimes& times) override {
    Carver carver(workspace);
    const Buffers b = carve(carver);
    auto start = Clock::now();
    const float* src = pb_.direction == Direction::BackwardData ? y : x;
    if (!per_image_) {
      copy_channel_blocked(in_layout_, src, b.in, kt_, threads_);
      if (filter_) copy_channel_blocked(dy_layout_, y, b.dy, kt_, threads_);
    }
    times.input_ms = ms_since(start);
    double transforms_ms = 0;
    start = Clock::now();
    if (fused_) {
      // The transforms run inside the blocks: all of it counts as compute.
      for (int64_t g = 0; g < pb_.groups; ++g)
        fused(src, b, packed + u_offset(g, 0, 0), g, pb_.direction == Direction::BackwardData ? x : y);
      times.compute_ms = ms_since(start);
      return;
    }
    for (int64_t g = 0; g < pb_.groups; ++g) {
      auto t0 = Clock::now();
      transform_input(src, b.in, g, b.v);
      if (filter_) transform_dy(y, b.dy, g, b.m);
      transforms_ms += ms_since(t0);
      if (filter_) {
        gemm_filter(b.v, b.m, b.du);
        t0 = Clock::now();
        filter_gradient(b.du, g, w, b.stage);
        transforms_ms += ms_since(t0);
      } else {
        gemm_forward(b.v, packed + g * kXi * oc_blocks_ * icp_ * block_, b.m);
        t0 = Clock::now();
        transform_output(b.m, g, pb_.direction == Direction::BackwardData ? x : y, b.out_stage);
        transforms_ms += ms_since(t0);
      }
    }
    // The transforms count as edge work beside the copies: compute is the GEMMs.
    times.compute_ms = ms_since(start) - transforms_ms;
    times.output_ms = transforms_ms;
  }

  // The 36 products per tile and channel pair (2 FLOPs each, over the padded channel counts the GEMMs run) plus
  // the tile transforms at the operation counts of microkernels.cpp (a fused multiply-add counts 2, an add,
  // subtract, multiply or negation 1; a 2-D transform is In + Out 1-D ones): input 12 x 19, output 10 x 13, dy
  // 10 x 11 per tile and channel, the filter gradient's 9 x 15 per channel pair. The weight transform is left
  // out: it runs when the weights change, not per run.
  double performed_flops(const ConvProblem&) const override {
    const double groups = static_cast<double>(pb_.groups), tiles = static_cast<double>(tiles_);
    const double ic = static_cast<double>(ic_), icp = static_cast<double>(icp_);
    const double ocb = static_cast<double>(oc_blocks_ * block_), ocp = static_cast<double>(ocp_);
    double per_group = 2.0 * kXi * tiles * icp * ocb + 12.0 * 19 * tiles * icp;
    per_group += filter_ ? 10.0 * 11 * tiles * ocp + 9.0 * 15 * ic * ocp : 10.0 * 13 * tiles * ocp;
    return groups * per_group;
  }

  std::string describe() const override {
    return fmt::format("Winograd F(4x4, 3x3), {} tiles, GEMM block {}x{} (output channels x tiles{}){}{}", tiles_, nv_,
                       nj_, filter_ ? ", filter gradient: output channels x input channels" : "",
                       per_image_ ? ", inputs copied per image by each thread" : "",
                       fused_ ? fmt::format(", fused in blocks of {} tiles", fused_tiles_) : "");
  }

 private:
  struct Buffers {
    float* in = nullptr;  // channel-blocked padded input (x, or dy for backward-data)
    float* dy = nullptr;  // backward-filter: channel-blocked dy
    float* v = nullptr;   // V[tile][xi][ic]; backward-filter: V[xi][ic vector][tile][lanes]
    float* m = nullptr;   // M[tile block][xi][tile][oc]; backward-filter: Z[xi][oc block][tile][block]
    float* du = nullptr;  // backward-filter: dU[ic][xi][oc]
    float* stage = nullptr;  // backward-filter: per thread, the filter transform's staged block
    float* vb = nullptr;  // fused: per thread, a block's V [xi][ic vector][tile][lanes]
    float* mb = nullptr;  // fused: per thread, a block's M for one oc block [xi][tile][block]
    float* out_stage = nullptr;  // three-phase forward / backward-data: per thread, an item's outputs (NCHW)
  };

  Buffers carve(Carver& c) const {
    Buffers b;
    // Per image: one image's copy per thread.
    const auto copy_floats = [&](const ChannelBlocking& l) {
      return static_cast<size_t>(per_image_ ? int64_t{threads_} * image_floats(l) : l.floats());
    };
    b.in = c.floats(copy_floats(in_layout_));
    if (fused_) {
      b.vb = c.floats(static_cast<size_t>(int64_t{threads_} * fused_v_floats()));
      b.mb = c.floats(static_cast<size_t>(int64_t{threads_} * fused_m_floats()));
      return b;
    }
    if (stage_outputs()) b.out_stage = c.floats(static_cast<size_t>(int64_t{threads_} * output_item_floats()));
    if (filter_) b.dy = c.floats(copy_floats(dy_layout_));
    // Slack of a register block's width: a block's last vectors may read past the last tile's channels (lanes
    // that are never stored).
    const int64_t slack = int64_t{kMaxNv} * lanes_;
    b.v = c.floats(static_cast<size_t>(tiles_ * kXi * icp_ + slack));
    b.m = c.floats(static_cast<size_t>((filter_ ? tiles_ * oc_blocks_ * block_ : tile_blocks_ * tb_ * ocp_) * kXi + slack));
    if (filter_) b.du = c.floats(static_cast<size_t>(icp_ * ocp_ * kXi + int64_t{kMaxNv} * lanes_ * kXi));
    if (filter_) b.stage = c.floats(static_cast<size_t>(int64_t{threads_} * filter_stage_floats()));
    return b;
  }

  // Floats from a [tile block][xi][tile][channels] tensor's start to tile t's element xi = 0, and between xi.
  int64_t tile_offset(int64_t t, int64_t channels) const { return ((t / tb_) * kXi * tb_ + t % tb_) * channels; }
  int64_t xi_stride(int64_t channels) const { return tb_ * channels; }

  // Backward-filter's V: [xi][channel vector][tile][lanes], so the filter GEMM's broadcast operand (a row of
  // channels per tile, the reduction running over tiles) is one contiguous stream per (xi, channel vector). The
  // transform's 36 outputs per tile go to 36 streams far apart, each a whole cache line (a vector) written with a
  // streaming store, so no line is read for ownership.
  int64_t v_filter_offset(int64_t t, int64_t xi, int64_t cv) const {
    return ((xi * (icp_ / lanes_) + cv) * tiles_ + t) * lanes_;
  }

  // Floats of one (image, group)'s channel-blocked copy.
  static int64_t image_floats(const ChannelBlocking& l) { return l.blocks() * l.out_rows * l.out_cols * l.block; }


  // Runs body(t0, t1, image_copy, ahead) for runs [t0, t1) of up to `run` consecutive tiles of one image, covering every
  // tile of group g, image_copy pointing at the first channel block of the run's (image, group) in a
  // channel-blocked copy of `l`: the whole copy, made up front by run() (one work item per run), or, per image,
  // this thread's copy of the image, made here right before its tiles (one item per image).
  template <class Body>
  void for_tiles(const float* src, float* copy, const ChannelBlocking& l, int64_t g, int64_t run,
                 const Body& body) const {
    const int64_t per_image = tiles_h_ * tiles_w_, runs = (per_image + run - 1) / run;
    if (!per_image_) {
      parallel_items(pb_.n * runs, threads_, [&](int64_t item, unsigned) {
        const int64_t n = item / runs, t0 = n * per_image + item % runs * run;
        RunsPrefetch none;
        body(t0, std::min(t0 + run, (n + 1) * per_image), copy + (n * pb_.groups + g) * image_floats(l), none);
      });
      return;
    }
    // Threads take contiguous shares of the images, so a thread's next image is usually n + 1: its NCHW source
    // is prefetched into L2 while this image's tiles are transformed, a few lines per tile transform
    // (RunsPrefetch), instead of its copy waiting on 16 short plane streams from L3 or memory.
    const int64_t source = l.per_group * l.rows * l.cols;
    const int64_t calls = per_image * l.blocks();  // tile transforms per image (a vector of channels each)
    parallel_shares(pb_.n, threads_, [&](int64_t n, unsigned thread) {
      float* mine = copy + int64_t{thread} * image_floats(l);
      const int64_t blocks = l.blocks(), plane = l.out_rows * l.out_cols * l.block;
      for (int64_t cb = 0; cb < blocks; ++cb)
        copy_channel_block(l, src, (n * pb_.groups + g) * blocks + cb, mine + cb * plane, kt_);
      RunsPrefetch ahead;
      if (n + 1 < pb_.n) {
        ahead.base = src + ((n + 1) * pb_.groups + g) * source;
        ahead.runs = 1, ahead.floats = source;
        ahead.lines_per_call = ceil_div(ceil_div(source, calls), 16);
      }
      for (int64_t t0 = n * per_image; t0 < (n + 1) * per_image; t0 += run)
        body(t0, std::min(t0 + run, (n + 1) * per_image), mine, ahead);
    });
  }

  // Tile t's first element in its image's channel-blocked copy (`image`: the image's first channel block), for
  // channel block cb of a copy with `rows` x `cols` planes: tiles run (image, tile row, tile column), 4 pixels apart.
  const float* tile_source(const float* image, int64_t t, int64_t cb, int64_t rows, int64_t cols) const {
    Digits digits(t);
    const int64_t tw = digits.next(tiles_w_), th = digits.next(tiles_h_);
    return image + (cb * rows * cols + 4 * th * cols + 4 * tw) * lanes_;
  }

  // Vectors staged per destination run: 256 bytes (4 lines of AVX-512 vectors), and the staging buffer's floats
  // (36 runs of up to 4 tiles x an output-channel block of 4 AVX-512 vectors).
  int64_t stage_vectors() const { return std::max<int64_t>(1, 64 / lanes_); }
  static constexpr int64_t kStageFloats = kXi * 256;

  // Forward and backward-data: a tile's channel blocks in groups of stage_vectors(), transformed into a staging
  // buffer [xi][block in group][lanes] and streamed out as one run per xi (V[tile][xi][channel]). Backward-filter:
  // groups of consecutive tiles (V[xi][channel vector][tile][lanes]), one run per xi.
  void transform_input(const float* src, float* in, int64_t g, float* v) const {
    const int64_t blocks = icp_ / lanes_, group = stage_vectors();
    const int64_t row = in_layout_.out_cols * lanes_, rows = in_layout_.out_rows, cols = in_layout_.out_cols;
    for_tiles(src, in, in_layout_, g, filter_ ? group : 1, [&](int64_t t0, int64_t t1, const float* image, RunsPrefetch& ahead) {
      alignas(64) float stage[kStageFloats];
      if (filter_) {
        const int64_t count = t1 - t0;
        for (int64_t cb = 0; cb < blocks; ++cb) {
          for (int64_t t = t0; t < t1; ++t) {
            ahead.advance();
            kt_.winograd.input(tile_source(image, t, cb, rows, cols), row, lanes_, stage + (t - t0) * lanes_,
                               count * lanes_);
          }
          for (int64_t xi = 0; xi < kXi; ++xi)
            kt_.stream_run(stage + xi * count * lanes_, v + v_filter_offset(t0, xi, cb), count * lanes_);
        }
        return;
      }
      for (int64_t cb0 = 0; cb0 < blocks; cb0 += group) {
        const int64_t count = std::min(group, blocks - cb0);
        for (int64_t cb = cb0; cb < cb0 + count; ++cb) {
          ahead.advance();
          kt_.winograd.input(tile_source(image, t0, cb, rows, cols), row, lanes_, stage + (cb - cb0) * lanes_,
                             count * lanes_);
        }
        for (int64_t xi = 0; xi < kXi; ++xi)
          kt_.stream_run(stage + xi * count * lanes_, v + (t0 * kXi + xi) * icp_ + cb0 * lanes_, count * lanes_);
      }
    });
  }

  // Z in [xi][oc block][tile][block]: the filter GEMM's vector operand streams contiguously along its reduction
  // (tiles), where a [tile][oc] row per step cost a cache miss per step.
  int64_t z_offset(int64_t t, int64_t xi, int64_t kv) const {
    const int64_t ob = kv * lanes_ / block_, in_block = kv * lanes_ % block_;
    return ((xi * oc_blocks_ + ob) * tiles_ + t) * block_ + in_block;
  }

  void transform_dy(const float* y, float* dyb, int64_t g, float* z) const {
    const int64_t blocks = ocp_ / lanes_;
    // Groups of consecutive tiles, an output-channel block at a time: staged [xi][tile][block], one run per xi.
    const int64_t row = dy_layout_.out_cols * lanes_, rows = dy_layout_.out_rows, cols = dy_layout_.out_cols;
    const int64_t per_block = block_ / lanes_;
    for_tiles(y, dyb, dy_layout_, g, stage_vectors(), [&](int64_t t0, int64_t t1, const float* image, RunsPrefetch& ahead) {
      alignas(64) float stage[kStageFloats];
      const int64_t count = t1 - t0;
      for (int64_t ob = 0; ob < oc_blocks_; ++ob) {
        const int64_t used = std::min(per_block, blocks - ob * per_block);
        // A last block's vectors past the output channels: streamed out as zeros, never read into results.
        if (used < per_block) std::fill(stage, stage + kXi * count * block_, 0.0f);
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t i = 0; i < used; ++i) {
            ahead.advance();
            kt_.winograd.dy(tile_source(image, t, ob * per_block + i, rows, cols), row, lanes_,
                            stage + (t - t0) * block_ + i * lanes_, count * block_);
          }
        for (int64_t xi = 0; xi < kXi; ++xi)
          kt_.stream_run(stage + xi * count * block_, z + z_offset(t0, xi, ob * per_block), count * block_);
      }
    });
  }

  // A thread's floats for a fused block's V and M (whole lines each, so the threads' pieces share none).
  int64_t fused_v_floats() const { return ceil_div(fused_tiles_ * kXi * icp_, 16) * 16; }
  int64_t fused_m_floats() const { return ceil_div(fused_tiles_ * kXi * block_, 16) * 16; }

  // Fused forward / backward-data over group g (u: the group's U, [ob][xi] panels). Threads take contiguous
  // shares of the blocks of fused_tiles_ tiles; per block: the input transform into this thread's V ([xi][ic
  // vector][tile][lanes], whole vectors, ordinary stores: it stays in L2), then per oc block the 36 GEMMs into this
  // thread's M ([xi][tile][block], in L2) and at once their output transform. U (alex3: 10.6 MB) streams through
  // in [ob][xi] order once per block, each panel prefetched into L2 by the kernel a few floats per reduction step
  // while the previous one runs. The three-phase form writes V and M to memory and reads them back (alex3
  // forward: 7 + 14 MB each way), a fifth of its time on memory-bound transforms.
  void fused(const float* src, const Buffers& b, const float* u, int64_t g, float* out) const {
    const int64_t per_image = tiles_h_ * tiles_w_, cvs = icp_ / lanes_, panel = icp_ * block_;
    const int64_t row = in_layout_.out_cols * lanes_, rows = in_layout_.out_rows, cols = in_layout_.out_cols;
    const auto has = [&](int n) { return kt_.bcast[nv_ - 1][n - 1] != nullptr; };
    const auto full = split_columns(fused_tiles_, nj_, has);
    // The image each thread's per-image copy holds.
    struct alignas(64) Held {
      int64_t image = -1;
    };
    std::vector<Held> held(threads_);
    parallel_shares(fused_blocks_, threads_, [&](int64_t block, unsigned thread) {
      const int64_t t0 = block * fused_tiles_, t1 = std::min(tiles_, t0 + fused_tiles_), count = t1 - t0;
      float* v = b.vb + int64_t{thread} * fused_v_floats();
      float* m = b.mb + int64_t{thread} * fused_m_floats();
      float* mine = b.in + int64_t{thread} * image_floats(in_layout_);
      RunsPrefetch ahead;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / per_image;
        const float* image = b.in + (n * pb_.groups + g) * image_floats(in_layout_);
        if (per_image_) {
          if (held[thread].image != n) {
            const int64_t plane = in_layout_.out_rows * in_layout_.out_cols * in_layout_.block;
            for (int64_t cb = 0; cb < in_layout_.blocks(); ++cb)
              copy_channel_block(in_layout_, src, (n * pb_.groups + g) * in_layout_.blocks() + cb, mine + cb * plane,
                                 kt_);
            held[thread].image = n;
            // The next image's NCHW source (this thread's next copy, blocks going out in contiguous shares)
            // prefetched into L2 a few lines per tile transform of this image's tiles in the block, as for_tiles
            // does: the copy otherwise waits on its 16 short plane streams.
            ahead = {};
            if (n + 1 < pb_.n) {
              const int64_t source = in_layout_.per_group * in_layout_.rows * in_layout_.cols;
              const int64_t transforms = (std::min(t1, (n + 1) * per_image) - t) * cvs;
              ahead.base = src + ((n + 1) * pb_.groups + g) * source;
              ahead.runs = 1, ahead.floats = source;
              ahead.lines_per_call = ceil_div(ceil_div(source, transforms), 16);
            }
          }
          image = mine;
        }
        for (int64_t cb = 0; cb < cvs; ++cb) {
          ahead.advance();
          kt_.winograd.input(tile_source(image, t, cb, rows, cols), row, lanes_, v + (cb * count + t - t0) * lanes_,
                             icp_ * count);
        }
      }
      const auto widths = count == fused_tiles_ ? full : split_columns(count, nj_, has);
      // Floats of the next panel prefetched per reduction step: the panel over this one's calls.
      const int64_t calls = static_cast<int64_t>(widths.size()), step = ceil_div(block_, calls);
      for (int64_t ob = 0; ob < oc_blocks_; ++ob) {
        for (int64_t xi = 0; xi < kXi; ++xi) {
          const int64_t index = ob * kXi + xi;
          const float* a_panel = u + index * panel;
          // The next panel, or past the last one the group's first (the next block's).
          const float* next = index + 1 < oc_blocks_ * kXi ? a_panel + panel : u;
          BcastArgs a;
          a.a = a_panel;
          a.b_j = lanes_;
          a.n1 = cvs, a.a1 = lanes_ * block_, a.b1 = count * lanes_;
          a.n2 = lanes_, a.a2 = block_, a.b2 = 1;
          a.o_v = lanes_, a.o_lane = 1, a.o_j = block_;
          a.valid = block_;  // U's lanes past the output channels are zeros
          a.prefetch_step = step;
          int64_t j0 = 0, call = 0;
          for (int width : widths) {
            a.b = v + xi * icp_ * count + j0 * lanes_;
            a.out = m + (xi * count + j0) * block_;
            a.prefetch = next + call * icp_ * step;
            kt_.bcast[nv_ - 1][width - 1](a);
            j0 += width, ++call;
          }
        }
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t vv = 0; vv < nv_; ++vv) {
            const int64_t o0 = ob * block_ + vv * lanes_;
            if (o0 >= oc_) break;
            float tile[16 * 16];  // [4 x 4 pixels][lanes], lanes <= 16
            kt_.winograd.output(m + (t - t0) * block_ + vv * lanes_, count * block_, tile);
            store_tile(tile, t, o0, g, out);
          }
      }
    });
  }

  // Writes tile t's 4 x 4 outputs of the output channels [o0, o0 + lanes) (tile: [pixel][lanes]) to NCHW `out`,
  // the tile's edge clipped.
  void store_tile(const float* tile, int64_t t, int64_t o0, int64_t g, float* out) const {
    Digits digits(t);
    const int64_t tw = digits.next(tiles_w_), th = digits.next(tiles_h_), n = digits.rest();
    const int64_t rows = std::min<int64_t>(4, out_rows_ - 4 * th), cols = std::min<int64_t>(4, out_cols_ - 4 * tw);
    const int64_t count = std::min(lanes_, oc_ - o0);
    for (int64_t l = 0; l < count; ++l) {
      float* plane = out + ((n * pb_.groups + g) * oc_ + o0 + l) * out_rows_ * out_cols_;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) plane[(4 * th + r) * out_cols_ + 4 * tw + c] = tile[(r * 4 + c) * lanes_ + l];
    }
  }

  // Prefetches [p, p + floats) into L2, a line at a time.
  static void prefetch(const float* p, int64_t floats) {
    for (int64_t i = 0; i < floats; i += 16) __builtin_prefetch(p + i, 0, 2);
  }

  // Widest compiled block width not above n.
  int fit(int n) const {
    while (n > 1 && kt_.bcast[nv_ - 1][n - 1] == nullptr) --n;
    return n;
  }

  // M[xi][tiles][oc] = V[xi][tiles][ic] U[xi][ic][oc]: vectors of output channels, a block of tiles broadcast.
  void gemm_forward(const float* v, const float* u, float* m) const {
    const int64_t last = tiles_ - (tile_blocks_ - 1) * tb_;
    const auto full = split_columns(tb_, nj_, [&](int n) { return kt_.bcast[nv_ - 1][n - 1] != nullptr; });
    const auto tail = split_columns(last, nj_, [&](int n) { return kt_.bcast[nv_ - 1][n - 1] != nullptr; });
    // Threads take contiguous shares of the items (parallel_shares), so each runs whole xi as one thread does
    // (but where its share starts or ends) and reads only its own xi's V panels, prefetching the next xi's beside
    // its last item of the current one. Items handed out interleaved had every core read every xi's panels (each
    // item reads all tiles), each thread prefetching a share of them beside each of its items.
    parallel_shares(kXi * oc_blocks_, threads_, [&](int64_t item, unsigned) {
      const int64_t xi = item / oc_blocks_, ob = item % oc_blocks_;
      BcastArgs a;
      a.a = u + u_offset(0, xi, ob);
      a.b_j = kXi * icp_;
      a.n2 = icp_, a.a2 = block_, a.b2 = 1;
      a.o_v = lanes_, a.o_lane = 1, a.o_j = ocp_;
      a.valid = std::min(block_, oc_ - ob * block_);
      a.stream = true;
      // Prefetched into L2 while this item runs: the next item's slab of U (this thread's next item but at the
      // ends of the pool's batches; read from memory once per run), a share beside each tile block, and where
      // the next item starts the next xi, V's panels of that xi, each beside the same tile block. The first call
      // of an item otherwise waited on its slab (alex3 forward, one thread: 13.4 -> 12.5 ms).
      const bool more = item + 1 < kXi * oc_blocks_;
      const float* next_u = u + (item + 1) * icp_ * block_;
      const int64_t share = ceil_div(icp_ * block_, tile_blocks_);
      const bool next_xi = ob + 1 == oc_blocks_ && xi + 1 < kXi;
      for (int64_t tb = 0; tb < tile_blocks_; ++tb) {
        if (more) prefetch(next_u + tb * share, std::min(share, icp_ * block_ - tb * share));
        if (next_xi) {
          for (int64_t t = tb * tb_; t < std::min(tiles_, (tb + 1) * tb_); ++t) prefetch(v + (t * kXi + xi + 1) * icp_, icp_);
        }
        int64_t t0 = 0;
        for (int width : tb + 1 == tile_blocks_ ? tail : full) {
          a.b = v + ((tb * tb_ + t0) * kXi + xi) * icp_;
          a.out = m + (tb * kXi + xi) * tb_ * ocp_ + t0 * ocp_ + ob * block_;
          kt_.bcast[nv_ - 1][width - 1](a);
          t0 += width;
        }
      }
    });
  }

  // dU[xi][ic][oc] = sum over tiles of V[xi][tile][ic] Z[xi][tile][oc]: vectors of output channels, input
  // channels broadcast, the whole reduction over tiles in registers. Stored [ic][xi][oc], so the final transform
  // reads each (ic, oc vector)'s 36 vectors within one ic's slab of 36 x ocp floats (a [xi][ic][oc] tensor put
  // them a whole slice, hundreds of KB, apart: a cache and TLB miss each), and a block's stores are runs of VECS
  // adjacent lines per input channel (an [ic][oc vector][xi][lanes] layout wrote single lines 36 vectors apart:
  // alex3 and alex5 backward-filter 2-3% slower, one thread). Whole blocks are written with streaming stores: a
  // block's vectors land tens of KB apart and dU (alex3: 10.6 MB) outgrows L2 before the transform reads it, so
  // ordinary stores paid a read for ownership per line (alex3 and alex4, one thread: GEMMs 13.1 -> 11.3 ms and
  // 20.1 -> 15.4 ms). Splitting the reduction into L1-sized chunks of tiles measured slower still (12.4 and
  // 16.9 ms without streaming): a later chunk reads the block back.
  void gemm_filter(const float* v, const float* z, float* du) const {
    const int64_t cvs = icp_ / lanes_;
    // Kernel calls per item (a full vector of input channels), and the next xi's Z and V slices (read from memory:
    // the transforms streamed them out) spread over this xi's calls, a few floats of them prefetched into L2 per
    // reduction step inside the kernel. With every xi's operands in L2 the GEMM ran at 91-92% of the FMA loop,
    // reading each xi's from memory 73-75% (stand-alone, alex3-5's shapes, one thread); the hardware prefetchers
    // start each panel's stream too late, and prefetches in a burst beside each item stall on fill buffers
    // (measured level). In the kernel: 82-88%.
    int64_t calls = 0;
    for (int64_t c = 0; c < std::min<int64_t>(ic_, lanes_); ++calls)
      c += fit(static_cast<int>(std::min<int64_t>(nj_, std::min<int64_t>(ic_, lanes_) - c)));
    // Threads take contiguous shares of the items (parallel_shares), so a thread runs whole xi (but where its
    // share starts or ends, or it takes another's last items), and each covers the whole of the next slices over
    // its own calls of the xi, counted by the thread's own calls: a prefetch lands in the L2 of the core that
    // issued it. Items handed out interleaved had every core read all of every xi's Z and V slices.
    const int64_t z_slice = oc_blocks_ * tiles_ * block_, v_slice = icp_ * tiles_;
    const int64_t per_thread = std::max<int64_t>(1, oc_blocks_ * cvs * calls);
    const int64_t step = std::max<int64_t>(1, ceil_div(z_slice + v_slice, per_thread * tiles_));
    struct alignas(64) Progress {
      int64_t xi = -1, calls = 0;  // this thread's calls so far in xi
    };
    std::vector<Progress> progress(threads_);
    parallel_shares(kXi * oc_blocks_ * cvs, threads_, [&](int64_t item, unsigned thread) {
      const int64_t cv = item % cvs, ob = (item / cvs) % oc_blocks_, xi = item / (cvs * oc_blocks_);
      Progress& mine = progress[thread];
      if (mine.xi != xi) mine.xi = xi, mine.calls = 0;
      BcastArgs a;
      a.a = z + ((xi * oc_blocks_ + ob) * tiles_) * block_;
      a.b_j = 1;
      a.n2 = tiles_, a.a2 = block_, a.b2 = lanes_;
      a.o_v = lanes_, a.o_lane = 1, a.o_j = kXi * ocp_;
      a.valid = std::min(block_, oc_ - ob * block_);
      a.stream = true;
      // Columns: this vector's input channels, in blocks of COLS (the rest in the widest compiled width).
      const int64_t c_end = std::min(ic_, (cv + 1) * lanes_);
      for (int64_t c = cv * lanes_; c < c_end;) {
        const int64_t call = mine.calls++;
        const int width = fit(static_cast<int>(std::min<int64_t>(nj_, c_end - c)));
        const int64_t ahead = call * tiles_ * step;
        a.prefetch = nullptr, a.prefetch_step = step;
        if (xi + 1 < kXi && ahead < z_slice) a.prefetch = z + (xi + 1) * z_slice + ahead;
        if (xi + 1 < kXi && ahead >= z_slice && ahead < z_slice + v_slice) a.prefetch = v + (xi + 1) * v_slice + ahead - z_slice;
        a.b = v + v_filter_offset(0, xi, cv) + (c - cv * lanes_);
        a.out = du + (c * kXi + xi) * ocp_ + ob * block_;
        kt_.bcast[nv_ - 1][width - 1](a);
        c += width;
      }
    });
  }

  // y = A^T M A per (tile, vector of output channels), written to NCHW with the tile's edge clipped. Work items
  // are (image, run of channel vectors), each covering whole channel planes of one image, tiles in the outer loop:
  // items of consecutive tiles (as before) put the two threads' current items in the same image, and with 13 x 13
  // planes and 4 x 4 tiles the rows where one thread's tiles meet the other's share cache lines in every channel
  // plane, written by both cores at once: the phase's CPU time summed over two threads was 2.5-2.7 ms on alex3
  // forward against 1.85 ms on one thread. By image: 1.56 ms, the phase's wall time 1.27-1.37 -> 0.79 ms (alex4
  // and alex5, both directions, 0.82-1.33 -> 0.53-0.90 ms).
  //
  // Where an item's outputs fit half a core's L2 (stage_outputs()), they are gathered in this thread's stage
  // (`stage`, NCHW planes of the item's channels) and written out at once, their whole lines with streaming
  // stores: one contiguous run per item, and no line of the output read for ownership before the scattered 4-float
  // rows of each tile land in it. Two threads, alternated in one process: alex3-5 forward and backward-data
  // 1.4-4.6% faster (alex3 forward 5.51 -> 5.30 ms, alex4 backward-data 7.80 -> 7.44).
  void transform_output(const float* m, int64_t g, float* out, float* stage) const {
    const int64_t vectors = ocp_ / lanes_, per_image = tiles_h_ * tiles_w_;
    const int64_t runs = output_runs(), run = ceil_div(vectors, runs);
    const int64_t plane_floats = out_rows_ * out_cols_;
    const bool staged = stage_outputs();
    parallel_items(pb_.n * runs, threads_, [&](int64_t item, unsigned thread) {
      const int64_t n = item / runs, v0 = item % runs * run, v1 = std::min(vectors, v0 + run);
      if (v0 >= v1) return;  // runs x run may pass the vectors there are
      float* first = out + ((n * pb_.groups + g) * oc_ + v0 * lanes_) * plane_floats;
      float* dst = staged ? stage + int64_t{thread} * output_item_floats() : first;
      for (int64_t t = n * per_image; t < (n + 1) * per_image; ++t) {
        Digits digits(t);
        const int64_t tw = digits.next(tiles_w_), th = digits.next(tiles_h_);
        const int64_t rows = std::min<int64_t>(4, out_rows_ - 4 * th), cols = std::min<int64_t>(4, out_cols_ - 4 * tw);
        for (int64_t ov = v0; ov < v1; ++ov) {
          float tile[16 * 16];  // [4 x 4 pixels][lanes], lanes <= 16
          kt_.winograd.output(m + tile_offset(t, ocp_) + ov * lanes_, xi_stride(ocp_), tile);
          const int64_t o0 = ov * lanes_;
          const int64_t count = std::min(lanes_, oc_ - o0);
          for (int64_t l = 0; l < count; ++l) {
            float* plane = dst + (o0 - v0 * lanes_ + l) * plane_floats;
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t c = 0; c < cols; ++c)
                plane[(4 * th + r) * out_cols_ + 4 * tw + c] = tile[(r * 4 + c) * lanes_ + l];
          }
        }
      }
      if (staged) store_row(dst, first, (std::min(oc_, v1 * lanes_) - v0 * lanes_) * plane_floats);
    });
  }

  // The output transform's items per image: runs of channel vectors, enough for 4 items per thread where there are
  // few images.
  int64_t output_runs() const { return std::min(ocp_ / lanes_, ceil_div(4 * int64_t{threads_}, pb_.n)); }
  // Floats of one output-transform item's outputs (a run of channel vectors' planes of one image).
  int64_t output_item_floats() const {
    return ceil_div(ocp_ / lanes_, output_runs()) * lanes_ * out_rows_ * out_cols_;
  }
  bool stage_outputs() const { return stage_outputs_; }

  // dW[k][c] = G^T dU[.][c][k] G per (input channel, vector of output channels). Threads take blocks of 16 input
  // channels: each output channel k's 16 x 9 floats of a block are 9 whole cache lines of dW (where ic is a
  // multiple of 16), so two threads never write the same line at once. Items of single input channels (9 floats,
  // 36 bytes) put the threads' current items side by side, sharing a line in every one of the oc rows (as in
  // transform_output): alex3's transform took 1.55 ms of CPU time over two threads against 1.24 on one, by blocks
  // 1.24-1.28 (wall 0.78-0.80 -> 0.66-0.68 ms; alex4 0.92-0.96 -> 0.87-0.91, alex5 0.64 -> 0.57). The blocks go
  // out in contiguous shares (parallel_shares): the prefetch of the next input channel's dU slab at a block's
  // last channel is then for this thread's next block, and the threads' rows of dW meet at one block boundary
  // rather than at every other block.
  void filter_gradient(const float* du, int64_t g, float* w, float* stage_base) const {
    const int64_t vectors = ocp_ / lanes_;
    // The next input channel's slab of dU (read from memory: the GEMM streamed it out), a share per item.
    const int64_t slab = kXi * ocp_, share = ceil_div(slab, vectors);
    parallel_shares(ceil_div(ic_, kFilterBlock), threads_, [&](int64_t block, unsigned thread) {
      // The block's results staged [oc vector][input channel][tap][lanes] (in L2), then per vector of output
      // channels transposed in registers to [lane][input channel][tap], so each output channel's row of the
      // block's 16 x 9 taps is written as whole vectors (was a scalar store per tap and lane: 40% of the
      // transform's samples beside its wait for dU).
      float* stage = stage_base + int64_t{thread} * filter_stage_floats();
      const int64_t c0 = block * kFilterBlock, channels = std::min(ic_, c0 + kFilterBlock) - c0;
      const int64_t row = channels * 9;
      for (int64_t c = c0; c < c0 + channels; ++c) {
        for (int64_t kv = 0; kv < vectors; ++kv) {
          if (c + 1 < ic_) prefetch(du + (c + 1) * slab + kv * share, std::min(share, slab - kv * share));
          kt_.winograd.filter(du + c * kXi * ocp_ + kv * lanes_, ocp_,
                              stage + (kv * kFilterBlock + (c - c0)) * 9 * lanes_);
        }
      }
      // Rows of `row` floats, padded to whole vectors for the transpose (lanes past a partial block's taps are
      // never copied out).
      const int64_t padded = ceil_div(row, lanes_) * lanes_;
      float* rows = stage + vectors * kFilterBlock * 9 * lanes_;
      for (int64_t kv = 0; kv < vectors; ++kv) {
        const int64_t k0 = kv * lanes_, count = std::min(lanes_, oc_ - k0);
        kt_.interleave(stage + kv * kFilterBlock * 9 * lanes_, lanes_, row, count, rows, padded);
        for (int64_t l = 0; l < count; ++l) store_row(rows + l * padded, w + ((g * oc_ + k0 + l) * ic_ + c0) * 9, row);
      }
    });
  }

  // dst[0, n) = src[0, n): the whole cache lines within dst streamed out (no read for ownership: dW, alex3 2.65
  // MB, is written once and read by the caller later), the partial lines at its ends with ordinary stores.
  void store_row(const float* src, float* dst, int64_t n) const {
    const auto address = reinterpret_cast<uintptr_t>(dst);
    const int64_t head = address % 4 != 0 || lanes_ == 1 ? n : std::min<int64_t>(n, ((64 - address % 64) % 64) / 4);
    const int64_t body = (n - head) / 16 * 16;
    std::memcpy(dst, src, static_cast<size_t>(head) * sizeof(float));
    if (body > 0) kt_.stream_run(src + head, dst + head, body);
    std::memcpy(dst + head + body, src + head + body, static_cast<size_t>(n - head - body) * sizeof(float));
  }

  // Input channels per filter-transform item (see filter_gradient).
  static constexpr int64_t kFilterBlock = 16;
  // A thread's staging floats for the filter transform: a block's results and one vector's transposed rows.
  int64_t filter_stage_floats() const {
    return (ocp_ / lanes_) * kFilterBlock * 9 * lanes_ + lanes_ * ceil_div(kFilterBlock * 9, lanes_) * lanes_;
  }

  ConvProblem pb_;
  const KernelTable& kt_;
  int64_t lanes_;
  int nv_, nj_;
  bool filter_ = false;
  int64_t ic_ = 1, oc_ = 1, icp_ = 1, ocp_ = 1, block_ = 1, oc_blocks_ = 1;
  int64_t out_rows_ = 1, out_cols_ = 1, src_rows_ = 1, src_cols_ = 1, pad_h_ = 0, pad_w_ = 0;
  int64_t tiles_h_ = 1, tiles_w_ = 1, tiles_ = 1, tb_ = 1, tile_blocks_ = 1;
  bool fused_ = false;
  int64_t fused_tiles_ = 1, fused_blocks_ = 1;  // fused: tiles per block (the last may have fewer), blocks
  ChannelBlocking in_layout_, dy_layout_;
  unsigned threads_ = 1;
  bool per_image_ = false;
  bool stage_outputs_ = false;  // an item's outputs staged per thread (see transform_output)
  size_t workspace_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_winograd_strategy(const ConvProblem& problem, const Choice& choice,
                                                 const KernelTable& kernels) {
  return std::make_unique<WinogradStrategy>(problem, choice, kernels);
}

}  // namespace convtune::cpu_blocked::detail
