#include "isolation/setup_deadline.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "base/pipe.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;

// A child that runs `body` and is killed and reaped when the test ends, pass or fail.
class Child {
  public:
    template <typename Body>
    explicit Child(Body body) : pid_(::fork()) {
        if (pid_ == 0) {
            body();
            ::_exit(0);
        }
    }
    ~Child() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    pid_t pid() const { return pid_; }

  private:
    pid_t pid_;
};

// Waits on a pipe nobody writes, as corrald waits for a report that does not come. The time is
// counted from before the deadline is made (`make`), so it is never less than the deadline's own.
template <typename MakeDeadline>
std::chrono::milliseconds wait_for_nothing(MakeDeadline make, Status& outcome) {
    auto pipe = make_pipe();
    EXPECT_TRUE(pipe.ok());
    const auto began = std::chrono::steady_clock::now();
    SetupDeadline deadline = make();
    outcome = await_report(pipe->read_end.get(), deadline, "the test's report");
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 began);
}

// A child stopped before it reports uses no CPU: one limit and the wait is over, with ETIMEDOUT.
TEST(SetupDeadline, AStoppedChildEndsTheWaitAfterOneLimit) {
    Child child([] { ::raise(SIGSTOP); });
    ASSERT_GT(child.pid(), 0);
    Status outcome;
    const auto waited =
        wait_for_nothing([&] { return SetupDeadline(200ms, child.pid(), 5s); }, outcome);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.error().code, ETIMEDOUT);
    EXPECT_NE(outcome.error().message.find("the test's report"), std::string::npos);
    EXPECT_GE(waited, 200ms);
    EXPECT_LT(waited, 5s) << "a child that made no progress was given the ceiling";
}

// A child that keeps running (a session's cpu.max, a slow host) is not killed at the first
// limit: it gets limit after limit, up to the ceiling (review of issue 12's bounded waits).
TEST(SetupDeadline, AChildThatRunsIsGivenMoreLimitsUpToTheCeiling) {
    Child child([] {
        for (volatile uint64_t spin = 0;; spin = spin + 1) {
        }
    });
    ASSERT_GT(child.pid(), 0);
    // Limits of 200 ms: a spinning child gets some CPU in every one, even on a loaded emulator.
    Status outcome;
    const auto waited =
        wait_for_nothing([&] { return SetupDeadline(200ms, child.pid(), 800ms); }, outcome);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.error().code, ETIMEDOUT);
    EXPECT_GE(waited, 800ms) << "a running child was killed before the ceiling";
}

// Without a limit the deadline never ends a wait; a report that comes ends it at once.
TEST(SetupDeadline, NoLimitWaitsAndAReportEndsTheWait) {
    SetupDeadline none;
    EXPECT_EQ(none.poll_timeout(), -1);
    EXPECT_FALSE(none.expired());

    auto pipe = make_pipe();
    ASSERT_TRUE(pipe.ok());
    ASSERT_EQ(::write(pipe->write_end.get(), "r", 1), 1);
    SetupDeadline deadline(10s, ::getpid());
    EXPECT_TRUE(await_report(pipe->read_end.get(), deadline, "a report").ok());
}

TEST(SetupDeadline, CpuTimeOfAProcessIsReadAndOfNoProcessIsNot) {
    EXPECT_TRUE(process_cpu_ns(::getpid()).has_value());
    EXPECT_FALSE(process_cpu_ns(-1).has_value());
}

}  // namespace
}  // namespace corral
