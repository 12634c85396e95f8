// The test harnesses' clean-up (support/instance_leftovers.hpp): what a corrald that did not shut
// down cleanly left in its instance cgroup (a process still running in a leaf, empty session
// cgroups) is killed and removed, so it cannot break the next run; nothing else is touched.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/instance_leftovers.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

TEST(InstanceLeftovers, AProcessAndTheTreeAnUncleanDaemonLeftAreRemoved) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups)";
    auto host = discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    const std::string instance = "corral-leftover-test-" + std::to_string(::getpid());
    const fs::path leaf = fs::path(host->v2_own) / instance / "sessions" / "s1" / "p1";
    const fs::path neighbour = fs::path(host->v2_own) / (instance + "-neighbour");
    fs::create_directories(leaf);
    fs::create_directories(neighbour);
    const bool neighbour_made = fs::exists(neighbour);
    fs::create_directories(fs::path(host->v2_own) / instance / "supervisor");

    pid_t child = ::fork();
    if (child == 0) {
        std::ofstream(leaf / "cgroup.procs") << "0";
        ::pause();
        ::_exit(0);
    }
    for (int i = 0; i < 500; ++i) {  // until the child is in its leaf
        std::ifstream procs(leaf / "cgroup.procs");
        pid_t pid = 0;
        if (procs >> pid) break;
        ::usleep(10000);
    }

    testing::remove_instance_leftovers(*host, instance);
    int status = 0;
    pid_t reaped = 0;
    for (int i = 0; i < 500 && reaped == 0; ++i) {
        reaped = ::waitpid(child, &status, WNOHANG);
        if (reaped == 0) ::usleep(10000);
    }
    const bool removed = !fs::exists(fs::path(host->v2_own) / instance);
    const bool neighbour_kept = fs::exists(neighbour);
    // Whatever the helper failed to do, this test undoes itself before judging it.
    if (reaped == 0) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
    }
    for (const auto& dir : {leaf, leaf.parent_path(), leaf.parent_path().parent_path(),
                            fs::path(host->v2_own) / instance / "supervisor",
                            fs::path(host->v2_own) / instance, neighbour})
        ::rmdir(dir.c_str());
    ASSERT_EQ(reaped, child) << "the process left in the leaf was not killed";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;
    EXPECT_TRUE(removed) << "the instance tree stayed";
    EXPECT_TRUE(neighbour_made && neighbour_kept) << "a cgroup of another name was removed";
}

// The landing check once found an empty corral-test-<pid>-0 cgroup of a test binary killed
// mid-run (its harness never got to remove_instance_leftovers). The next test binary's sweep
// removes such a tree, with what still runs in it, and leaves a running test process's own.
TEST(InstanceLeftovers, TreesOfTestProcessesThatAreGoneAreSweptAndLiveOnesKept) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups)";
    auto host = discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    // A pid that is gone: a child that exited and was reaped (reuse within this test would only
    // make the sweep keep the tree, which the test reports rather than hides).
    pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
    pid_t alive = ::fork();
    if (alive == 0) {
        ::pause();
        ::_exit(0);
    }
    const fs::path stale = fs::path(host->v2_own) / ("corral-test-" + std::to_string(gone) + "-0");
    const fs::path stale_leaf = stale / "sessions" / "s1" / "p1";
    const fs::path live = fs::path(host->v2_own) / ("corral-test-" + std::to_string(alive) + "-0");
    fs::create_directories(stale_leaf);
    fs::create_directories(live);
    // Something still runs in the stale tree, as a killed harness's sandbox would.
    pid_t runner = ::fork();
    if (runner == 0) {
        std::ofstream(stale_leaf / "cgroup.procs") << "0";
        ::pause();
        ::_exit(0);
    }
    for (int i = 0; i < 500; ++i) {
        std::ifstream procs(stale_leaf / "cgroup.procs");
        pid_t pid = 0;
        if (procs >> pid) break;
        ::usleep(10000);
    }

    testing::sweep_stale_test_instances(*host);
    int status = 0;
    pid_t reaped = 0;
    for (int i = 0; i < 500 && reaped == 0; ++i) {
        reaped = ::waitpid(runner, &status, WNOHANG);
        if (reaped == 0) ::usleep(10000);
    }
    const bool stale_removed = !fs::exists(stale);
    const bool live_kept = fs::exists(live);
    const bool pid_reused = ::kill(gone, 0) == 0;
    // Undo whatever the sweep did not, before judging it.
    if (reaped == 0) {
        ::kill(runner, SIGKILL);
        ::waitpid(runner, nullptr, 0);
    }
    ::kill(alive, SIGKILL);
    ::waitpid(alive, nullptr, 0);
    for (const auto& dir : {stale_leaf, stale_leaf.parent_path(),
                            stale_leaf.parent_path().parent_path(), stale, live})
        ::rmdir(dir.c_str());
    if (pid_reused) GTEST_SKIP() << "pid " << gone << " was reused during the test";
    EXPECT_EQ(reaped, runner) << "the process left in the stale tree was not killed";
    EXPECT_TRUE(stale_removed) << "the tree of a test process that is gone stayed";
    EXPECT_TRUE(live_kept) << "the tree of a running test process was removed";
}

}  // namespace
}  // namespace corral
