// cpu_blocked's interface: parameters, constraints and defaults from the problem and the active ISA, and the
// Convolution that prepares a strategy once and runs it (weights packed per run or once, stages timed).
#include "src/cpu_kernels/cpu_blocked.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>

#include "convtune/error.h"
#include "src/core/parallel_for.h"
#include "src/cpu_kernels/plan.h"

namespace convtune::cpu_blocked {

namespace {

using detail::KernelTable;

const std::vector<int64_t> kVecs = {1, 2, 3, 4, 6, 8};
const std::vector<int64_t> kCols = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 16, 20, 24, 28};
const std::vector<int64_t> kRowBlocks = {1, 2, 4, 8, 16, 32, 0};

bool is_filter(const ConvProblem& pb) { return pb.direction == Direction::BackwardFilter; }

// Facts of a problem the constraints and the default read.
struct Shape {
  int64_t oc = 1;        // forward/backward-data: channels written per group
  int64_t ic = 1;        // channels read per group
  int64_t row = 1;       // longest output row of a phase (pixels a broadcast block can cover)
  int64_t rows = 1;      // most output rows of a phase
  int64_t taps = 1;      // filter taps per phase (the reduction per channel)
  bool unit_rows = true; // input rows read at unit stride (pixel vectors possible)
};

Shape shape_of(const ConvProblem& pb) {
  Shape s;
  if (pb.direction == Direction::Forward) {
    s.oc = pb.k_per_group(), s.ic = pb.c_per_group();
    s.row = pb.q(), s.rows = pb.p(), s.taps = pb.r * pb.s;
    s.unit_rows = pb.stride.w == 1;
  } else if (pb.direction == Direction::BackwardData) {
    s.oc = pb.c_per_group(), s.ic = pb.k_per_group();
    s.row = (pb.w + pb.stride.w - 1) / pb.stride.w, s.rows = (pb.h + pb.stride.h - 1) / pb.stride.h;
    s.taps = std::max<int64_t>(1, (pb.r / pb.stride.h) * (pb.s / pb.stride.w));
  } else {
    s.oc = pb.k_per_group(), s.ic = pb.c_per_group();
    s.row = pb.q(), s.rows = pb.p(), s.taps = pb.r * pb.s;
  }
  return s;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const KernelTable& table() { return detail::kernel_table(active_isa()); }

bool bcast_compiled(const KernelTable& kt, int64_t nv, int64_t nj) {
  return nv >= 1 && nv <= detail::kMaxNv && nj >= 1 && nj <= detail::kMaxNj && kt.bcast[nv - 1][nj - 1];
}
bool dot_compiled(const KernelTable& kt, int64_t ni, int64_t nj) {
  return ni >= 1 && ni <= detail::kMaxDotRows && nj >= 1 && nj <= detail::kMaxDotColumns && kt.dot[ni - 1][nj - 1];
}

int64_t value(const Config& c, const char* name) { return c.at(name); }

// Filter taps of one stride class along a row (dots handle one class per block).
int64_t taps_per_class(const ConvProblem& pb) {
  const int64_t period = pb.stride.w / std::gcd(pb.stride.w, pb.dilation.w);
  return ceil_div(pb.s, period);
}

// The register block's shape for a broadcast kernel: as many accumulators as the registers allow, the vector
// count no larger than the channels need, the columns no wider than the row.
std::pair<int64_t, int64_t> best_bcast_block(int64_t vec_limit, int64_t col_limit) {
  const KernelTable& kt = table();
  std::pair<int64_t, int64_t> best{1, 1};
  double best_score = -1;
  for (int64_t nv = 1; nv <= std::min<int64_t>(vec_limit, detail::kMaxNv); ++nv) {
    for (int64_t nj : kCols) {
      if (nj > col_limit || !kt.bcast[nv - 1][nj - 1]) continue;
      // Accumulators hide the FMA latency; each step loads nv vectors and nj broadcasts for nv * nj FMAs, so
      // a block that loads less per FMA wins among equally large ones.
      const double fmas = static_cast<double>(nv * nj);
      const double score = fmas - 0.25 * static_cast<double>(nv + nj);
      if (score > best_score) best_score = score, best = {nv, nj};
    }
  }
  return best;
}

}  // namespace

std::vector<Parameter> parameters(const ConvProblem& problem) {
  const bool filter = is_filter(problem);
  return {
      {"ORIENT", {0, 1},
       filter ? "0: vectors over input channels, dy broadcast; 1: dot products along output rows"
              : "0: vectors over output channels, input pixels broadcast; 1: vectors over output pixels, weights broadcast"},
      {"VECS", kVecs, filter ? "register block: vectors of input channels (ORIENT 0) or output channels (ORIENT 1)"
                             : "register block: vectors (of output channels or of pixels)"},
      {"COLS", kCols, filter ? "register block: output channels (ORIENT 0) or filter taps (ORIENT 1)"
                             : "register block: broadcast columns (pixels for ORIENT 0, output channels for ORIENT 1)"},
      {"ROW_BLOCK", kRowBlocks, filter ? "output rows per reduction tile (0: whole images, as many as fit ~1 MiB)"
                                       : "output rows per work item (0: all rows of a phase)"},
      {"ORDER", {0, 1}, filter ? "0: threads split the output tiles; 1: threads split the reduction"
                               : "0: channel blocks outside row blocks; 1: row blocks outside channel blocks"},
  };
}

std::vector<Constraint> constraints(const ConvProblem& problem) {
  const Shape sh = shape_of(problem);
  const bool filter = is_filter(problem);
  // The ISA's facts are read once, when the constraints are made (a search makes them right before enumerating).
  const KernelTable* kt = &table();
  const int64_t lanes = kt->lanes;
  const int regs = kt->registers;
  std::vector<Constraint> out;
  out.push_back({"pixel vectors need input rows read at unit stride", {"ORIENT"}, [sh, filter](const ConstraintContext& c) {
                   return filter || value(c.config, "ORIENT") == 0 || sh.unit_rows;
                 }});
  out.push_back({"register block fits the ISA's vector registers", {"ORIENT", "VECS", "COLS"},
                 [filter, regs](const ConstraintContext& c) {
                   const int64_t v = value(c.config, "VECS"), j = value(c.config, "COLS");
                   if (filter && value(c.config, "ORIENT") == 1) return v * j + j + 1 <= regs;
                   return v * j + v + 1 <= regs;
                 }});
  out.push_back({"register block compiled for the ISA", {"ORIENT", "VECS", "COLS"}, [filter, kt](const ConstraintContext& c) {
                   const int64_t v = value(c.config, "VECS"), j = value(c.config, "COLS");
                   if (filter && value(c.config, "ORIENT") == 1) return dot_compiled(*kt, v, j);
                   return bcast_compiled(*kt, v, j);
                 }});
  // The ones below only remove configurations that run exactly like a smaller one (the plan clamps them).
  out.push_back({"vectors no more than the problem fills", {"ORIENT", "VECS"}, [sh, filter, lanes](const ConstraintContext& c) {
                   const int64_t v = value(c.config, "VECS");
                   if (filter) return value(c.config, "ORIENT") == 0 ? v <= ceil_div(sh.ic, lanes) : v <= sh.oc;
                   return v <= ceil_div(value(c.config, "ORIENT") == 0 ? sh.oc : sh.row, lanes);
                 }});
  out.push_back({"columns no more than the problem fills", {"ORIENT", "COLS"}, [sh, filter, problem](const ConstraintContext& c) {
                   const int64_t j = value(c.config, "COLS");
                   if (filter) return value(c.config, "ORIENT") == 0 ? j <= sh.oc : j <= taps_per_class(problem);
                   return j <= (value(c.config, "ORIENT") == 0 ? sh.row : sh.oc);
                 }});
  out.push_back({"row block no more than the rows", {"ROW_BLOCK"}, [sh](const ConstraintContext& c) {
                   const int64_t rb = value(c.config, "ROW_BLOCK");
                   // Powers of two up to the first that covers every row; 0 (all rows) always.
                   return rb == 0 || rb < sh.rows * 2;
                 }});
  return out;
}

Config default_config(const ConvProblem& problem) {
  const Shape sh = shape_of(problem);
  const Isa isa = active_isa();
  const int64_t lanes = vector_lanes(isa);
  const int regs = vector_registers(isa);
  Config c;
  c["ORDER"] = 0;
  if (is_filter(problem)) {
    // Channel vectors when the input channels fill them about as well as rows would fill row vectors; dot
    // products (which also pay a horizontal sum per block) for few channels.
    const double channel_fill = static_cast<double>(sh.ic) / static_cast<double>(ceil_div(sh.ic, lanes) * lanes);
    const double row_fill = static_cast<double>(sh.row) / static_cast<double>(ceil_div(sh.row, lanes) * lanes);
    if (channel_fill >= 0.75 || channel_fill >= row_fill) {
      const auto [nv, nj] = best_bcast_block(ceil_div(sh.ic, lanes), sh.oc);
      c["ORIENT"] = 0, c["VECS"] = nv, c["COLS"] = nj;
    } else {
      int64_t ni = std::min<int64_t>(sh.oc, regs >= 32 ? 4 : 2);
      while (ni > 1 && std::find(kVecs.begin(), kVecs.end(), ni) == kVecs.end()) --ni;
      int64_t nj = std::min<int64_t>(taps_per_class(problem), regs >= 32 ? 5 : 4);
      while (nj > 1 && !dot_compiled(table(), ni, nj)) --nj;
      c["ORIENT"] = 1, c["VECS"] = ni, c["COLS"] = nj;
    }
    // Threads split the output tiles when there are plenty; else the reduction.
    const int64_t tiles = c["ORIENT"] == 0 ? ceil_div(sh.ic, c["VECS"] * lanes) * ceil_div(sh.oc, c["COLS"]) * problem.r * problem.s * problem.groups
                                           : ceil_div(sh.oc, c["VECS"]) * sh.ic * problem.r * problem.groups;
    c["ORDER"] = tiles >= 8 * static_cast<int64_t>(hardware_threads()) ? 0 : 1;
    // Whole images per tile when an image is small; else blocks of rows that keep x and dy rows in L2.
    const int64_t row_bytes = 4 * (problem.c * problem.w * problem.stride.h + problem.k * problem.q());
    int64_t rb = 0;
    if (row_bytes * problem.p() > (int64_t{1} << 20)) {
      rb = 1;
      while (rb * 2 < sh.rows && rb * 2 * row_bytes <= (int64_t{1} << 20) && rb < 32) rb *= 2;
    }
    c["ROW_BLOCK"] = rb;
    return c;
  }
  // Forward / backward-data: channel vectors when the output channels fill the vectors at least as well as a
  // row fills pixel vectors and the reduction is long enough to pay the transposed stores.
  const double channel_fill = static_cast<double>(sh.oc) / static_cast<double>(ceil_div(sh.oc, lanes) * lanes);
  const double row_fill = static_cast<double>(sh.row) / static_cast<double>(ceil_div(sh.row, lanes) * lanes);
  const bool channels = !sh.unit_rows || (channel_fill >= row_fill && sh.ic * sh.taps >= 16);
  if (channels) {
    const auto [nv, nj] = best_bcast_block(ceil_div(sh.oc, lanes), sh.row);
    c["ORIENT"] = 0, c["VECS"] = nv, c["COLS"] = nj;
  } else {
    const auto [nv, nj] = best_bcast_block(ceil_div(sh.row, lanes), sh.oc);
    c["ORIENT"] = 1, c["VECS"] = nv, c["COLS"] = nj;
  }
  // Enough work items for the threads to balance, each a few rows.
  int64_t rb = 0;
  if (sh.rows > 16) rb = 8;
  c["ROW_BLOCK"] = rb;
  return c;
}

std::string unsupported_reason(const ConvProblem& problem) {
  if (problem.precision != Precision::FP32) {
    return fmt::format("cpu_blocked computes fp32 only, not {}", to_string(problem.precision));
  }
  return {};
}

std::string invalid_reason(const ConvProblem& problem, const Config& config) {
  for (const Parameter& p : parameters(problem)) {
    const auto it = config.find(p.name);
    if (it == config.end()) return fmt::format("{} is missing: expected one of {}", p.name, fmt::join(p.values, ", "));
    if (std::find(p.values.begin(), p.values.end(), it->second) == p.values.end())
      return fmt::format("{}={} is invalid: expected one of {}", p.name, it->second, fmt::join(p.values, ", "));
  }
  for (const auto& [name, v] : config) {
    const auto params = parameters(problem);
    if (std::none_of(params.begin(), params.end(), [&](const Parameter& p) { return p.name == name; }))
      return fmt::format("unknown parameter {}: expected ORIENT, VECS, COLS, ROW_BLOCK, ORDER", name);
  }
  DeviceInfo none;
  for (const Constraint& c : constraints(problem)) {
    if (!c.holds({config, problem, none})) {
      std::string values;
      for (const auto& u : c.uses) values += fmt::format("{}{}={}", values.empty() ? "" : ", ", u, config.at(u));
      return fmt::format("{} violates '{}' on {}", values, c.name, to_string(active_isa()));
    }
  }
  return {};
}

std::vector<Config> valid_configs(const ConvProblem& problem) {
  const auto params = parameters(problem);
  const auto rules = constraints(problem);
  // Each constraint is checked at the depth where the last parameter it uses is assigned.
  std::vector<std::vector<const Constraint*>> at_depth(params.size());
  for (const Constraint& c : rules) {
    size_t depth = 0;
    for (const std::string& u : c.uses)
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].name == u) depth = std::max(depth, i);
    at_depth[depth].push_back(&c);
  }
  const DeviceInfo none;
  std::vector<Config> out;
  Config config;
  std::function<void(size_t)> visit = [&](size_t depth) {
    if (depth == params.size()) {
      out.push_back(config);
      return;
    }
    for (int64_t v : params[depth].values) {
      config[params[depth].name] = v;
      const auto& checks = at_depth[depth];
      if (std::all_of(checks.begin(), checks.end(), [&](const Constraint* c) { return c->holds({config, problem, none}); }))
        visit(depth + 1);
    }
    config.erase(params[depth].name);
  };
  visit(0);
  return out;
}

// The prepared state behind a Convolution.
struct Plan {
  ConvProblem problem;
  Config config;
  Isa isa = Isa::Scalar;
  std::unique_ptr<detail::Strategy> strategy;
  std::vector<float> own_weights;  // pack_weights()'s copy
  bool weights_packed = false;
  StageTimes times;
};

Convolution::Convolution(const ConvProblem& problem, const Config& config) : plan_(std::make_unique<Plan>()) {
  problem.validate();
  if (const std::string why = unsupported_reason(problem); !why.empty()) throw Unsupported(why);
  if (const std::string why = invalid_reason(problem, config); !why.empty()) {
    throw InvalidArgument(fmt::format("cpu_blocked configuration for {}: {}", problem.to_string(), why));
  }
  plan_->problem = problem;
  plan_->config = config;
  plan_->isa = active_isa();
  const KernelTable& kt = detail::kernel_table(plan_->isa);
  const Choice choice = decode(config);
  plan_->strategy = is_filter(problem) ? detail::make_filter_strategy(problem, choice, kt)
                                       : detail::make_view_strategy(problem, choice, kt);
}

Convolution::~Convolution() = default;
Convolution::Convolution(Convolution&&) noexcept = default;
Convolution& Convolution::operator=(Convolution&&) noexcept = default;

size_t Convolution::workspace_bytes() const {
  // Packed weights (when not owned) and the strategy's buffers, each 64-byte aligned from an unaligned start.
  return plan_->strategy->packed_weight_floats() * sizeof(float) + plan_->strategy->workspace_bytes() + 2 * 64;
}

void Convolution::run(float* x, float* w, float* y, void* workspace) {
  using Clock = std::chrono::steady_clock;
  Plan& p = *plan_;
  StageTimes times;
  const float* packed = nullptr;
  std::byte* rest = static_cast<std::byte*>(workspace);
  const size_t packed_floats = p.strategy->packed_weight_floats();
  if (packed_floats > 0) {
    if (p.weights_packed) {
      packed = p.own_weights.data();
    } else {
      detail::Carver carver(workspace);
      float* buffer = carver.floats(packed_floats);
      const auto start = Clock::now();
      p.strategy->pack_weights(w, buffer);
      times.weights_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      packed = buffer;
    }
    rest += packed_floats * sizeof(float) + 64;
  }
  p.strategy->run(x, packed, w, y, rest, times);
  p.times = times;
}

void Convolution::pack_weights(const float* w) {
  Plan& p = *plan_;
  const size_t count = p.strategy->packed_weight_floats();
  if (count == 0) return;
  p.own_weights.assign(count, 0.0f);
  p.strategy->pack_weights(w, p.own_weights.data());
  p.weights_packed = true;
}

void Convolution::forget_weights() {
  plan_->weights_packed = false;
  plan_->own_weights.clear();
  plan_->own_weights.shrink_to_fit();
}

const StageTimes& Convolution::last_times() const { return plan_->times; }
Isa Convolution::isa() const { return plan_->isa; }
const ConvProblem& Convolution::problem() const { return plan_->problem; }

std::string Convolution::describe() const {
  return fmt::format("{}: {}", to_string(plan_->isa), plan_->strategy->describe());
}

}  // namespace convtune::cpu_blocked
