// ---- loader mappings ----
// A (TILE_M x TILE_K) is read along the reduction in every direction (w rows, dy rows are contiguous there):
// element e of work-item tid sits at kl = idx % TILE_K, ml = idx / TILE_K with idx = tid + e*threads.
// B (TILE_K x TILE_N) is read along N for forward and backward-data (neighbouring output pixels are neighbouring
// input pixels), along the reduction for backward-filter (neighbouring q are neighbouring x elements).
#define IG_A_KL(idx) ((idx) % TILE_K)
#define IG_A_ML(idx) ((idx) / TILE_K)
#if DIRECTION == 2
#define IG_B_KL(idx) ((idx) % TILE_K)
#define IG_B_NL(idx) ((idx) / TILE_K)
#else
#define IG_B_KL(idx) ((idx) / TILE_N)
#define IG_B_NL(idx) ((idx) % TILE_N)
#endif

// Offset of A[m][kr] from the group's A pointer: a row part fixed per element plus a reduction part.
#if DIRECTION == 0
#define IG_A_ROW(m) ((m) * IG_GR)
#define IG_A_RED(kr) (kr)
#elif DIRECTION == 1
// A[c][(k, r, s)] = w[k][c][r][s]
#define IG_A_ROW(m) ((m) * IG_RS)
#define IG_A_RED(kr) (int)(((unsigned)(kr) / IG_RS) * (C_PER_GROUP * IG_RS) + (unsigned)(kr) % IG_RS)
#else
// A[k][(n, p, q)] = dy[n][k][p][q]
#define IG_A_ROW(m) ((m) * IG_PQ)
#define IG_A_RED(kr) (int)(((unsigned)(kr) / IG_PQ) * IG_KPQ + (unsigned)(kr) % IG_PQ)
#endif

// ---- the B gathers, one per direction: the offset of B[kr][n] from the group's B pointer, given the column's
// fixed parts (base offset, u, v), or -1 where the element is zero: in the padding, off the strided grid
// (backward-data) or past the end of the reduction ----
// Compile-time-known conditions are left out by the preprocessor (also keeps OpenCL compilers from warning about
// constant operands).
#if IG_R_EVEN
#define IG_IN_REDUCTION(kr) true
#else
#define IG_IN_REDUCTION(kr) ((kr) < IG_GR)
#endif
#if IG_CHECK_H
#define IG_ROW_INSIDE(h) ((unsigned)(h) < (unsigned)H)
#else
#define IG_ROW_INSIDE(h) true
#endif
#if IG_CHECK_W
#define IG_COL_INSIDE(w) ((unsigned)(w) < (unsigned)W)
#else
#define IG_COL_INSIDE(w) true
#endif

// IG_GATHER(kr, base, u, v, off, ok) sets off and ok. ok is false where the element is zero (padding, off the
// strided grid, past the reduction); off is then any in-range offset's stand-in and never dereferenced.
#if DIRECTION == 0
// B[(c, r, s)][(n, p, q)] = x[n][c][p*sh - ph + r*dh][q*sw - pw + s*dw]; u, v = input row/column at r = s = 0.
#define IG_GATHER(kr, base, u, v, off, ok)                                    \
  {                                                                           \
    const int c_ = (unsigned)(kr) / IG_RS, rs_ = (unsigned)(kr) % IG_RS;      \
    const int r_ = (unsigned)rs_ / S, s_ = (unsigned)rs_ % S;                 \
    const int h_ = (u) + r_ * DILATION_H, w_ = (v) + s_ * DILATION_W;         \
    ok = IG_IN_REDUCTION(kr);                                                 \
    ok = ok && IG_ROW_INSIDE(h_);                                             \
    ok = ok && IG_COL_INSIDE(w_);                                             \
    off = (base) + c_ * IG_HW + h_ * W + w_;                                  \
  }
#elif DIRECTION == 1
// B[(k, r, s)][(n, h, w)] = dy[n][k][p][q] with p*sh = h + ph - r*dh, q*sw = w + pw - s*dw, where both divide
// exactly and land inside the output (ph in [0, P*sh) and a multiple of sh); u, v = h + ph, w + pw.
#if STRIDE_H > 1
#define IG_ON_GRID_H(ph) ((unsigned)(ph) % STRIDE_H == 0)
#else
#define IG_ON_GRID_H(ph) true
#endif
#if STRIDE_W > 1
#define IG_ON_GRID_W(qw) ((unsigned)(qw) % STRIDE_W == 0)
#else
#define IG_ON_GRID_W(qw) true
#endif
#define IG_GATHER(kr, base, u, v, off, ok)                                                           \
  {                                                                                                  \
    const int k_ = (unsigned)(kr) / IG_RS, rs_ = (unsigned)(kr) % IG_RS;                             \
    const int r_ = (unsigned)rs_ / S, s_ = (unsigned)rs_ % S;                                        \
    const int ph_ = (u) - r_ * DILATION_H, qw_ = (v) - s_ * DILATION_W;                              \
    ok = IG_IN_REDUCTION(kr);                                                                        \
    ok = ok && (unsigned)ph_ < (unsigned)(P * STRIDE_H) && (unsigned)qw_ < (unsigned)(Q * STRIDE_W); \
    ok = ok && IG_ON_GRID_H(ph_);                                                                    \
    ok = ok && IG_ON_GRID_W(qw_);                                                                    \
    off = (base) + k_ * IG_PQ + (int)((unsigned)ph_ / STRIDE_H) * Q + (int)((unsigned)qw_ / STRIDE_W); \
  }
#else
// B[(n, p, q)][(c, r, s)] = x[n][c][p*sh - ph + r*dh][q*sw - pw + s*dw]; u, v = input row/column at p = q = 0.
#define IG_GATHER(kr, base, u, v, off, ok)                                  \
  {                                                                         \
    const int img_ = (unsigned)(kr) / IG_PQ, pq_ = (unsigned)(kr) % IG_PQ; \
    const int p_ = (unsigned)pq_ / Q, q_ = (unsigned)pq_ % Q;               \
    const int h_ = (u) + p_ * STRIDE_H, w_ = (v) + q_ * STRIDE_W;           \
    ok = IG_IN_REDUCTION(kr);                                               \
    ok = ok && IG_ROW_INSIDE(h_);                                           \
    ok = ok && IG_COL_INSIDE(w_);                                           \
    off = img_ * IG_CHW + (base) + h_ * W + w_;                             \
  }
#endif
