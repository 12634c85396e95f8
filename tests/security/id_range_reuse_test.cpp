// Two sessions must never share host ids: the same range means the same host uid, so one could
// signal, ptrace and write the other's files (issue 10 items 3/4; CVE-2018-18955's shape, a
// user namespace mapped onto ids that were not its own). The red team's second round: the lock
// files of the range allocator lived in /run/corral/id-ranges, corrald's systemd
// RuntimeDirectory, which systemd deletes on restart. A restarted corrald then locked fresh
// files and handed out a range a live `corral run` still used. Simulated here by a live user
// namespace mapped onto a range whose lock file is gone (an empty lock dir).

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "isolation/id_range.hpp"

namespace corral {
namespace {

class IdRangeReuse : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (writes another process's id maps)";
        for (auto* dir : {&first_dir_, &second_dir_}) {
            char tmpl[] = "/tmp/corral-id-locks-XXXXXX";
            ASSERT_NE(::mkdtemp(tmpl), nullptr);
            *dir = tmpl;
        }
    }
    void TearDown() override {
        if (child_ > 0) {
            ::kill(child_, SIGKILL);
            ::waitpid(child_, nullptr, 0);
        }
        std::error_code ignored;
        for (auto* dir : {&first_dir_, &second_dir_})
            if (!dir->empty()) std::filesystem::remove_all(*dir, ignored);
    }
    /// A live "session": a process in its own user namespace mapped onto the slot at `base`,
    /// holding no lock (its lock file was deleted with the directory).
    void map_live_namespace(uid_t base) {
        int go[2];
        ASSERT_EQ(::pipe(go), 0);
        child_ = ::fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            ::close(go[1]);
            if (::unshare(CLONE_NEWUSER) != 0) ::_exit(1);
            char byte;
            (void)::read(go[0], &byte, 1);  // wait until mapped, then hold until killed
            ::pause();
            ::_exit(0);
        }
        ::close(go[0]);
        // The child may not have unshared yet: wait until its namespace differs from ours.
        const std::string self_ns = std::filesystem::read_symlink("/proc/self/ns/user");
        const std::string child_ns = "/proc/" + std::to_string(child_) + "/ns/user";
        for (int i = 0; i < 10000 && std::filesystem::read_symlink(child_ns) == self_ns; ++i)
            ::usleep(1000);
        ASSERT_NE(std::filesystem::read_symlink(child_ns), self_ns) << "child did not unshare";
        const std::string map = "0 " + std::to_string(base) + " " + std::to_string(kIdRangeSize);
        std::ofstream(("/proc/" + std::to_string(child_) + "/uid_map")) << map;
        std::ofstream(("/proc/" + std::to_string(child_) + "/gid_map")) << map;
        ASSERT_EQ(::write(go[1], "1", 1), 1);
        ::close(go[1]);
    }
    std::string first_dir_, second_dir_;
    pid_t child_ = -1;
};

TEST_F(IdRangeReuse, ARangeALiveNamespaceMapsIsNotHandedOutWhenItsLockFileIsGone) {
    // The slot a fresh allocator would pick first.
    uid_t base = 0;
    {
        auto probe = IdRangeLease::acquire(first_dir_);
        ASSERT_TRUE(probe) << probe.error().describe();
        base = probe->base();
    }
    map_live_namespace(base);
    if (HasFatalFailure()) return;

    // A fresh allocator (empty lock dir: the restarted daemon's) must skip the live range.
    auto lease = IdRangeLease::acquire(second_dir_);
    ASSERT_TRUE(lease) << lease.error().describe();
    EXPECT_NE(lease->base(), base) << "handed out a range a live user namespace maps";
    EXPECT_TRUE(is_corral_range_id(lease->base()));
}

TEST_F(IdRangeReuse, TwoAcquiresAfterAWipeBothSkipARangeALiveNamespaceMaps) {
    // Issue 10, red-team round 3: the /proc scan runs only when a slot's lock file is new, since
    // an existing unlocked file was released by its holder. So a scan that finds the range in use
    // must leave no file behind: the second allocator would otherwise find one, unlocked, skip
    // the scan and hand the live range out (CVE-2018-18955's shape again).
    uid_t base = 0;
    {
        auto probe = IdRangeLease::acquire(first_dir_);
        ASSERT_TRUE(probe) << probe.error().describe();
        base = probe->base();
    }
    map_live_namespace(base);
    if (HasFatalFailure()) return;
    auto first = IdRangeLease::acquire(second_dir_);
    ASSERT_TRUE(first) << first.error().describe();
    EXPECT_NE(first->base(), base) << "the first allocator handed out the live range";
    auto second = IdRangeLease::acquire(second_dir_);
    ASSERT_TRUE(second) << second.error().describe();
    EXPECT_NE(second->base(), base) << "the second allocator handed out the live range";
    EXPECT_NE(second->base(), first->base());
    // And what is in place stays cheap: a released slot's file is reused, unlinked never.
    const uid_t reused = first->base();
    first = IdRangeLease{};
    auto third = IdRangeLease::acquire(second_dir_);
    ASSERT_TRUE(third) << third.error().describe();
    EXPECT_EQ(third->base(), reused);
}

TEST_F(IdRangeReuse, TheDefaultLockDirIsNotTheDaemonsRuntimeDirectory) {
    // systemd removes RuntimeDirectory=corral (/run/corral) when corrald stops or restarts.
    EXPECT_FALSE(std::string(kIdRangeLockDir).starts_with("/run/corral/")) << kIdRangeLockDir;
    std::ifstream unit(std::string(CORRAL_SOURCE_DIR) + "/deploy/systemd/corrald.service");
    std::string text((std::istreambuf_iterator<char>(unit)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(text.empty());
    EXPECT_NE(text.find("\nRuntimeDirectoryPreserve=yes\n"), std::string::npos);
}

}  // namespace
}  // namespace corral
