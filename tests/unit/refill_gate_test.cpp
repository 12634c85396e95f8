// The rule for when prepared sessions are refilled (sessions/refill_gate.hpp), with exact times:
// after clients paused, or after the bound when they never do; never before either.
#include "sessions/refill_gate.hpp"

#include <gtest/gtest.h>

namespace corral {
namespace {

using namespace std::chrono_literals;
using Clock = RefillGate::Clock;

constexpr RefillGate kGate{5ms, 250ms};
const Clock::time_point t0 = Clock::time_point{} + 1000s;

TEST(RefillGate, WaitsUntilClientsHavePausedForTheQuietTime) {
    // Wanted at t0, last request 1 ms ago: 4 ms more.
    EXPECT_EQ(kGate.wait(t0 + 10ms, t0 + 9ms, t0), 4ms);
    // Quiet already: now.
    EXPECT_EQ(kGate.wait(t0 + 10ms, t0 + 5ms, t0), Clock::duration::zero());
    EXPECT_EQ(kGate.wait(t0 + 10ms, t0 - 1s, t0), Clock::duration::zero());
    // Nobody asked anything yet (a daemon that just started): now.
    EXPECT_EQ(kGate.wait(t0, Clock::time_point{}, t0), Clock::duration::zero());
}

TEST(RefillGate, AClientThatNeverPausesWaitsNoLongerThanTheBound) {
    // A request every millisecond: the quiet time is never reached, the bound is.
    for (auto now = t0; now < t0 + 250ms; now += 1ms)
        EXPECT_GT(kGate.wait(now, now, t0), Clock::duration::zero()) << (now - t0).count();
    EXPECT_EQ(kGate.wait(t0 + 250ms, t0 + 250ms, t0), Clock::duration::zero());
    EXPECT_EQ(kGate.wait(t0 + 300ms, t0 + 300ms, t0), Clock::duration::zero());
    // Close to the bound, the wait ends at the bound, not a whole quiet time later.
    EXPECT_EQ(kGate.wait(t0 + 248ms, t0 + 248ms, t0), 2ms);
}

TEST(RefillGate, APoolRunningLowIsRefilledAtOnce) {
    // A client creating sessions one after another never pauses: at half the target or less,
    // the pool does not wait for it.
    EXPECT_EQ(kGate.wait(t0 + 1ms, t0 + 1ms, t0, /*running_low=*/true), Clock::duration::zero());
    EXPECT_GT(kGate.wait(t0 + 1ms, t0 + 1ms, t0, /*running_low=*/false), Clock::duration::zero());
}

}  // namespace
}  // namespace corral
