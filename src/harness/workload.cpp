// Workload: seeded operands on a device, poison, read-back, canaries and checks against the float64 reference.
#include "src/harness/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "convtune/error.h"
#include "convtune/rounding.h"
#include "src/backend/cpu/reference.h"
#include "src/core/parallel_for.h"

namespace convtune::harness {

namespace {

constexpr float kCanary = 1234.5678f;

// `values` as the device stores elements of `type` (16-bit types as bit patterns).
std::vector<unsigned char> encoded(ElementType type, const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * static_cast<size_t>(bytes_per_element(type)));
  encode_elements(type, values.data(), bytes.data(), values.size());
  return bytes;
}

}  // namespace

double tolerance(const Problem& problem) {
  const double length = static_cast<double>(std::max<int64_t>(1, problem.reduction_length()));
  if (problem.type() != ElementType::F32) {
    // 16-bit tensors: the inputs the reference sees are the 16-bit values themselves, and products of two are exact
    // in FP32, so what is left is the output's one rounding to the type (at most its unit roundoff per element; twice
    // that allowed) and the FP32 sum. Tensor cores accumulate FP32 truncating (rounding toward zero), so that sum's
    // error may grow with the reduction length itself rather than its square root: 2^-24 * length on top of the
    // FP32 direct-sum term.
    const double fp32 = std::ldexp(1.0, -24);
    return 2 * unit_roundoff(problem.type(), problem.math()) + 8 * fp32 * std::sqrt(length) + fp32 * length;
  }
  return std::max(1e-6, 8.0 * unit_roundoff(problem.type(), problem.math()) * std::sqrt(length));
}

std::vector<float> random_values(int64_t count, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (float& f : v) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    f = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    err2 += d * d;
    ref2 += static_cast<double>(b[i]) * b[i];
  }
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

struct Workload::Sampled {
  int samples = 0;
  std::vector<int64_t> positions;  // logical output elements
  std::vector<double> expected;
};

Workload::Workload(Device& device, const Problem& problem, uint64_t seed)
    : device_(&device), problem_(problem), seed_(seed) {
  problem_.validate();
  Queue& q = queue();
  const ElementType type = problem_.type();
  const std::vector<unsigned char> canaries = encoded(type, std::vector<float>(kCanaries, kCanary));
  for (int i = 0; i < Problem::kOperands; ++i) {
    const int64_t count = problem_.operand(i).elements;
    // Values a 16-bit tensor can hold, so the float64 reference sees exactly what the device reads.
    host_.push_back(random_values(count, seed * 3 + static_cast<uint64_t>(i) + 1));
    round_to_type(type, host_.back().data(), host_.back().size());
    const std::vector<unsigned char> bytes = encoded(type, host_.back());
    buffers_.push_back(device.allocate(bytes.size() + canaries.size()));
    q.write(*buffers_.back(), bytes.data(), bytes.size());
    q.write(*buffers_.back(), canaries.data(), canaries.size(), bytes.size());
  }
  q.finish();
}

Workload::Workload(Device& device, const Problem& problem, uint64_t seed, const Epilogue& epilogue)
    : Workload(device, problem, seed) {
  if (!epilogue.any()) return;
  if (!problem_.is_conv() || problem_.conv().direction != Direction::Forward || epilogue.pool > 1) {
    throw InvalidArgument(fmt::format("a workload's epilogue ({}) needs a forward convolution and no pooling, not {}",
                                      to_string(epilogue), problem_.to_string()));
  }
  epilogue_ = epilogue;
  Queue& q = queue();
  const ConvProblem& pb = problem_.conv();
  if (epilogue.bias) {
    bias_ = random_values(pb.k, seed * 3 + 11);
    bias_buffer_ = device.allocate(bias_.size() * sizeof(float));
    q.write(*bias_buffer_, bias_.data(), bias_.size() * sizeof(float));
  }
  if (epilogue.residual) {
    residual_ = random_values(pb.y_elements(), seed * 3 + 13);
    round_to_type(problem_.type(), residual_.data(), residual_.size());
    const std::vector<unsigned char> bytes = encoded(problem_.type(), residual_);
    residual_buffer_ = device.allocate(bytes.size());
    q.write(*residual_buffer_, bytes.data(), bytes.size());
  }
  q.finish();
}

Workload::~Workload() = default;

Operands Workload::operands() const {
  return {buffers_[0].get(), buffers_[1].get(), buffers_[2].get(), bias_buffer_.get(), residual_buffer_.get()};
}

double Workload::with_epilogue(double sum, int64_t i) const {
  double v = sum;
  if (!epilogue_.any()) return v;
  const ConvProblem& pb = problem_.conv();
  if (epilogue_.bias) v += bias_[static_cast<size_t>((i / (pb.p() * pb.q())) % pb.k)];
  if (epilogue_.residual) v += residual_[static_cast<size_t>(cpu::output_offset(problem_, i))];
  if (epilogue_.relu) v = std::max(v, 0.0);
  if (epilogue_.relu && epilogue_.relu_max > 0) v = std::min(v, static_cast<double>(epilogue_.relu_max));
  return v;
}

size_t Workload::operand_bytes(int operand) const {
  return host_[static_cast<size_t>(operand)].size() * static_cast<size_t>(bytes_per_element(problem_.type()));
}

void Workload::poison() {
  const int written = problem_.written_operand();
  const OperandInfo info = problem_.operand(written);
  const std::vector<float>& initial = host_[static_cast<size_t>(written)];
  const std::vector<unsigned char> bytes =
      encoded(problem_.type(), info.read ? initial
                                         : std::vector<float>(initial.size(), std::numeric_limits<float>::quiet_NaN()));
  queue().write(*buffers_[static_cast<size_t>(written)], bytes.data(), bytes.size());
}

std::vector<float> Workload::output() {
  const int written = problem_.written_operand();
  std::vector<unsigned char> bytes(operand_bytes(written));
  queue().read(*buffers_[static_cast<size_t>(written)], bytes.data(), bytes.size());
  std::vector<float> out(host_[static_cast<size_t>(written)].size());
  decode_elements(problem_.type(), bytes.data(), out.data(), out.size());
  return out;
}

void Workload::check_canaries() {
  const ElementType type = problem_.type();
  const std::vector<unsigned char> want = encoded(type, std::vector<float>(kCanaries, kCanary));
  std::vector<unsigned char> got(want.size());
  const size_t element = static_cast<size_t>(bytes_per_element(type));
  for (int i = 0; i < Problem::kOperands; ++i) {
    queue().read(*buffers_[static_cast<size_t>(i)], got.data(), got.size(), operand_bytes(i));
    for (size_t c = 0; c < kCanaries; ++c) {
      if (std::memcmp(&got[c * element], &want[c * element], element) != 0) {
        float value = 0;
        decode_elements(type, &got[c * element], &value, 1);
        throw Error(fmt::format("canary {} after operand {} overwritten ({}): out-of-bounds write", c,
                                problem_.operand(i).name, value));
      }
    }
  }
}

Check Workload::compare(const std::vector<float>& out, const std::vector<int64_t>& positions,
                        const std::vector<double>& want, double tol, const char* what) const {
  Check res;
  double err2 = 0, ref2 = 0;
  for (size_t k = 0; k < positions.size(); ++k) {
    const int64_t i = positions[k];
    const int64_t offset = cpu::output_offset(problem_, i);
    const double got = out.at(static_cast<size_t>(offset));
    if (!std::isfinite(got)) {
      res.message = fmt::format("element {} is {} (never written, or overflow)", offset, got);
      return res;
    }
    err2 += (got - want[k]) * (got - want[k]);
    ref2 += want[k] * want[k];
    res.max_abs_error = std::max(res.max_abs_error, std::abs(got - want[k]));
  }
  res.rel_l2_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  res.passed = res.rel_l2_error <= tol;
  res.message = fmt::format("{}: rel L2 error {:.2e} (tolerance {:.2e}), max abs error {:.2e}", what, res.rel_l2_error,
                            tol, res.max_abs_error);
  return res;
}

Check Workload::verify_sampled(const std::vector<float>& out, int samples, std::optional<double> tol) {
  if (!sampled_ || sampled_->samples != samples) {
    auto s = std::make_unique<Sampled>();
    s->samples = samples;
    const int64_t count = cpu::output_count(problem_);
    s->positions = {0, count - 1};  // the corners catch edge-tile mistakes
    uint64_t state = seed_ | 1;
    for (int i = 0; i < samples; ++i) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
      s->positions.push_back(static_cast<int64_t>(state % static_cast<uint64_t>(count)));
    }
    cpu::HostOperands op;
    for (int i = 0; i < Problem::kOperands; ++i) op.data[static_cast<size_t>(i)] = const_cast<float*>(host_[static_cast<size_t>(i)].data());
    for (int64_t i : s->positions) s->expected.push_back(with_epilogue(cpu::reference_element(problem_, op, i), i));
    sampled_ = std::move(s);
  }
  return compare(out, sampled_->positions, sampled_->expected, tol.value_or(tolerance(problem_)),
                 fmt::format("{} sampled elements", sampled_->positions.size()).c_str());
}

Check Workload::verify_full(const std::vector<float>& out, std::optional<double> tol) {
  const int64_t count = cpu::output_count(problem_);
  if (full_reference_.empty()) {
    cpu::HostOperands op;
    for (int i = 0; i < Problem::kOperands; ++i) op.data[static_cast<size_t>(i)] = const_cast<float*>(host_[static_cast<size_t>(i)].data());
    full_reference_.resize(static_cast<size_t>(count));
    const int64_t chunk = 256;
    parallel_for((count + chunk - 1) / chunk, hardware_threads(), [&](int64_t block) {
      for (int64_t i = block * chunk; i < std::min(count, (block + 1) * chunk); ++i)
        full_reference_[static_cast<size_t>(i)] = with_epilogue(cpu::reference_element(problem_, op, i), i);
    });
  }
  std::vector<int64_t> positions(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) positions[static_cast<size_t>(i)] = i;
  return compare(out, positions, full_reference_, tol.value_or(tolerance(problem_)), "all elements");
}

Check Workload::verify_sampled(int samples, std::optional<double> tol) {
  check_canaries();
  return verify_sampled(output(), samples, tol);
}

Check Workload::verify_full(std::optional<double> tol) {
  check_canaries();
  return verify_full(output(), tol);
}

}  // namespace convtune::harness
