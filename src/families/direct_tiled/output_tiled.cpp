// The output-tiled half of direct_tiled: forward (tiles of y over k, p, q) and backward-data (tiles of dx over
// c, h, w), one kernel each with the same parameters under the written tensor's axis names.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "src/families/direct_tiled/direct_tiled_variant.h"

namespace convtune::direct_tiled {

namespace {

// Axis names and extents of the written tensor, and of the tensor staged in local memory.
struct Axes {
  std::string channel, rows, cols, reduced;  // forward: K, P, Q, C; backward-data: C, H, W, K
  int64_t channels = 0;                      // written channels per group
  int64_t row_extent = 0, col_extent = 0;    // of the written tensor (before pooling)
  int64_t reduced_channels = 0;              // channels per group summed over
  int64_t staged_row_length = 0;             // W (x staged) or Q (dy staged)
};

// One set of parameters under the written tensor's axis names: TILE_K/TILE_P/TILE_Q... forward, TILE_C/TILE_H/
// TILE_W... backward-data.
struct OutputParams {
  int64_t tile_c = 0, tile_r = 0, tile_q = 0;           // channels, rows, columns per work-item
  int64_t threads_c = 0, threads_r = 0, threads_q = 0;  // work-group extents
  int64_t use_local = 0, chunk = 0, vector_width = 0, unroll = 0;
};

ParameterTable<OutputParams> make_table(const Axes& a, bool forward) {
  using P = OutputParams;
  const std::string written = forward ? "y" : "dx";
  const std::string staged = forward ? "x" : "dy";
  return ParameterTable<P>({
      {"TILE_" + a.channel, &P::tile_c, {1, 2, 4, 8}, fmt::format("{} channels per work-item", written)},
      {"TILE_" + a.rows, &P::tile_r, {1, 2, 4, 8},
       fmt::format("{} rows per work-item (pooled rows when the epilogue pools)", written)},
      {"TILE_" + a.cols, &P::tile_q, {1, 2, 4, 8},
       fmt::format("{} columns per work-item (pooled when the epilogue pools)", written)},
      {"THREADS_" + a.channel, &P::threads_c, {1, 2, 4, 8, 16, 32, 64}, "work-group extent along channels (local axis 2)"},
      {"THREADS_" + a.rows, &P::threads_r, {1, 2, 4, 8, 16}, "work-group extent along rows (local axis 1)"},
      {"THREADS_" + a.cols, &P::threads_q, {1, 2, 4, 8, 16, 32}, "work-group extent along columns (local axis 0)"},
      {"USE_LOCAL", &P::use_local, {1, 0},
       fmt::format("1: stage the work-group's {} tile + filter halo in local memory", staged)},
      {"CHUNK_" + a.reduced, &P::chunk, {1, 2, 4, 8, 16}, fmt::format("{} channels staged per local-memory fill", staged)},
      {"VECTOR_WIDTH", &P::vector_width, {1, 2, 4},
       "floats per global load/store along columns where the row length allows"},
      {"UNROLL", &P::unroll, {2, 1, 0}, "filter loops unrolled: 2 both r and s, 1 the inner loop over s, 0 none"},
  });
}

class OutputTiled final : public DirectTiledVariant {
 public:
  explicit OutputTiled(const ConvProblem& problem)
      : pb_(problem), forward_(problem.direction == Direction::Forward), axes_(axes_of(problem)),
        table_(make_table(axes_, forward_)) {}

  std::vector<Parameter> parameters() const override { return table_.parameters(); }

  std::vector<Constraint> constraints() const override {
    using P = OutputParams;
    using X = ConstraintContext;
    const Axes a = axes_;
    const ParameterTable<P>& t = table_;
    const std::string chunk = t.name(&P::chunk);
    return {
        t.constraint(fmt::format("register tile of at most {} outputs per work-item", kMaxRegisterTile),
                     {&P::tile_c, &P::tile_r, &P::tile_q},
                     [](const P& p, const X&) { return p.tile_c * p.tile_r * p.tile_q <= kMaxRegisterTile; }),
        within(t, "channel tile within the group's channels", {&P::tile_c}, a.channels),
        within(t, "row tile within the rows", {&P::tile_r}, a.row_extent),
        within(t, "column tile within the columns", {&P::tile_q}, a.col_extent),
        within(t, "work-group's channels within the group's channels", {&P::tile_c, &P::threads_c}, a.channels),
        within(t, "work-group's rows within the rows", {&P::tile_r, &P::threads_r}, a.row_extent),
        within(t, "work-group's columns within the columns", {&P::tile_q, &P::threads_q}, a.col_extent),
        t.constraint("threads per work-group within the device limit", {&P::threads_c, &P::threads_r, &P::threads_q},
                     [](const P& p, const X& x) {
                       return static_cast<size_t>(p.threads_c * p.threads_r * p.threads_q) <=
                              x.device.max_work_group_size;
                     }),
        t.constraint(fmt::format("{} is 1 without local memory", chunk), {&P::use_local, &P::chunk},
                     [](const P& p, const X&) { return p.use_local == 1 || p.chunk == 1; }),
        within(t, fmt::format("{} within the group's {} channels", chunk, a.reduced), {&P::chunk}, a.reduced_channels),
        t.constraint("local memory within the device limit and 48 KiB (CUDA static shared memory)",
                     {&P::tile_c, &P::tile_r, &P::tile_q, &P::threads_c, &P::threads_r, &P::threads_q, &P::use_local,
                      &P::chunk, &P::vector_width},
                     [self = std::make_shared<OutputTiled>(*this)](const P& p, const X& x) {
                       return self->local_memory_bytes(p) <= local_memory_limit(x.device);
                     }),
        t.constraint("vector width divides a row the kernel loads (staged with local memory) or stores",
                     {&P::tile_q, &P::use_local, &P::vector_width},
                     [a](const P& p, const X&) {
                       const int64_t v = p.vector_width;
                       const bool loads = p.use_local == 1 && a.staged_row_length % v == 0;
                       const bool stores = a.col_extent % v == 0 && p.tile_q % v == 0;
                       return v == 1 || loads || stores;
                     }),
    };
  }

  // Seed 000's best on NVIDIA (1 x 2 x 8 per work-item, 16 x 2 x 2 work-items, local memory on), fitted to the
  // problem's extents and the device's limits; the all-ones configuration when nothing else fits.
  Config default_config(const DeviceInfo& device) const override {
    OutputParams c;
    c.tile_c = 1, c.tile_r = 2, c.tile_q = 8, c.threads_c = 16, c.threads_r = 2, c.threads_q = 2;
    c.use_local = 1, c.chunk = std::min<int64_t>(4, pow2_ceil(axes_.reduced_channels));
    c.vector_width = 1, c.unroll = pb_.r * pb_.s <= 25 ? 2 : 1;
    fit_extent(c.tile_c, c.threads_c, axes_.channels);
    fit_extent(c.tile_r, c.threads_r, axes_.row_extent);
    fit_extent(c.tile_q, c.threads_q, axes_.col_extent);
    // Work-items freed by a narrow axis (depthwise has one channel per group) go to the spatial axes.
    for (const auto& [threads, extent, tile, most] :
         {std::tuple{&OutputParams::threads_q, axes_.col_extent, &OutputParams::tile_q, 32},
          std::tuple{&OutputParams::threads_r, axes_.row_extent, &OutputParams::tile_r, 16}}) {
      while (c.threads_c * c.threads_r * c.threads_q < 64 && c.*threads < most &&
             c.*tile * c.*threads * 2 <= pow2_ceil(extent)) {
        c.*threads *= 2;
      }
    }
    while (static_cast<size_t>(c.threads_c * c.threads_r * c.threads_q) > device.max_work_group_size) {
      int64_t* largest = &c.threads_c;
      for (int64_t* t : {&c.threads_r, &c.threads_q})
        if (*t > *largest) largest = t;
      *largest /= 2;
    }
    while (c.chunk > 1 && local_memory_bytes(c) > local_memory_limit(device)) c.chunk /= 2;
    if (local_memory_bytes(c) > local_memory_limit(device)) {
      c.use_local = 0;
      c.chunk = 1;
    }
    return first_valid_default<OutputParams>(table_, constraints(), c, {}, Problem(pb_), device);
  }

  KernelRecipe recipe(const Epilogue& epilogue, const Config& config, const DeviceInfo&) const override {
    const OutputParams p = table_.read(config);
    KernelRecipe recipe;
    const std::string file = forward_ ? "direct_tiled/forward.cl" : "direct_tiled/backward_data.cl";
    recipe.source = {file, problem_defines(pb_), {}};
    table_.add_defines(p, recipe.source.defines);
    if (forward_) {
      recipe.source.defines["HAS_BIAS"] = epilogue.bias ? "1" : "0";
      recipe.source.defines["APPLY_RELU"] = epilogue.relu ? "1" : "0";
      recipe.source.defines["POOL"] = std::to_string(epilogue.pool);
    }
    const int64_t out_rows = pooled_extent(axes_.row_extent, epilogue);
    const int64_t out_cols = pooled_extent(axes_.col_extent, epilogue);
    const int64_t col_blocks = ceil_div(out_cols, p.tile_q * p.threads_q);
    const int64_t row_blocks = ceil_div(out_rows, p.tile_r * p.threads_r);
    const int64_t channel_blocks = ceil_div(axes_.channels, p.tile_c * p.threads_c);
    constexpr int x = 0, w = 1, y = 2;  // Problem::operand order
    LaunchStep step;
    step.kernel = forward_ ? "direct_tiled_forward" : "direct_tiled_backward_data";
    step.args = forward_ ? std::vector<ArgSource>{ArgSource::of_operand(x), ArgSource::of_operand(w), ArgSource::of_operand(y)}
                         : std::vector<ArgSource>{ArgSource::of_operand(y), ArgSource::of_operand(w), ArgSource::of_operand(x)};
    if (epilogue.bias) step.args.push_back(ArgSource::of_operand(kBiasOperand));
    step.geometry.dims = 3;
    step.geometry.local = {static_cast<size_t>(p.threads_q), static_cast<size_t>(p.threads_r),
                           static_cast<size_t>(p.threads_c)};
    step.geometry.global = {static_cast<size_t>(pb_.n * col_blocks) * step.geometry.local[0],
                            static_cast<size_t>(row_blocks) * step.geometry.local[1],
                            static_cast<size_t>(pb_.groups * channel_blocks) * step.geometry.local[2]};
    recipe.steps.push_back(std::move(step));
    return recipe;
  }

 private:
  static Axes axes_of(const ConvProblem& pb) {
    if (pb.direction == Direction::Forward) return {"K", "P", "Q", "C", pb.k_per_group(), pb.p(), pb.q(), pb.c_per_group(), pb.w};
    return {"C", "H", "W", "K", pb.c_per_group(), pb.h, pb.w, pb.k_per_group(), pb.q()};
  }

  // Forward problems may be run with a 2x2 max-pool, which doubles the pre-pool tile behind each output; the
  // constraints cannot see the epilogue, so this is the larger of the two (an upper bound for every epilogue).
  int64_t local_memory_bytes(const OutputParams& p) const {
    int64_t bytes = staged_bytes(p, 1);
    if (forward_ && pb_.p() >= 2 && pb_.q() >= 2) bytes = std::max(bytes, staged_bytes(p, 2));
    return bytes;
  }

  // Bytes of the kernel's staged tile (the same formulas as the kernel's IN_TILE_*/DY_TILE_* and LOCAL_ROW).
  int64_t staged_bytes(const OutputParams& p, int64_t pool) const {
    if (p.use_local == 0) return 0;
    const int64_t block_rows = p.tile_r * pool * p.threads_r;
    const int64_t block_cols = p.tile_q * pool * p.threads_q;
    int64_t rows = 0, cols = 0;
    if (forward_) {
      rows = (block_rows - 1) * pb_.stride.h + (pb_.r - 1) * pb_.dilation.h + 1;
      cols = (block_cols - 1) * pb_.stride.w + (pb_.s - 1) * pb_.dilation.w + 1;
    } else {
      rows = ceil_div(block_rows + (pb_.r - 1) * pb_.dilation.h, pb_.stride.h);
      cols = ceil_div(block_cols + (pb_.s - 1) * pb_.dilation.w, pb_.stride.w);
    }
    const int64_t v = p.vector_width;
    const int64_t load_width = v > 1 && axes_.staged_row_length % v == 0 ? v : 1;
    const int64_t row_length = ceil_div(cols + load_width - 1, load_width) * load_width;
    return p.chunk * rows * row_length * static_cast<int64_t>(sizeof(float));
  }

  ConvProblem pb_;
  bool forward_;
  Axes axes_;
  ParameterTable<OutputParams> table_;
};

}  // namespace

std::unique_ptr<DirectTiledVariant> make_output_tiled(const ConvProblem& problem) {
  return std::make_unique<OutputTiled>(problem);
}

}  // namespace convtune::direct_tiled
