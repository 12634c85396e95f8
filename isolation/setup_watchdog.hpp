#pragma once
// The setup limit (setup_deadline.hpp, issue 12 item 1) for children that share our memory.
//
// A child started with CLONE_VM | CLONE_VFORK (launcher.hpp) suspends the launching thread until
// it has exec'd or exited, so the launcher cannot watch its own deadline: a child stopped or
// frozen before execve (launch_may_share_memory() admits only children that nothing but
// corrald's own credentials can stop, but corrald's own freeze-and-kill and a race with it can)
// would hold the launching thread, and with it corrald's loop, for ever. This thread kills such a
// child when its SetupDeadline expires, and the launch fails as a forked one does after the
// limit.

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "base/error.hpp"
#include "isolation/setup_deadline.hpp"

namespace corral {

/// One shared-memory launch under watch. Filled by the launcher before the clone; the kernel
/// writes `pid` and `pidfd` (CLONE_PARENT_SETTID, CLONE_PIDFD) before the child runs; the pidfd
/// is the launcher's (in its descriptor table), the watchdog kills by pid.
struct WatchedLaunch {
    std::chrono::milliseconds limit{0};
    volatile pid_t pid = 0;
    volatile int pidfd = -1;
    // The watchdog's own (under its lock):
    std::chrono::steady_clock::time_point first_check{};
    std::optional<SetupDeadline> deadline;
    bool killed = false;
};

/// Starts the watchdog's thread (once; later calls return at once). corrald's launch worker
/// starts it with itself, so no thread appears during a session; launch_begin() starts it on
/// first use otherwise. An Error: no watchdog, so launches with a limit fork.
Status start_setup_watchdog();

/// Watches `launch` from now until disarm_setup_watchdog(launch). Needs a started watchdog.
void arm_setup_watchdog(WatchedLaunch& launch);
/// Stops watching `launch`; afterwards the watchdog never touches it (or its pidfd) again.
/// Returns the deadline that expired when the watchdog killed the child, nullopt otherwise.
std::optional<SetupDeadline> disarm_setup_watchdog(WatchedLaunch& launch);

}  // namespace corral
