// The session uid-range allocator (isolation/id_range.hpp): slots are disjoint, never shared
// while held, free again when released, and all of them lie in the documented block. Uses a lock
// dir of its own, so it needs no privileges and does not touch the host's /run/corral.
#include "isolation/id_range.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

class IdRangeTest : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(dir_.empty()); }
    test_support::TempDir temp_{"corral-id-range"};
    const std::string dir_ = temp_.path();
};

TEST_F(IdRangeTest, RangesLieAboveSystemdContainerRangesAndBelowTwoToThe31) {
    EXPECT_GE(kIdRangeFirst, 0x70000000u);
    EXPECT_LE(static_cast<uint64_t>(kIdRangeFirst) + uint64_t{kIdRangeSlots} * kIdRangeSize,
              0x7FFE0000u);
    EXPECT_FALSE(is_corral_range_id(0));
    EXPECT_FALSE(is_corral_range_id(65534));
    EXPECT_TRUE(is_corral_range_id(kIdRangeFirst));
    EXPECT_FALSE(is_corral_range_id(0x7FFE0000u));
}

// Precedent: issue 10 item 3/4 — two sessions sharing host ids could signal, ptrace and read
// each other's files as the same user.
TEST_F(IdRangeTest, HeldLeasesNeverShareARange) {
    std::vector<IdRangeLease> held;
    for (int i = 0; i < 8; ++i) {
        auto lease = IdRangeLease::acquire(dir_);
        ASSERT_TRUE(lease) << lease.error().describe();
        for (const auto& other : held) EXPECT_NE(other.base(), lease->base());
        EXPECT_TRUE(is_corral_range_id(lease->base()));
        EXPECT_TRUE(is_corral_range_id(lease->outside(kIdRangeSize - 1)));
        EXPECT_EQ((lease->base() - kIdRangeFirst) % kIdRangeSize, 0u);
        held.push_back(std::move(*lease));
    }
}

// A slot this process holds is skipped without a look at its lock file (id_range.hpp: a scan
// from slot 0 opened and flock()ed every held slot, ~3,000 system calls per session beside 1,000),
// so it is never handed out twice by this process even when its file is gone (a lock dir wiped
// under live holders, issue 10's red-team round 3): with the file removed, an allocator that
// looked would make a fresh one and lock it, and no process maps the range in this test.
TEST_F(IdRangeTest, ASlotThisProcessHoldsIsNotHandedOutAgainEvenWithoutItsLockFile) {
    auto held = IdRangeLease::acquire(dir_);
    ASSERT_TRUE(held) << held.error().describe();
    const uint32_t slot = (held->base() - kIdRangeFirst) / kIdRangeSize;
    ASSERT_EQ(::unlink((dir_ + "/" + std::to_string(slot) + ".lock").c_str()), 0);
    auto next = IdRangeLease::acquire(dir_);
    ASSERT_TRUE(next) << next.error().describe();
    EXPECT_NE(next->base(), held->base()) << "a held slot was leased again";
    // A moved lease is still held. (That a released slot is free again is
    // AReleasedRangeIsFreeAgain's: here the slot has no lock file, and a new one is made only
    // after a /proc scan, which a sandbox of a test running beside this one may rightly fail.)
    IdRangeLease moved = std::move(*held);
    auto third = IdRangeLease::acquire(dir_);
    ASSERT_TRUE(third);
    EXPECT_NE(third->base(), moved.base());
    EXPECT_NE(third->base(), next->base());
}

// Slots are the machine's: a sandbox of a test running in parallel may start mapping the slot
// between the release and the next acquire, and then it is rightly skipped. So the claim is that
// a release makes the slot available again at least once in a few tries, never that it must be.
TEST_F(IdRangeTest, AReleasedRangeIsFreeAgain) {
    bool reused = false;
    for (int attempt = 0; attempt < 20 && !reused; ++attempt) {
        uid_t first;
        {
            auto lease = IdRangeLease::acquire(dir_);
            ASSERT_TRUE(lease);
            first = lease->base();
        }
        auto again = IdRangeLease::acquire(dir_);
        ASSERT_TRUE(again);
        reused = again->base() == first;
    }
    EXPECT_TRUE(reused) << "a released slot was never handed out again";
}

// Independent processes (`corral run`s, corrald) share one allocator: a slot another process
// holds is skipped, and a process that inherited the lock (the namespace holder) keeps it taken.
TEST_F(IdRangeTest, ASlotHeldByAnotherProcessIsSkipped) {
    auto mine = IdRangeLease::acquire(dir_);
    ASSERT_TRUE(mine);
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t child = ::fork();
    if (child == 0) {
        // The lock dir spelled another way: a fork keeps our registry of held slots, which would
        // skip the slot without a look; another program (a `corral run`) has none, and only its
        // flock() of the slot's file can find the slot taken.
        auto theirs = IdRangeLease::acquire(dir_ + "/.");
        char answer = theirs && theirs->base() != mine->base() ? 'y' : 'n';
        ::_exit(::write(ready[1], &answer, 1) == 1 && answer == 'y' ? 0 : 1);
    }
    ::close(ready[1]);
    char answer = 0;
    ASSERT_EQ(::read(ready[0], &answer, 1), 1);
    ::close(ready[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_EQ(answer, 'y');
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace corral
