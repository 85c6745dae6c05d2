// harness::time_in_rounds, the side-by-side timing of bench --against and cpu_blocked_sweep: the order of the
// runs, the untimed runs before each timed one, the spin-down after a side that leaves spinning threads, and a
// side that throws.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "src/harness/implementation.h"

namespace convtune::harness {
namespace {

// A side that logs each run as its letter ('a', 'b', ...) and each timed run as the upper-case letter; a timed
// run reads `ms` on its clock.
RoundSide logging_side(std::string& log, char letter, double ms, bool settle_after = false) {
  RoundSide side;
  side.run = [&log, letter] { log += letter; };
  side.time = [&log, letter, ms](const std::function<void()>&) {
    log += static_cast<char>(letter - 'a' + 'A');
    return ms;
  };
  side.settle_after = settle_after;
  return side;
}

TEST(TimeInRounds, TimedRunsAlternateEachPrecededByAnUntimedOneBelow50Ms) {
  std::string log;
  std::vector<RoundSide> sides = {logging_side(log, 'a', 1.0), logging_side(log, 'b', 2.0)};
  time_in_rounds(sides, 2, 3);
  EXPECT_EQ(log, "aabb" "aAbB" "aAbB" "aAbB");
  EXPECT_EQ(sides[0].samples, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(sides[1].samples, (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_DOUBLE_EQ(median_ms(sides[1].samples), 2.0);
}

TEST(TimeInRounds, LongRunsAreNotRewarmedAfterTheFirstRound) {
  std::string log;
  std::vector<RoundSide> sides = {logging_side(log, 'a', 80.0), logging_side(log, 'b', 300.0)};
  time_in_rounds(sides, 0, 3);
  EXPECT_EQ(log, "aAbB" "AB" "AB");
}

TEST(TimeInRounds, TheSideAfterASpinningOneRunsUntimedFor50MsFirst) {
  using Clock = std::chrono::steady_clock;
  std::string log;
  std::vector<RoundSide> sides = {logging_side(log, 'a', 1.0), logging_side(log, 'b', 1.0, /*settle_after=*/true)};
  // When b's timed runs ended and a's began.
  std::vector<Clock::time_point> b_ended, a_timed;
  sides[0].run = [&log] {
    log += 'a';
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  sides[0].time = [&log, &a_timed](const std::function<void()>&) {
    log += 'A';
    a_timed.push_back(Clock::now());
    return 1.0;
  };
  sides[1].time = [&log, &b_ended](const std::function<void()>&) {
    log += 'B';
    b_ended.push_back(Clock::now());
    return 1.0;
  };
  time_in_rounds(sides, 0, 2);
  // Round 1: 'a' once (nothing spun before it), then 'b'; round 2: 'a' untimed, over and over, for 50 ms after 'b'.
  ASSERT_EQ(a_timed.size(), 2u);
  ASSERT_EQ(b_ended.size(), 2u);
  EXPECT_EQ(log.substr(0, 4), "aAbB");
  const double gap_ms = std::chrono::duration<double, std::milli>(a_timed[1] - b_ended[0]).count();
  EXPECT_GE(gap_ms, 50.0);
  const std::string round2 = log.substr(4);
  EXPECT_GE(round2.find('A'), 2u) << round2;  // several untimed runs, not one long wait
  EXPECT_EQ(round2.substr(round2.find('A')), "AbB");
}

TEST(TimeInRounds, ASideThatThrowsLeavesTheRoundsWithItsReason) {
  std::string log;
  std::vector<RoundSide> sides = {logging_side(log, 'a', 1.0), logging_side(log, 'b', 1.0)};
  int runs = 0;
  sides[1].run = [&runs] {
    if (++runs == 3) throw std::runtime_error("out of workspace");
  };
  time_in_rounds(sides, 1, 4);
  EXPECT_EQ(sides[0].samples.size(), 4u);
  EXPECT_EQ(sides[1].failure, "out of workspace");
  EXPECT_EQ(sides[1].samples.size(), 1u);
}

}  // namespace
}  // namespace convtune::harness
