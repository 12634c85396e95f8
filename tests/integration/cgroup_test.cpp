// The v2 cgroup handle against the real kernel (root): a session's whole process tree, including
// double-forked setsid daemons and trees that fork in a loop, is killed as one and removed.
#include "isolation/cgroup.hpp"
#include "isolation/cgroup_placement.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <functional>

#include "base/file_io.hpp"
#include "isolation/pid_ref.hpp"
#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

using test_support::drain;
using test_support::exists;
using test_support::unique_name;

using namespace std::chrono_literals;

/// Creates an owned test cgroup under our own v2 cgroup; the Cgroup's destructor removes it
/// even when an assertion fails, and TearDown checks nothing is left.
class CgroupTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        auto cgroup = Cgroup::create(host->v2_own, unique_name());
        ASSERT_TRUE(cgroup) << cgroup.error().describe();
        cgroup_ = std::move(*cgroup);
        path_ = cgroup_.path();
    }
    void TearDown() override {
        if (path_.empty()) return;
        auto status = cgroup_.remove();
        EXPECT_TRUE(status) << status.error().describe();
        EXPECT_FALSE(exists(path_)) << path_ << " left behind";
    }

    /// Forks a child that moves itself into `into` and then runs `body`; returns once the child
    /// is in the cgroup.
    static PidRef fork_into(const Cgroup& into, std::function<void()> body) {
        int ready[2];
        if (::pipe2(ready, O_CLOEXEC) != 0) return {};
        std::string procs = into.path() + "/cgroup.procs";
        pid_t pid = ::fork();
        if (pid == 0) {
            ::close(ready[0]);
            int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(120);
            ::close(fd);
            ::close(ready[1]);  // EOF tells the parent we are inside
            body();
            ::_exit(0);
        }
        ::close(ready[1]);
        char byte;
        while (::read(ready[0], &byte, 1) < 0 && errno == EINTR) {
        }
        ::close(ready[0]);
        return PidRef(pid, UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))));
    }

    Cgroup cgroup_;
    std::string path_;
};

/// Makes the test process a child subreaper for the scope, so orphaned grandchildren come back
/// to us and their exit status (SIGKILL) can be checked.
struct SubreaperScope {
    SubreaperScope() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
    ~SubreaperScope() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

TEST_F(CgroupTest, Cgroup_KillsReparentedDaemons) {
    SubreaperScope subreaper;
    int report[2];
    ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
    PidRef child = fork_into(cgroup_, [&] {
        if (::fork() != 0) ::_exit(0);  // first fork: the parent leaves
        ::setsid();
        if (::fork() != 0) ::_exit(0);  // second fork: not a session leader, fully detached
        pid_t self = ::getpid();
        (void)!::write(report[1], &self, sizeof self);
        ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
        ::_exit(127);
    });
    ASSERT_TRUE(child.valid());
    ::close(report[1]);
    pid_t daemon = -1;
    ASSERT_EQ(::read(report[0], &daemon, sizeof daemon), static_cast<ssize_t>(sizeof daemon));
    ::close(report[0]);
    auto first = child.wait();
    ASSERT_TRUE(first);
    EXPECT_TRUE(first->exited);

    auto pids = cgroup_.pids();
    ASSERT_TRUE(pids) << pids.error().describe();
    ASSERT_NE(std::find(pids->begin(), pids->end(), daemon), pids->end())
        << "the double-forked daemon must still be tracked by the cgroup";
    ASSERT_TRUE(*cgroup_.populated());

    auto killed = cgroup_.kill_all();
    ASSERT_TRUE(killed) << killed.error().describe();
    EXPECT_GE(*killed, 1u);
    auto empty = cgroup_.wait_until_empty(10s);
    ASSERT_TRUE(empty) << empty.error().describe();
    EXPECT_FALSE(*cgroup_.populated());

    // The daemon was reparented to us (subreaper): reap it and see that SIGKILL ended it.
    int status = 0;
    ASSERT_EQ(::waitpid(daemon, &status, 0), daemon);
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_F(CgroupTest, Cgroup_FreezeFallbackKillsATreeThatForksInALoop) {
    // Each runner forks and exits in a loop, so its pid changes all the time: signalling pids
    // one by one without freezing chases a moving target. The tree's root is a subreaper and
    // reaps the orphans so no zombie piles up anywhere.
    PidRef root = fork_into(cgroup_, [] {
        ::prctl(PR_SET_CHILD_SUBREAPER, 1);
        for (int i = 0; i < 4; ++i) {
            if (::fork() == 0) {
                for (;;) {
                    pid_t next = ::fork();
                    if (next > 0) ::_exit(0);  // the child carries on
                    if (next < 0) ::usleep(1000);
                }
            }
        }
        for (;;) ::wait(nullptr);
    });
    ASSERT_TRUE(root.valid());
    auto pids = cgroup_.pids();
    ASSERT_TRUE(pids);
    ASSERT_GE(pids->size(), 1u);

    // No event loop to keep free here: the fallback may take its time (corrald's default bound
    // is Cgroup::kLoopKillBound).
    auto killed = cgroup_.kill_all(KillMethod::freeze_and_signal, 10s);
    ASSERT_TRUE(killed) << killed.error().describe();
    auto empty = cgroup_.wait_until_empty(10s);
    ASSERT_TRUE(empty) << empty.error().describe();
    EXPECT_FALSE(*cgroup_.populated());
    auto exit = root.wait();
    ASSERT_TRUE(exit);
    EXPECT_FALSE(exit->exited);
    EXPECT_EQ(exit->code, SIGKILL);
    // The freeze was lifted: a frozen but empty cgroup would refuse nothing, but say so.
    auto events = cgroup_.wait_for_event("frozen", 0, 1s);
    EXPECT_TRUE(events) << events.error().describe();
}

TEST_F(CgroupTest, Cgroup_KillFileIsAvailableOnThisKernel) {
    EXPECT_TRUE(cgroup_kill_supported(cgroup_)) << "kernel 5.14+ has cgroup.kill";
    PidRef child = fork_into(cgroup_, [] { ::pause(); });
    auto killed = cgroup_.kill_all(KillMethod::kill_file);
    ASSERT_TRUE(killed) << killed.error().describe();
    auto exit = child.wait();
    ASSERT_TRUE(exit);
    EXPECT_EQ(exit->code, SIGKILL);
}

TEST_F(CgroupTest, Cgroup_UsageCountsCpuOfABusyChild) {
    PidRef child = fork_into(cgroup_, [] {
        timespec ts{};
        do {
            ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        } while (ts.tv_sec == 0 && ts.tv_nsec < 300'000'000);
    });
    ASSERT_TRUE(child.wait());
    auto usage = cgroup_.usage();
    ASSERT_TRUE(usage) << usage.error().describe();
    // It burnt 300 ms of cpu; the cgroup keeps counting after the process is gone.
    EXPECT_GE(usage->cpu_total_usec, 200'000u);
    EXPECT_GT(usage->cpu_user_usec, 0u);
    EXPECT_GE(usage->cpu_total_usec, usage->cpu_user_usec);
}

TEST_F(CgroupTest, Cgroup_RemoveDeletesNestedChildrenAndIsIdempotent) {
    auto a = cgroup_.create_child("a");
    ASSERT_TRUE(a) << a.error().describe();
    auto b = a->create_child("b");
    ASSERT_TRUE(b);
    PidRef child = fork_into(*b, [] { ::pause(); });
    auto pids = cgroup_.pids();
    ASSERT_TRUE(pids);
    EXPECT_EQ(pids->size(), 1u) << "pids() walks descendants";

    auto removed = cgroup_.remove();
    ASSERT_TRUE(removed) << removed.error().describe();
    EXPECT_FALSE(exists(path_));
    EXPECT_TRUE(cgroup_.remove()) << "a second remove() is a no-op";
    EXPECT_TRUE(b->remove()) << "children removed by the parent are already gone";
    auto exit = child.wait();
    ASSERT_TRUE(exit);
    EXPECT_EQ(exit->code, SIGKILL);
}

TEST_F(CgroupTest, Cgroup_WatchEventsWakesWhenTheLastProcessLeaves) {
    PidRef child = fork_into(cgroup_, [] { ::pause(); });
    auto watch = cgroup_.watch_events();
    ASSERT_TRUE(watch) << watch.error().describe();
    auto timeout = cgroup_.wait_until_empty(50ms);
    ASSERT_FALSE(timeout);
    EXPECT_EQ(timeout.error().code, ETIMEDOUT);

    ASSERT_TRUE(child.send_signal(SIGKILL));
    pollfd pfd{watch->get(), POLLPRI, 0};
    ASSERT_EQ(::poll(&pfd, 1, 10'000), 1) << "cgroup.events changed, POLLPRI must say so";
    EXPECT_TRUE(cgroup_.wait_until_empty(10s));
}

TEST_F(CgroupTest, Cgroup_UnownedHandleIsNeverRemoved) {
    {
        auto unowned = Cgroup::open_unowned(path_);
        ASSERT_TRUE(unowned);
        EXPECT_FALSE(unowned->owned());
        EXPECT_FALSE(unowned->remove());
    }
    EXPECT_TRUE(exists(path_));
}

TEST_F(CgroupTest, Cgroup_CreateRefusesAnExistingName) {
    auto again = Cgroup::create(path_.substr(0, path_.find_last_of('/')),
                                path_.substr(path_.find_last_of('/') + 1));
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, EEXIST);
}

// remove_if_empty() is the end of every run's leaf (issue 18: one rmdir instead of two reads of
// cgroup.events and a walk to the parent): it must never kill or remove what is still in use.
TEST_F(CgroupTest, Cgroup_RemoveIfEmptyRefusesAPopulatedOrParentCgroupAndKillsNothing) {
    auto leaf = cgroup_.create_child("leaf");
    ASSERT_TRUE(leaf) << leaf.error().describe();
    EXPECT_EQ(leaf->path(), path_ + "/leaf");
    EXPECT_TRUE(exists(path_ + "/leaf/cgroup.events")) << "created below the parent's directory";
    PidRef child = fork_into(*leaf, [] { ::pause(); });

    auto populated = leaf->remove_if_empty();
    ASSERT_TRUE(populated) << populated.error().describe();
    EXPECT_FALSE(*populated) << "a cgroup with a process in it stays";
    EXPECT_TRUE(leaf->valid());
    auto state = child.try_wait();
    ASSERT_TRUE(state);
    EXPECT_FALSE(*state) << "and its process lives on";

    auto nested = leaf->create_child("nested");
    ASSERT_TRUE(nested) << nested.error().describe();
    ASSERT_TRUE(child.send_signal(SIGKILL));
    ASSERT_TRUE(child.wait());
    ASSERT_TRUE(leaf->wait_until_empty(10s));
    auto parent = leaf->remove_if_empty();
    ASSERT_TRUE(parent) << parent.error().describe();
    EXPECT_FALSE(*parent) << "a cgroup with a child cgroup stays";
    EXPECT_TRUE(exists(path_ + "/leaf/nested"));

    auto empty = nested->remove_if_empty();
    ASSERT_TRUE(empty && *empty);
    EXPECT_FALSE(nested->valid());
    EXPECT_FALSE(exists(path_ + "/leaf/nested"));
    auto last = leaf->remove_if_empty();
    ASSERT_TRUE(last && *last);
    EXPECT_FALSE(exists(path_ + "/leaf"));
    auto again = leaf->remove_if_empty();
    ASSERT_TRUE(again && *again) << "a second call is a no-op";

    auto unowned = Cgroup::open_unowned(path_);
    ASSERT_TRUE(unowned);
    EXPECT_FALSE(unowned->remove_if_empty()) << "never what corral did not create";
    EXPECT_TRUE(exists(path_));
}

// usage() skips the files of a controller this cgroup does not have (issue 18); the ones it has
// must still be read, the same as before.
TEST_F(CgroupTest, Cgroup_UsageReadsTheFilesOfEveryControllerItHas) {
    auto leaf = cgroup_.create_child("leaf");
    ASSERT_TRUE(leaf) << leaf.error().describe();
    auto usage = leaf->usage();
    ASSERT_TRUE(usage) << usage.error().describe();
    EXPECT_EQ(usage->memory_current.has_value(), exists(leaf->path() + "/memory.current"));
    EXPECT_EQ(usage->memory_peak.has_value(), exists(leaf->path() + "/memory.peak"));
    EXPECT_EQ(usage->pids_current.has_value(), exists(leaf->path() + "/pids.current"));
    EXPECT_EQ(usage->pids_peak.has_value(), exists(leaf->path() + "/pids.peak"));
    EXPECT_EQ(usage->io_read_bytes.has_value(), exists(leaf->path() + "/io.stat"));
}

TEST_F(CgroupTest, PidRef_TryWaitThenWaitReportTheSignal) {
    PidRef child = fork_into(cgroup_, [] { ::pause(); });
    auto running = child.try_wait();
    ASSERT_TRUE(running) << running.error().describe();
    EXPECT_FALSE(running->has_value());
    ASSERT_TRUE(child.send_signal(SIGTERM));
    auto exit = child.wait();
    ASSERT_TRUE(exit);
    EXPECT_FALSE(exit->exited);
    EXPECT_EQ(exit->code, SIGTERM);
    auto gone = child.send_signal(SIGTERM);
    ASSERT_FALSE(gone);
    EXPECT_EQ(gone.error().code, ESRCH);
}

/// Runs `check` in a forked child and returns its exit code (the child may change its own
/// namespaces and cgroup; nothing of that reaches the test process). 255: the child died.
int in_child(const std::function<int()>& check) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(check());
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return 255;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

// Issue 18: `corral run` finds its cgroups where they usually are instead of generating and
// parsing mountinfo on every launch. Wherever that way answers, it must answer as mountinfo does.
TEST(CgroupDiscovery, TheUsualMountsAgreeWithMountinfo) {
    auto cgroups = read_file("/proc/self/cgroup");
    ASSERT_TRUE(cgroups) << cgroups.error().describe();
    auto from_mountinfo = discover_cgroup_host_from_mountinfo(*cgroups);
    ASSERT_TRUE(from_mountinfo) << from_mountinfo.error().describe();
    auto usual = discover_cgroup_host_at_usual_mounts(*cgroups);
    if (!usual) GTEST_SKIP() << "this host's cgroups are not where systemd puts them";
    EXPECT_EQ(usual->layout, from_mountinfo->layout);
    EXPECT_EQ(usual->v2_own, from_mountinfo->v2_own);
    EXPECT_EQ(usual->v1_own, from_mountinfo->v1_own);
    auto discovered = discover_cgroup_host();
    ASSERT_TRUE(discovered) << discovered.error().describe();
    EXPECT_EQ(discovered->v2_own, from_mountinfo->v2_own);
}

// Issue 18: a caller without v1 limits skips the v1 hierarchies, and nothing else changes: the
// same layout (hybrid stays hybrid, so limits still go to the v1 backend) and the same cgroup2
// directory, only no v1 directories.
TEST(CgroupDiscovery, SkippingTheV1HierarchiesChangesNothingElse) {
    auto found = discover_cgroup_host(V1Hierarchies::find);
    ASSERT_TRUE(found) << found.error().describe();
    auto skipped = discover_cgroup_host(V1Hierarchies::skip);
    ASSERT_TRUE(skipped) << skipped.error().describe();
    EXPECT_EQ(skipped->layout, found->layout);
    EXPECT_EQ(skipped->v2_mount, found->v2_mount);
    EXPECT_EQ(skipped->v2_own, found->v2_own);
    EXPECT_EQ(skipped->v2_controllers, found->v2_controllers);
    EXPECT_TRUE(skipped->v1_own.empty());
    if (found->layout == CgroupLayout::hybrid) {
        EXPECT_FALSE(found->v1_own.empty());
    }
    auto cgroups = read_file("/proc/self/cgroup");
    ASSERT_TRUE(cgroups) << cgroups.error().describe();
    auto usual = discover_cgroup_host_at_usual_mounts(*cgroups, V1Hierarchies::find);
    auto usual_skipped = discover_cgroup_host_at_usual_mounts(*cgroups, V1Hierarchies::skip);
    if (!usual) GTEST_SKIP() << "this host's cgroups are not where systemd puts them";
    ASSERT_TRUE(usual_skipped) << "skipping a check made the usual mounts unconfirmed";
    EXPECT_EQ(usual_skipped->layout, usual->layout);
    EXPECT_EQ(usual_skipped->v2_own, usual->v2_own);
}

// A subtree bound over the usual mount point is a cgroup2 filesystem at the usual place, but
// its top is not the root: paths from /proc/self/cgroup would land in the wrong directory.
// Precedent: container runtimes bind-mount a cgroup subtree at /sys/fs/cgroup, which mountinfo's
// root field shows and a path check alone does not (opencontainers/runc#617: a bind mount and a
// namespace's own mount look alike; sosy-lab/benchexec#1047: "the wrong cgroupfs overlaid in a
// container" gives wrong paths). corral must read mountinfo there, never create its cgroups
// under the wrong parent.
TEST_F(CgroupTest, CgroupDiscovery_ASubtreeBoundOverTheUsualMountIsNotTrusted) {
    auto host = discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    auto cgroups = read_file("/proc/self/cgroup");
    ASSERT_TRUE(cgroups) << cgroups.error().describe();
    if (!discover_cgroup_host_at_usual_mounts(*cgroups)) GTEST_SKIP() << "no usual mounts here";
    const std::string mount = host->v2_mount, subtree = path_;
    int code = in_child([&] {
        if (::unshare(CLONE_NEWNS) != 0) return 10;
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 11;
        if (::mount(subtree.c_str(), mount.c_str(), nullptr, MS_BIND, nullptr) != 0) return 12;
        return discover_cgroup_host_at_usual_mounts(*cgroups) ? 1 : 0;
    });
    EXPECT_EQ(code, 0) << "1: a bound subtree was taken for the root; 10-12: set-up failed";
}

// In another cgroup namespace /proc/self/cgroup's paths start at that namespace's root, not
// at the top of the usual mount: the usual-mounts way must step aside (a process that put
// itself in a cgroup namespace would otherwise have corral's cgroups made at the real root;
// opencontainers/runc#617 is the same ambiguity seen from the runtime's side).
TEST_F(CgroupTest, CgroupDiscovery_AnotherCgroupNamespaceIsNotTrusted) {
    auto cgroups = read_file("/proc/self/cgroup");
    ASSERT_TRUE(cgroups) << cgroups.error().describe();
    if (!discover_cgroup_host_at_usual_mounts(*cgroups)) GTEST_SKIP() << "no usual mounts here";
    const std::string procs = path_ + "/cgroup.procs";
    int code = in_child([&] {
        if (!write_file(procs, "0")) return 10;
        if (::unshare(CLONE_NEWCGROUP) != 0) return 11;
        auto inside = read_file("/proc/self/cgroup");
        if (!inside || inside->find("0::/\n") == std::string::npos) return 12;
        return discover_cgroup_host_at_usual_mounts(*inside) ? 1 : 0;
    });
    EXPECT_EQ(code, 0) << "1: a namespace's \"/\" was taken for the real root; 10-12: set-up";
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

// Security (issue 11.5): placing corral's cgroups moves no process but, where systemd hands out
// a scope, corral's own. A sibling left in our cgroup stays exactly where it was, whatever the
// plan (own here on hybrid machines; cgroupfs-root from a shared scope under pure-v2).
TEST(CgroupPlacementOnTheRealHost, PlacingMovesNoOtherProcess) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    auto host = discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    pid_t sibling = ::fork();
    if (sibling == 0) {
        ::pause();
        ::_exit(0);
    }
    ASSERT_GT(sibling, 0);
    auto cgroup_of = [](pid_t pid) {
        auto text = read_file("/proc/" + std::to_string(pid) + "/cgroup");
        return text ? *text : std::string("?");
    };
    const std::string sibling_before = cgroup_of(sibling);
    const std::string self_before = cgroup_of(::getpid());
    CgroupHost placed = *host;
    auto plan = place_cgroups(placed, PlacementOptions{false, "corral-test", {}});
    EXPECT_TRUE(plan) << plan.error().describe();
    EXPECT_EQ(cgroup_of(sibling), sibling_before);
    EXPECT_EQ(cgroup_of(::getpid()), self_before) << "no scope was asked for, so we stay too";
    if (plan && plan->mode == PlacementMode::cgroupfs_root) {
        EXPECT_EQ(placed.v2_own, placed.v2_mount);
        EXPECT_EQ(placed.v2_started_in, host->v2_own);
    }
    if (plan && host->layout == CgroupLayout::hybrid) {
        EXPECT_EQ(placed.v2_own, host->v2_own);
    }
    ::kill(sibling, SIGKILL);
    ::waitpid(sibling, nullptr, 0);
}

}  // namespace
}  // namespace corral
