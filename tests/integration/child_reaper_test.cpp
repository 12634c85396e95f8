// corrald's reaper of orphans (sessions/child_reaper.hpp) against real processes: orphans that
// come back to a subreaper are reaped, children with an owner are left for the owner to reap
// (their exit status is the owner's to read). No privileges needed.
#include "sessions/child_reaper.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "isolation/pid_ref.hpp"

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

/// A child forked by another thread; it exits once `release` is closed.
struct HeldChild {
    pid_t pid = -1;
    UniqueFd release;
};

/// A thread that forks children on request and lives until destroyed (a child whose parent
/// thread ends is reparented to another of our threads): corrald's launch worker, in small.
class ForkingThread {
  public:
    ForkingThread() : thread_([this] { serve(); }) {}
    ~ForkingThread() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }
    HeldChild fork_child() {
        int release[2];
        if (::pipe2(release, O_CLOEXEC) != 0) return {};
        std::unique_lock lock(mutex_);
        read_ = release[0];
        forked_ = -1;
        wanted_ = true;
        changed_.notify_all();
        changed_.wait(lock, [&] { return !wanted_; });
        ::close(release[0]);
        return {forked_, UniqueFd(release[1])};
    }

  private:
    void serve() {
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [&] { return stop_ || wanted_; });
            if (stop_) return;
            const pid_t pid = ::fork();
            if (pid == 0) {
                // Every other descriptor goes, the write end with it (O_CLOEXEC acts at exec
                // only): end of file comes once the test closes its end.
                ::close_range(3, static_cast<unsigned>(read_) - 1, 0);
                ::close_range(static_cast<unsigned>(read_) + 1, ~0U, 0);
                char byte;
                (void)::read(read_, &byte, 1);
                ::_exit(0);
            }
            forked_ = pid;
            wanted_ = false;
            changed_.notify_all();
        }
    }
    std::mutex mutex_;
    std::condition_variable changed_;
    bool stop_ = false;
    bool wanted_ = false;
    int read_ = -1;
    pid_t forked_ = -1;
    std::thread thread_;
};

Result<UniqueFd> pidfd_open(pid_t pid) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return sys_error("pidfd_open");
    return UniqueFd(fd);
}

bool gone(pid_t pid) {
    return !std::filesystem::exists("/proc/" + std::to_string(pid));
}

// On the main thread (where the kernel reparents orphans) the walk looks at that thread's
// children only: an unowned child another thread forked is not its business (corrald's holders
// and launches, forked by the launch worker: issue 18, the walk met ~1,000 holders per finished
// run). Orphans are still all found. Fails if the walk goes back to every thread's children.
TEST(ChildReaper, OnTheMainThreadTheWalkMeetsOrphansNotOtherThreadsChildren) {
    ASSERT_EQ(::gettid(), ::getpid()) << "gtest runs tests on the main thread";
    SubreaperOff off;
    boost::asio::io_context io;
    ChildReaper reaper(io, true);
    ForkingThread other;
    HeldChild held = other.fork_child();
    const pid_t child = held.pid;
    ASSERT_GT(child, 0);
    held.release.reset();  // it exits: a zombie of the other thread, owned by nobody
    int release[2];
    ASSERT_EQ(::pipe(release), 0);
    leave_an_orphan(release);
    ::close(release[0]);
    ::close(release[1]);
    EXPECT_TRUE(run_until(io, [&] { return reaper.orphans_reaped() >= 2; }));
    io.restart();
    io.run_for(100ms);
    EXPECT_EQ(reaper.orphans_reaped(), 2u) << "the other thread's child was reaped by the walk";
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG), 0)
        << "it is still ours to reap, from any thread";
    EXPECT_EQ(info.si_pid, child);
}

// A child of another thread that its owner gives up (after SIGKILL) is handed over and reaped
// when its pidfd says it ended: the walk would never meet it (sessions/process.cpp's launch
// whose pipes could not be wired, a holder given up before its setup or at a session's end).
TEST(ChildReaper, AHandedOverChildOfAnotherThreadIsReapedWhenItEnds) {
    SubreaperOff off;
    boost::asio::io_context io;
    ChildReaper reaper(io, true);
    ForkingThread other;
    HeldChild held = other.fork_child();
    const pid_t child = held.pid;
    ASSERT_GT(child, 0);
    auto pidfd = pidfd_open(child);
    ASSERT_TRUE(pidfd) << pidfd.error().describe();
    reaper.add_owned(child);
    reaper.hand_over(PidRef(child, std::move(*pidfd)));
    EXPECT_EQ(reaper.handed_over_pending(), 1u);
    io.restart();
    io.run_for(50ms);
    EXPECT_FALSE(gone(child)) << "reaped before it ended";
    held.release.reset();  // now it ends
    EXPECT_TRUE(run_until(io, [&] { return reaper.handed_over_pending() == 0; }));
    EXPECT_TRUE(run_until(io, [&] { return gone(child); })) << "left a zombie";
}

// One already ended when handed over is reaped at once; one that is not our child at all (a
// process a previous daemon started) is dropped, never waited for.
TEST(ChildReaper, HandingOverAnEndedChildReapsItAndAStrangerIsDropped) {
    SubreaperOff off;
    boost::asio::io_context io;
    ChildReaper reaper(io, true);
    const pid_t ended = ::fork();
    if (ended == 0) ::_exit(0);
    reaper.add_owned(ended);  // so the walk leaves it to the handing over
    auto pidfd = pidfd_open(ended);
    ASSERT_TRUE(pidfd);
    ASSERT_TRUE(run_until(io, [&] {
        siginfo_t info{};
        return ::waitid(P_PID, static_cast<id_t>(ended), &info, WEXITED | WNOHANG | WNOWAIT) ==
                   0 &&
               info.si_pid == ended;
    }));
    reaper.hand_over(PidRef(ended, std::move(*pidfd)));
    EXPECT_EQ(reaper.handed_over_pending(), 0u);
    EXPECT_TRUE(gone(ended));
    auto parent = pidfd_open(::getppid());  // not our child
    ASSERT_TRUE(parent);
    reaper.hand_over(PidRef(::getppid(), std::move(*parent)));
    EXPECT_EQ(reaper.handed_over_pending(), 0u);
}

}  // namespace
}  // namespace corral
