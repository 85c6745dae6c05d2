// Stop rules and their descriptions.
#include "src/tuner/stop_condition.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "convtune/error.h"

namespace convtune {

namespace {

size_t fraction_count(double fraction, size_t space_size) {
  // A tiny epsilon so 0.1 * 1000 (which is 100.00000000000001 in binary) stops at 100, not 101.
  const double wanted = std::ceil(fraction * static_cast<double>(space_size) - 1e-9);
  return std::max<size_t>(1, static_cast<size_t>(wanted));
}

std::string seconds_text(std::chrono::nanoseconds d) {
  const double seconds = std::chrono::duration<double>(d).count();
  return seconds >= 100 ? fmt::format("{:.0f} s", seconds) : fmt::format("{:.3g} s", seconds);
}

}  // namespace

StopCondition StopCondition::after_candidates(size_t count) {
  if (count == 0) throw InvalidArgument("stop after 0 candidates is invalid: expected at least 1");
  StopCondition s;
  s.kind_ = Kind::Candidates;
  s.count_ = count;
  return s;
}

StopCondition StopCondition::after_fraction(double fraction) {
  if (!(fraction > 0 && fraction <= 1))
    throw InvalidArgument(fmt::format("stop after fraction {} of the space is invalid: expected (0, 1]", fraction));
  StopCondition s;
  s.kind_ = Kind::Fraction;
  s.fraction_ = fraction;
  return s;
}

StopCondition StopCondition::after_time(std::chrono::nanoseconds budget) {
  if (budget.count() <= 0) throw InvalidArgument("a tuning time budget must be positive");
  StopCondition s;
  s.kind_ = Kind::Time;
  s.budget_ = budget;
  return s;
}

StopCondition StopCondition::any_of(std::vector<StopCondition> conditions) {
  StopCondition s;
  s.kind_ = Kind::AnyOf;
  s.any_of_ = std::move(conditions);
  return s;
}

std::optional<std::string> StopCondition::reason_to_stop(const TuneProgress& progress) const {
  switch (kind_) {
    case Kind::Never: return std::nullopt;
    case Kind::Candidates:
      if (progress.measured >= count_) return fmt::format("reached {} candidates", count_);
      return std::nullopt;
    case Kind::Fraction: {
      const size_t limit = fraction_count(fraction_, progress.space_size);
      if (progress.measured >= limit)
        return fmt::format("reached {:g}% of the space ({} of {} configurations)", fraction_ * 100, limit,
                           progress.space_size);
      return std::nullopt;
    }
    case Kind::Time:
      if (progress.elapsed >= budget_) return fmt::format("time budget of {} used", seconds_text(budget_));
      return std::nullopt;
    case Kind::AnyOf:
      for (const StopCondition& c : any_of_)
        if (auto reason = c.reason_to_stop(progress)) return reason;
      return std::nullopt;
  }
  return std::nullopt;
}

std::string StopCondition::describe() const {
  switch (kind_) {
    case Kind::Never: return "the whole space";
    case Kind::Candidates: return fmt::format("{} candidates", count_);
    case Kind::Fraction: return fmt::format("{:g}% of the space", fraction_ * 100);
    case Kind::Time: return seconds_text(budget_);
    case Kind::AnyOf: {
      if (any_of_.empty()) return "the whole space";
      std::vector<std::string> parts;
      for (const StopCondition& c : any_of_) parts.push_back(c.describe());
      return fmt::format("{}", fmt::join(parts, " or "));
    }
  }
  return "?";
}

}  // namespace convtune
