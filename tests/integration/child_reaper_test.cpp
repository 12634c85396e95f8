// corrald's reaper of orphans (sessions/child_reaper.hpp) against real processes: orphans that
// come back to a subreaper are reaped, children with an owner are left for the owner to reap
// (their exit status is the owner's to read). No privileges needed.
#include "sessions/child_reaper.hpp"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace corral {
namespace {

using namespace std::chrono_literals;

/// Runs `io` until `done` or five seconds have passed; returns `done()`.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        io.restart();
        io.run_for(20ms);
    }
    return done();
}

/// Forks a child that forks a grandchild and exits at once: the grandchild is orphaned and, as
/// we are a subreaper, becomes our child. It exits when the pipe's write end is closed (it holds
/// no copy of it: both ends are passed so that it can close its own). Returns the middle child.
pid_t leave_an_orphan(const int release[2]) {
    const pid_t middle = ::fork();
    if (middle == 0) {
        ::close(release[1]);
        if (::fork() == 0) {
            ::close(STDOUT_FILENO);  // nothing of the test's output stays open in an orphan
            ::close(STDERR_FILENO);
            char byte;
            (void)::read(release[0], &byte, 1);
            ::_exit(0);
        }
        ::_exit(0);
    }
    return middle;
}

/// An owned child that exits at once with `code`, left a zombie for its owner.
pid_t owned_child(ChildReaper& reaper, int code) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(code);
    reaper.add_owned(pid);
    return pid;
}

/// The owner's reaping of `pid`: its exit status, or -1 if someone else reaped it.
int reap_as_owner(pid_t pid) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 || info.si_pid != pid)
        return -1;
    return info.si_status;
}

struct SubreaperOff {
    ~SubreaperOff() { ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
};

// An owned zombie stops waitid(P_ALL)'s round: the orphans behind it are reaped anyway, and the
// owned child keeps its exit status for its owner.
TEST(ChildReaper, OrphansBehindAnOwnedZombieAreReapedAndItsStatusStaysTheOwners) {
    SubreaperOff off;
    boost::asio::io_context io;
    ChildReaper reaper(io, true);
    const pid_t owned = owned_child(reaper, 7);
    int release[2];
    ASSERT_EQ(::pipe(release), 0);
    leave_an_orphan(release);
    ::close(release[0]);
    EXPECT_TRUE(run_until(io, [&] { return reaper.orphans_reaped() >= 1; }));  // the middle one
    ::close(release[1]);  // the orphan exits
    EXPECT_TRUE(run_until(io, [&] { return reaper.orphans_reaped() >= 2; }));
    EXPECT_EQ(reap_as_owner(owned), 7);
    reaper.remove_owned(owned);
    EXPECT_EQ(reaper.orphans_reaped(), 2u);
}

// remove_owned() re-scans only after a round that stopped at an owned zombie (issue 18: each
// round walks every child). Orphans that end after the owner reaped are still reaped, through
// their own SIGCHLD, and one left behind a round that stopped is reaped by the re-scan.
TEST(ChildReaper, OrphansEndingAfterTheOwnerReapedAreReapedToo) {
    SubreaperOff off;
    boost::asio::io_context io;
    ChildReaper reaper(io, true);
    const pid_t owned = owned_child(reaper, 3);
    EXPECT_EQ(reap_as_owner(owned), 3);
    reaper.remove_owned(owned);
    int release[2];
    ASSERT_EQ(::pipe(release), 0);
    leave_an_orphan(release);
    ::close(release[0]);
    ::close(release[1]);
    EXPECT_TRUE(run_until(io, [&] { return reaper.orphans_reaped() >= 2; }));
    siginfo_t info{};
    EXPECT_NE(::waitid(P_ALL, 0, &info, WEXITED | WNOHANG), 0) << "a child was left unreaped";
}

}  // namespace
}  // namespace corral
