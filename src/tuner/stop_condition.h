// StopCondition: when a tuning run stops — after a number of candidates, a fraction of the space, a wall-time
// budget, or whichever of several comes first.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace convtune {

// Where a tuning run stands when it asks whether to go on.
struct TuneProgress {
  size_t measured = 0;    // candidates evaluated so far, failures included (they cost a compile too)
  size_t space_size = 0;  // valid configurations in the space
  std::chrono::nanoseconds elapsed{0};
};

class StopCondition {
 public:
  // Never stops by itself: the run ends when the searcher runs out of configurations.
  StopCondition() = default;

  static StopCondition after_candidates(size_t count);
  // ceil(fraction * space size) candidates, at least one; fraction in (0, 1].
  static StopCondition after_fraction(double fraction);
  // Checked before each candidate, so the candidate running when the budget ends still completes.
  static StopCondition after_time(std::chrono::nanoseconds budget);
  static StopCondition any_of(std::vector<StopCondition> conditions);

  // Why the run should stop now ("reached 20 candidates"), or nullopt to go on.
  std::optional<std::string> reason_to_stop(const TuneProgress& progress) const;
  bool should_stop(const TuneProgress& progress) const { return reason_to_stop(progress).has_value(); }
  std::string describe() const;  // "20 candidates or 10% of the space or 30 s"

 private:
  enum class Kind { Never, Candidates, Fraction, Time, AnyOf };
  Kind kind_ = Kind::Never;
  size_t count_ = 0;
  double fraction_ = 0;
  std::chrono::nanoseconds budget_{0};
  std::vector<StopCondition> any_of_;
};

}  // namespace convtune
