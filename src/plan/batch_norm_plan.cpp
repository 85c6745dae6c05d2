// BatchNormPlan (convtune/batch_norm.h): kernels/common/batch_norm.cl compiled once per type, layout and block, its
// six kernels launched in three steps per direction with the sizes as arguments.
#include "convtune/batch_norm.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include "convtune/error.h"
#include "src/plan/batch_norm_host.h"

namespace convtune {

namespace {

constexpr const char* kBatchNormProgram = "common/batch_norm.cl";
constexpr size_t kLocal = 256;  // BN_LOCAL
constexpr int64_t kMaxChunks = 512;
constexpr size_t kFinalChannels = 16;  // BN_FK

// Elements per access: 16 bytes where the contiguous axis (NHWC's channels, NCHW's pixels) is a multiple, else 1.
int64_t vector_width(const BatchNormProblem& p) {
  const int64_t full = 16 / bytes_per_element(p.type);
  return (p.layout == Layout::NHWC ? p.c : p.h * p.w) % full == 0 ? full : 1;
}

// NHWC: work-items across a row's channel vectors (a power of two up to 64; the rest of the group goes down rows).
int64_t channel_threads(const BatchNormProblem& p) {
  const int64_t vectors = p.c / vector_width(p);
  int64_t threads = 1;
  while (threads < vectors && threads < 64) threads *= 2;
  return threads;
}

void set_args(Kernel& kernel, const std::vector<KernelArg>& args) {
  for (size_t i = 0; i < args.size(); ++i) kernel.set_arg(static_cast<int>(i), args[i]);
}

std::string checked(const BatchNormProblem& p) {
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"n", p.n}, {"c", p.c}, {"h", p.h}, {"w", p.w}}) {
    if (value <= 0) return fmt::format("{}: expected a positive size, got {}", name, value);
  }
  if (p.n * p.h * p.w > INT32_MAX || p.c > INT32_MAX || p.elements() / p.c > INT32_MAX)
    return fmt::format("n x h x w: {} rows, more than the kernels index (at most {})", p.n * p.h * p.w, INT32_MAX);
  if (p.relu_max < 0 || (p.relu_max > 0 && !p.relu))
    return fmt::format("relu_max: expected 0, or a positive clamp with relu, got {}{}", p.relu_max,
                       p.relu ? "" : " without relu");
  return {};
}

ProgramSource program_source(const BatchNormProblem& p, bool host) {
  ProgramSource source{host ? kBatchNormHostProgram : kBatchNormProgram, {}, {}, false};
  auto& d = source.defines;
  d["VEC"] = std::to_string(vector_width(p));
  d["BN_CT"] = p.layout == Layout::NHWC ? std::to_string(channel_threads(p)) : "1";
  d["ELEM"] = p.type == ElementType::F32 ? "0" : p.type == ElementType::BF16 ? "1" : "2";
  d["LAYOUT_NHWC"] = p.layout == Layout::NHWC ? "1" : "0";
  d["HAS_RESIDUAL"] = p.residual ? "1" : "0";
  d["HAS_RELU"] = p.relu ? "1" : "0";
  d["HAS_RELU_MAX"] = p.relu && p.relu_max > 0 ? "1" : "0";
  d["RELU_MAX"] = fmt::format("{:#.9g}f", p.relu && p.relu_max > 0 ? p.relu_max : 0.0f);
  return source;
}

}  // namespace

std::string BatchNormProblem::to_string() const {
  std::string text = fmt::format("bn {} {} {}x{}x{}x{}", convtune::to_string(type), convtune::to_string(layout), n,
                                 c, h, w);
  if (residual) text += " +residual";
  if (relu) text += relu_max > 0 ? fmt::format(" +relu-max={:g}", relu_max) : std::string(" +relu");
  return text;
}

struct BatchNormPlan::Impl {
  Device* device;
  BatchNormProblem problem;
  int32_t chunks = 1;
  std::shared_ptr<Program> program;
  std::mutex lock;  // the kernels' arguments are set and launched under it
  std::unique_ptr<Kernel> forward_partial, forward_finalize, forward_apply;
  std::unique_ptr<Kernel> backward_partial, backward_finalize, backward_apply;

  int32_t rows() const { return static_cast<int32_t>(problem.n * problem.h * problem.w); }
  int32_t n() const { return static_cast<int32_t>(problem.n); }
  int32_t c() const { return static_cast<int32_t>(problem.c); }
  int32_t hw() const { return static_cast<int32_t>(problem.h * problem.w); }
  size_t partial_floats() const { return static_cast<size_t>(chunks) * 2 * static_cast<size_t>(problem.c); }
  size_t tensor_bytes() const {
    return static_cast<size_t>(problem.elements()) * static_cast<size_t>(bytes_per_element(problem.type));
  }

  // Partial-sum kernels: group axis 0 the channels (NHWC blocks of BN_CT channel vectors, NCHW one each), axis 1
  // the chunks.
  int64_t channel_groups() const {
    if (problem.layout != Layout::NHWC) return problem.c;
    const int64_t threads = channel_threads(problem), vectors = problem.c / vector_width(problem);
    return (vectors + threads - 1) / threads;
  }
  LaunchGeometry partial_geometry() const {
    LaunchGeometry g;
    g.dims = 2;
    g.global = {static_cast<size_t>(channel_groups()) * kLocal, static_cast<size_t>(chunks), 1};
    g.local = {kLocal, 1, 1};
    return g;
  }
  LaunchGeometry finalize_geometry() const {  // a work-group per kFinalChannels channels (BN_FK)
    LaunchGeometry g;
    g.global = {(static_cast<size_t>(problem.c) + kFinalChannels - 1) / kFinalChannels * kLocal, 1, 1};
    g.local = {kLocal, 1, 1};
    return g;
  }
  LaunchGeometry elementwise_geometry() const {  // a grid-stride loop, two vectors a work-item where it fills
    LaunchGeometry g;
    const int64_t vectors = problem.elements() / vector_width(problem);
    const int64_t groups = std::clamp<int64_t>((vectors + 2 * kLocal - 1) / (2 * kLocal), 1, 32768);
    g.global = {static_cast<size_t>(groups) * kLocal, 1, 1};
    g.local = {kLocal, 1, 1};
    return g;
  }

  void check(const Buffer* buffer, const char* name, size_t bytes) const {
    if (buffer == nullptr) throw InvalidArgument(fmt::format("{}: {}: expected a buffer, got none", problem.to_string(),
                                                             name));
    if (buffer->bytes() < bytes)
      throw InvalidArgument(fmt::format("{}: {} holds {} bytes, expected at least {}", problem.to_string(), name,
                                        buffer->bytes(), bytes));
  }
  void check_eps(float eps) const {
    if (!(eps > 0))
      throw InvalidArgument(fmt::format("{}: eps: expected a positive number, got {}", problem.to_string(), eps));
  }
  size_t workspace_bytes() const {
    return (partial_floats() + 3 * static_cast<size_t>(problem.c)) * sizeof(float);
  }
};

BatchNormPlan::BatchNormPlan(Device& device, const BatchNormProblem& problem) : impl_(std::make_unique<Impl>()) {
  const std::string why = checked(problem);
  if (!why.empty()) throw InvalidArgument("batch norm " + why);
  Impl& m = *impl_;
  m.device = &device;
  m.problem = problem;
  const DeviceInfo& info = device.info();
  const bool host = info.backend == BackendKind::Cpu;
  if (host) register_batch_norm_host_program();
  // Enough work-groups for the device (eight per compute unit), each work-item visiting at least four vectors or rows,
  // and at most kMaxChunks for the finalize steps to sum.
  const int64_t wanted = std::max<int64_t>(1, 8 * std::max(info.compute_units, 1) / m.channel_groups());
  const int64_t visits = problem.layout == Layout::NHWC
                             ? m.rows() / (4 * (static_cast<int64_t>(kLocal) / channel_threads(problem)))
                             : m.rows() / vector_width(problem) / (4 * static_cast<int64_t>(kLocal));
  m.chunks = static_cast<int32_t>(std::clamp<int64_t>(wanted, 1, std::clamp<int64_t>(visits, 1, kMaxChunks)));
  m.program = device.build(program_source(problem, host));
  m.forward_partial = m.program->kernel("bn_forward_partial");
  m.forward_finalize = m.program->kernel("bn_forward_finalize");
  m.forward_apply = m.program->kernel("bn_forward_apply");
  m.backward_partial = m.program->kernel("bn_backward_partial");
  m.backward_finalize = m.program->kernel("bn_backward_finalize");
  m.backward_apply = m.program->kernel("bn_backward_apply");
}

BatchNormPlan::~BatchNormPlan() = default;
BatchNormPlan::BatchNormPlan(BatchNormPlan&&) noexcept = default;
BatchNormPlan& BatchNormPlan::operator=(BatchNormPlan&&) noexcept = default;

const BatchNormProblem& BatchNormPlan::problem() const { return impl_->problem; }
size_t BatchNormPlan::workspace_bytes() const { return impl_->workspace_bytes(); }

void BatchNormPlan::forward(Queue& queue, const BatchNormForward& f, const Buffer& workspace) const {
  Impl& m = *impl_;
  const size_t t = m.tensor_bytes(), v = static_cast<size_t>(m.problem.c) * sizeof(float);
  m.check(f.y, "y", t);
  m.check(f.gamma, "gamma", v);
  m.check(f.beta, "beta", v);
  if (m.problem.residual) m.check(f.residual, "residual", t);
  m.check(f.stats, "stats", 2 * v);
  m.check(f.a, "a", t);
  m.check(&workspace, "workspace", m.workspace_bytes());
  m.check_eps(f.eps);
  const bool running = f.running_mean != nullptr || f.running_var != nullptr;
  if (running) {
    m.check(f.running_mean, "running_mean", v);
    m.check(f.running_var, "running_var", v);
    if (!(f.momentum >= 0 && f.momentum <= 1))
      throw InvalidArgument(fmt::format("{}: momentum: expected a number from 0 to 1, got {}", m.problem.to_string(),
                                        f.momentum));
    if (m.rows() < 2)
      throw InvalidArgument(fmt::format("{}: running statistics need more than one value per channel, got {}",
                                        m.problem.to_string(), m.rows()));
  }
  const int32_t n = m.n(), c = m.c(), hw = m.hw();
  std::lock_guard<std::mutex> held(m.lock);
  set_args(*m.forward_partial, {f.y, &workspace, n, c, hw, m.chunks});
  queue.launch(*m.forward_partial, m.partial_geometry());
  // Without running statistics their arguments are the stats buffer, never written through them (update 0).
  const Buffer* running_mean = running ? f.running_mean : f.stats;
  const Buffer* running_var = running ? f.running_var : f.stats;
  const float factor = running ? f.momentum : 0.0f;
  const int32_t update = running ? 1 : 0;
  set_args(*m.forward_finalize, {f.y, f.gamma, f.beta, f.stats, &workspace, running_mean, running_var, n, c, hw,
                                 m.chunks, f.eps, factor, update});
  queue.launch(*m.forward_finalize, m.finalize_geometry());
  std::vector<KernelArg> args{f.y, &workspace};
  if (m.problem.residual) args.emplace_back(f.residual);
  args.insert(args.end(), {f.a, static_cast<int64_t>(m.problem.elements()), c, hw, m.chunks});
  set_args(*m.forward_apply, args);
  queue.launch(*m.forward_apply, m.elementwise_geometry());
}

void BatchNormPlan::backward(Queue& queue, const BatchNormBackward& b, const Buffer& workspace) const {
  Impl& m = *impl_;
  const size_t t = m.tensor_bytes(), v = static_cast<size_t>(m.problem.c) * sizeof(float);
  m.check(b.da, "da", t);
  m.check(b.a, "a", t);
  m.check(b.y, "y", t);
  m.check(b.stats, "stats", 2 * v);
  m.check(b.gamma, "gamma", v);
  m.check(b.dy, "dy", t);
  m.check(b.dgamma, "dgamma", v);
  m.check(b.dbeta, "dbeta", v);
  if (m.problem.residual) m.check(b.dresidual, "dresidual", t);
  m.check(&workspace, "workspace", m.workspace_bytes());
  m.check_eps(b.eps);
  const int32_t n = m.n(), c = m.c(), hw = m.hw();
  std::lock_guard<std::mutex> held(m.lock);
  set_args(*m.backward_partial, {b.da, b.a, b.y, b.stats, &workspace, n, c, hw, m.chunks});
  queue.launch(*m.backward_partial, m.partial_geometry());
  set_args(*m.backward_finalize, {b.stats, b.gamma, b.dgamma, b.dbeta, &workspace, n, c, hw, m.chunks, b.eps});
  queue.launch(*m.backward_finalize, m.finalize_geometry());
  std::vector<KernelArg> args{b.da, b.a, b.y, b.stats, &workspace, b.dy};
  if (m.problem.residual) args.emplace_back(b.dresidual);
  args.insert(args.end(), {static_cast<int64_t>(m.problem.elements()), c, hw, m.chunks});
  set_args(*m.backward_apply, args);
  queue.launch(*m.backward_apply, m.elementwise_geometry());
}

}  // namespace convtune
