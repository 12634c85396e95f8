// classify_exit: the one exit-reason rule of `corral run`, the daemon's records and the API.

#include "isolation/exit_reason.hpp"

#include <gtest/gtest.h>

#include <csignal>

namespace corral {
namespace {

WaitStatus exited(int code) {
    return WaitStatus{true, code, false};
}
WaitStatus signaled(int signal) {
    return WaitStatus{false, signal, false};
}

TEST(ExitReason, PlainEndingsAreExitedOrSignaled) {
    EXPECT_EQ(classify_exit(exited(0), {}), ExitReason::exited);
    EXPECT_EQ(classify_exit(exited(3), {}), ExitReason::exited);
    EXPECT_EQ(classify_exit(signaled(SIGSEGV), {}), ExitReason::signaled);
}

TEST(ExitReason, OurOwnActionsComeFirst) {
    EndingContext timeout;
    timeout.timed_out = true;
    timeout.oom_event = true;
    EXPECT_EQ(classify_exit(signaled(SIGTERM), timeout), ExitReason::timeout);
    EndingContext killed;
    killed.killed_by_request = true;
    EXPECT_EQ(classify_exit(signaled(SIGKILL), killed), ExitReason::killed);
    EXPECT_EQ(classify_exit(signaled(SIGSYS), killed), ExitReason::seccomp);
}

// Issue 12.6: a limit hit in the tree is the status even when the main process exited by
// itself: a shell whose children's forks were refused exits 0, a pipeline whose child the OOM
// killer ended exits 137 (bash reports 128 + 9).
TEST(ExitReason, LimitHitsInTheTreeAreReportedEvenWhenTheMainProcessExitedByItself) {
    EndingContext forks_refused;
    forks_refused.pids_limit_hit = true;
    EXPECT_EQ(classify_exit(exited(0), forks_refused), ExitReason::pids_limit);
    EXPECT_EQ(classify_exit(exited(1), forks_refused), ExitReason::pids_limit);
    EndingContext child_oom;
    child_oom.oom_event = true;
    EXPECT_EQ(classify_exit(exited(137), child_oom), ExitReason::oom);
    EXPECT_EQ(classify_exit(exited(0), child_oom), ExitReason::oom);
    EXPECT_EQ(classify_exit(signaled(SIGKILL), child_oom), ExitReason::oom);
}

TEST(ExitReason, OomKillOfTheMainProcessWinsOverAKillRequest) {
    EndingContext context;
    context.killed_by_request = true;
    context.oom_event = true;
    EXPECT_EQ(classify_exit(signaled(SIGKILL), context), ExitReason::oom);
}

TEST(ExitReason, ShellExitCodeIs128PlusTheSignal) {
    EXPECT_EQ(shell_exit_code(exited(7)), 7);
    EXPECT_EQ(shell_exit_code(signaled(SIGTERM)), 143);
}

}  // namespace
}  // namespace corral
