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

}  // namespace
}  // namespace corral
