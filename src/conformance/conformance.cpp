// Conformance checks: poisoned outputs, canaries, relative-L2 tolerance by precision, adjoint identity.
#include "src/conformance/conformance.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "convtune/error.h"
#include "src/backend/cpu/reference_convolution.h"

namespace convtune::conformance {

namespace {

constexpr int kCanaryCount = 64;
constexpr float kCanary = 1234.5678f;

double unit_roundoff(Precision p) {
  switch (p) {
    case Precision::FP32: return std::ldexp(1.0, -24);
    case Precision::TF32: return std::ldexp(1.0, -11);
    case Precision::FP16: return std::ldexp(1.0, -11);
    case Precision::BF16: return std::ldexp(1.0, -8);
  }
  return 1e-3;
}

std::vector<float> random_vector(int64_t count, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  // splitmix64 -> uniform [-1, 1): cheap, reproducible, never all zero.
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

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

std::unique_ptr<HostConvolution> reference() { return make_cpu_convolution("reference"); }

}  // namespace

int64_t reduction_length(const ConvProblem& pb) {
  switch (pb.direction) {
    case Direction::Forward: return pb.c_per_group() * pb.r * pb.s;
    case Direction::BackwardData: return pb.k_per_group() * pb.r * pb.s;
    case Direction::BackwardFilter: return pb.n * pb.p() * pb.q();
  }
  return 1;
}

double tolerance(const ConvProblem& pb) {
  const double len = static_cast<double>(std::max<int64_t>(1, reduction_length(pb)));
  return std::max(1e-6, 8.0 * unit_roundoff(pb.precision) * std::sqrt(len));
}

Inputs make_inputs(const ConvProblem& pb, uint64_t seed) {
  Inputs in;
  in.x = random_vector(pb.x_elements(), seed * 3 + 1);
  in.w = random_vector(pb.w_elements(), seed * 3 + 2);
  in.y = random_vector(pb.y_elements(), seed * 3 + 3);
  std::vector<float> x = in.x, w = in.w, y = in.y;
  reference()->run(pb, {x.data(), w.data(), y.data()});
  switch (pb.direction) {
    case Direction::Forward: in.expected = y; break;
    case Direction::BackwardData: in.expected = x; break;
    case Direction::BackwardFilter: in.expected = w; break;
  }
  return in;
}

Result check(HostConvolution& impl, const ConvProblem& pb, const Inputs& inputs) {
  const int64_t count = pb.written_elements();
  // Copies with room for canaries after each operand; the written one is poisoned with NaN.
  auto with_canaries = [&](const std::vector<float>& src, bool written) {
    std::vector<float> v(src.size() + kCanaryCount, kCanary);
    if (written) std::fill(v.begin(), v.begin() + static_cast<long>(src.size()), std::numeric_limits<float>::quiet_NaN());
    else std::memcpy(v.data(), src.data(), src.size() * sizeof(float));
    return v;
  };
  std::vector<float> x = with_canaries(inputs.x, pb.direction == Direction::BackwardData);
  std::vector<float> w = with_canaries(inputs.w, pb.direction == Direction::BackwardFilter);
  std::vector<float> y = with_canaries(inputs.y, pb.direction == Direction::Forward);
  Result res;
  try {
    impl.run(pb, {x.data(), w.data(), y.data()});
  } catch (const std::exception& e) {
    res.message = fmt::format("threw: {}", e.what());
    return res;
  }
  const std::vector<float>& out = pb.direction == Direction::Forward ? y : pb.direction == Direction::BackwardData ? x : w;
  for (const auto* v : {&x, &w, &y}) {
    const size_t n = v->size() - kCanaryCount;
    for (size_t i = n; i < v->size(); ++i) {
      if (std::memcmp(&(*v)[i], &kCanary, sizeof(float)) != 0) {
        const char* which = v == &x ? "x" : v == &w ? "w" : "y";
        res.message = fmt::format("canary {} after operand {} overwritten: out-of-bounds write", i - n, which);
        return res;
      }
    }
  }
  double err2 = 0, ref2 = 0;
  int64_t first_bad = -1;
  for (int64_t i = 0; i < count; ++i) {
    const double a = out[static_cast<size_t>(i)], b = inputs.expected[static_cast<size_t>(i)];
    if (!std::isfinite(a)) {
      if (first_bad < 0) first_bad = i;
      continue;
    }
    err2 += (a - b) * (a - b);
    ref2 += b * b;
    res.max_abs_error = std::max(res.max_abs_error, std::abs(a - b));
  }
  if (first_bad >= 0) {
    res.message = fmt::format("element {} is {} (never written, or overflow)", first_bad, out[static_cast<size_t>(first_bad)]);
    return res;
  }
  res.rel_l2_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  const double tol = tolerance(pb);
  res.passed = res.rel_l2_error <= tol;
  res.message = fmt::format("rel L2 error {:.2e} (tolerance {:.2e}), max abs error {:.2e}", res.rel_l2_error, tol,
                            res.max_abs_error);
  return res;
}

SampledReference::SampledReference(const ConvProblem& pb, const ConvOperands& inputs, int samples, uint64_t seed)
    : problem_(pb) {
  const int64_t count = pb.written_elements();
  positions_ = {0, count - 1};  // the corners catch edge-tile mistakes
  uint64_t state = seed | 1;
  for (int i = 0; i < samples; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    positions_.push_back(static_cast<int64_t>(state % static_cast<uint64_t>(count)));
  }
  expected_.reserve(positions_.size());
  for (int64_t i : positions_) expected_.push_back(cpu::reference_element(pb, inputs, i));
}

Result SampledReference::check(const float* out) const {
  Result res;
  double err2 = 0, ref2 = 0;
  for (size_t k = 0; k < positions_.size(); ++k) {
    const int64_t i = positions_[k];
    const double want = expected_[k], got = out[i];
    if (!std::isfinite(got)) {
      res.message = fmt::format("element {} is {}", i, got);
      return res;
    }
    err2 += (got - want) * (got - want);
    ref2 += want * want;
    res.max_abs_error = std::max(res.max_abs_error, std::abs(got - want));
  }
  res.rel_l2_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  res.passed = res.rel_l2_error <= tolerance(problem_);
  res.message = fmt::format("{} sampled elements: rel L2 error {:.2e} (tolerance {:.2e})", positions_.size(),
                            res.rel_l2_error, tolerance(problem_));
  return res;
}

Result check_sampled(const ConvProblem& pb, const ConvOperands& operands, int samples, uint64_t seed) {
  return SampledReference(pb, operands, samples, seed).check(cpu::written_operand(pb, operands));
}

Result check_adjoint(HostConvolution& impl, const ConvProblem& problem, uint64_t seed) {
  const ConvProblem fwd = problem.with_direction(Direction::Forward);
  const std::vector<float> x = random_vector(fwd.x_elements(), seed * 5 + 1);
  const std::vector<float> w = random_vector(fwd.w_elements(), seed * 5 + 2);
  const std::vector<float> dy = random_vector(fwd.y_elements(), seed * 5 + 3);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
  std::vector<float> xc = x, wc = w, dyc = dy;
  Result res;
  try {
    impl.run(fwd, {xc.data(), wc.data(), y.data()});
    impl.run(problem.with_direction(Direction::BackwardData), {dx.data(), wc.data(), dyc.data()});
    impl.run(problem.with_direction(Direction::BackwardFilter), {xc.data(), dw.data(), dyc.data()});
  } catch (const std::exception& e) {
    res.message = fmt::format("threw: {}", e.what());
    return res;
  }
  const double a = dot(y, dy), b = dot(x, dx), c = dot(w, dw);
  // Scale by the sum of |terms| so the check is relative to the magnitude actually summed.
  double scale = 0;
  for (size_t i = 0; i < y.size(); ++i) scale += std::abs(static_cast<double>(y[i]) * dy[i]);
  scale = std::max(scale, 1e-30);
  const double tol = 4 * tolerance(fwd);
  const double e1 = std::abs(a - b) / scale, e2 = std::abs(a - c) / scale;
  res.rel_l2_error = std::max(e1, e2);
  res.passed = std::isfinite(a) && std::isfinite(b) && std::isfinite(c) && res.rel_l2_error <= tol;
  res.message = fmt::format("<fwd,dy>={:.6g} <x,bwd_data>={:.6g} <w,bwd_filter>={:.6g}, rel diff {:.2e} (tolerance {:.2e})",
                            a, b, c, res.rel_l2_error, tol);
  return res;
}

Summary run(const std::vector<Target>& targets, const std::vector<Case>& cases, uint64_t seed, std::ostream* log) {
  Summary sum;
  std::vector<std::unique_ptr<HostConvolution>> impls;
  for (const auto& t : targets) impls.push_back(t.make());
  uint64_t case_seed = seed;
  for (const Case& c : cases) {
    ++case_seed;
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter}) {
      const ConvProblem pb = c.problem.with_direction(d);
      const Inputs inputs = make_inputs(pb, case_seed);
      for (size_t t = 0; t < targets.size(); ++t) {
        if (const std::string why = impls[t]->unsupported_reason(pb); !why.empty()) {
          ++sum.skipped;
          continue;
        }
        ++sum.checks;
        const Result r = check(*impls[t], pb, inputs);
        const std::string line = fmt::format("{} {} {} {}: {}", r.passed ? "ok  " : "FAIL", targets[t].name, c.name,
                                             to_string(d), r.message);
        if (r.passed) ++sum.passed;
        else sum.failures.push_back(line);
        if (log && !r.passed) *log << line << "\n";
      }
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      if (!impls[t]->unsupported_reason(c.problem).empty()) continue;
      ++sum.checks;
      const Result r = check_adjoint(*impls[t], c.problem, case_seed);
      if (r.passed) ++sum.passed;
      else sum.failures.push_back(fmt::format("FAIL {} {} adjoint: {}", targets[t].name, c.name, r.message));
    }
    if (log) *log << fmt::format("conformance: {:<32} checked ({} checks so far, {} failed)\n", c.name, sum.checks, sum.failures.size());
  }
  return sum;
}

}  // namespace convtune::conformance
