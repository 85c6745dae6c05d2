// The batch chunking the workspace families (winograd, winograd_tc, fft, fft_tc) share: the chunk sizes searched, the
// launch-step bound, and the constraints on BATCH_CHUNK and backward-filter's SPLIT.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "convtune/extension/kernel_family.h"
#include "src/families/parameter_table.h"

namespace convtune::batch_chunks {

inline const std::vector<int64_t> kSizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
// The recipe holds three launch steps per chunk of the batch; this bounds its size, so a huge N is refused up front
// instead of building millions of steps (as im2col_gemm once did: N = 2e8 took 6 GB before the OOM killer).
inline constexpr int64_t kMaxChunks = 4096;

// The chunk within the batch and the launch-step bound, SPLIT above 1 only for backward-filter and at most the tiles
// of a chunk: `tiles(p)` counts a chunk's tiles under p's tile parameter (`tile`, which the constraint names).
template <typename P>
std::vector<Constraint> constraints(const ParameterTable<P>& t, const ConvProblem& pb, int64_t P::*tile,
                                    std::function<int64_t(const P&)> tiles) {
  using X = ConstraintContext;
  return {
      t.constraint("batch chunk at most the batch", {&P::batch_chunk},
                   [pb](const P& p, const X&) { return p.batch_chunk <= pb.n; }),
      t.constraint("at most 4096 batch chunks (launch steps)", {&P::batch_chunk},
                   [pb](const P& p, const X&) { return (pb.n + p.batch_chunk - 1) / p.batch_chunk <= kMaxChunks; }),
      t.constraint("SPLIT above 1 only for backward-filter", {&P::split},
                   [pb](const P& p, const X&) { return p.split == 1 || pb.direction == Direction::BackwardFilter; }),
      t.constraint("SPLIT at most the tiles of a chunk", {tile, &P::batch_chunk, &P::split},
                   [tiles](const P& p, const X&) { return p.split <= tiles(p); }),
  };
}

}  // namespace convtune::batch_chunks
