#pragma once
// When a pool of prepared sessions (corrald --prepare) may be refilled: once clients have paused,
// or once the refill has waited long enough (session_manager_prepared.cpp says why).
//
// A pure rule over time points, so it is tested with exact times (unit_refill_gate) and the
// manager only keeps the two instants it needs: the last client request, and when the refill was
// first wanted.

#include <algorithm>
#include <chrono>

namespace corral {

struct RefillGate {
    using Clock = std::chrono::steady_clock;

    /// How long no client request must have arrived before a refill starts.
    Clock::duration quiet;
    /// How long after it was first wanted a refill starts even if clients never pause.
    Clock::duration latest;

    /// How much longer a refill wanted since `wanted_since` must wait at `now`, when the last
    /// client request arrived at `last_request`; zero: start it now. A pool `running_low` (half
    /// its target or less) is refilled now: a client creating sessions one after another would
    /// otherwise empty it while it waits for a pause, and then wait for holders itself.
    Clock::duration wait(Clock::time_point now, Clock::time_point last_request,
                         Clock::time_point wanted_since, bool running_low = false) const {
        if (running_low) return Clock::duration::zero();
        const Clock::time_point quiet_at = last_request + quiet;
        const Clock::time_point deadline = wanted_since + latest;
        const Clock::time_point start = std::min(quiet_at, deadline);
        return start > now ? start - now : Clock::duration::zero();
    }
};

}  // namespace corral
