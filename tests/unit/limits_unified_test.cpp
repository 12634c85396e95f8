// The unified (v2) limit backend's path and format logic, checked against a temporary directory
// tree laid out like cgroupfs (regular files named like the kernel's interface files). This is a
// unit test of which files get which values, NOT a stand-in for the kernel: it cannot show that
// the kernel accepts a value or enforces it. The real-kernel side is in
// tests/integration/limits_test.cpp (controller enabling down the path with a controller this
// host's v2 tree really has, the no-internal-process EBUSY explanation, and the unavailable
// report for memory/pids/cpu/io on this hybrid host).
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/file_io.hpp"
#include "isolation/limits.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCgroupFiles[] = {"cgroup.controllers", "cgroup.subtree_control",
                                        "cgroup.procs", "cgroup.events", "cpu.stat"};
constexpr const char* kSessionFiles[] = {
    "memory.max",  "memory.swap.max", "memory.oom.group", "memory.events",  "pids.max",
    "pids.events", "cpu.max",         "io.weight",        "memory.current", "memory.peak"};

void touch(const fs::path& file, const std::string& content = "") {
    std::ofstream(file) << content;
}

std::string contents(const fs::path& file) {
    auto text = read_file(file.string());
    return text ? *text : "<missing>";
}

/// <tmp>/own/corral/sessions/s1, every level with the core cgroup files, the session with the
/// controller files a v2 kernel shows once memory, pids, cpu and io are enabled above it.
class FakeCgroupTree : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_FALSE(temp_.path().empty());
        own_ = tmp_ / "own";
        session_ = own_ / "corral" / "sessions" / "s1";
        fs::create_directories(session_);
        for (fs::path dir = session_;; dir = dir.parent_path()) {
            for (const char* file : kCgroupFiles) touch(dir / file);
            if (dir == own_) break;
        }
        for (const char* file : kSessionFiles) touch(session_ / file);
        touch(session_ / "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
        touch(session_ / "pids.events", "max 0\n");
        host_.layout = CgroupLayout::unified;
        host_.v2_mount = own_.string();
        host_.v2_own = own_.string();
        host_.v2_controllers = {"cpu", "io", "memory", "pids"};
    }

    Cgroup session() {
        auto cgroup = Cgroup::open_unowned(session_.string());
        EXPECT_TRUE(cgroup);
        return std::move(*cgroup);
    }

    test_support::TempDir temp_{"corral-limits-unit"};
    const fs::path tmp_ = temp_.path();
    fs::path own_, session_;
    CgroupHost host_;
};

TEST_F(FakeCgroupTree, UnifiedLimits_EnableControllersOnEveryLevelAndWriteLimitFiles) {
    Limits limits;
    limits.memory = 64ull << 20;
    limits.pids = 64;
    limits.cpu = 0.5;
    limits.oom_group = true;
    auto backend = make_unified_backend(host_);
    EXPECT_EQ(backend->name(), "unified");
    auto applied = backend->apply(session(), "s1", limits, Enforcement::strict);
    ASSERT_TRUE(applied) << applied.error().describe();

    // io comes with memory and pids without a limit: its io.stat feeds the usage (issue 17.9).
    for (const fs::path& dir : {own_, own_ / "corral", own_ / "corral" / "sessions"})
        EXPECT_EQ(contents(dir / "cgroup.subtree_control"), "+cpu +io +memory +pids") << dir;
    EXPECT_EQ(contents(session_ / "memory.max"), "67108864");
    EXPECT_EQ(contents(session_ / "memory.swap.max"), "0") << "swap is off by default";
    EXPECT_EQ(contents(session_ / "pids.max"), "64");
    EXPECT_EQ(contents(session_ / "cpu.max"), "50000 100000");
    EXPECT_EQ(contents(session_ / "memory.oom.group"), "1");
    EXPECT_EQ(contents(session_ / "io.weight"), "") << "io was not asked for";
    EXPECT_TRUE((*applied)->join_fds().empty()) << "nothing to join outside v2";
    EXPECT_TRUE((*applied)->not_enforced().empty());
    EXPECT_FALSE((*applied)->supervisor_must_end_session_on_oom());
}

// Issue 11.5: where no cgroup corral may use can have controllers (place_cgroups found none),
// every limit says why, strict refuses it by name and nothing is written.
TEST_F(FakeCgroupTree, UnifiedLimits_NoPlacementRefusesEveryLimitWithTheReason) {
    host_.limits_unavailable = "`/x/session-1.scope` holds other processes (42)";
    auto backend = make_unified_backend(host_);
    for (LimitKind kind : {LimitKind::memory, LimitKind::pids, LimitKind::cpu}) {
        EXPECT_FALSE(backend->support().get(kind).enforceable) << limit_name(kind);
        EXPECT_EQ(backend->support().get(kind).detail, host_.limits_unavailable);
    }
    Limits limits;
    limits.pids = 10;
    auto refused = backend->apply(session(), "s1", limits, Enforcement::strict);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().describe().find("limit `pids` cannot be enforced"),
              std::string::npos)
        << refused.error().describe();
    EXPECT_NE(refused.error().describe().find("holds other processes (42)"), std::string::npos);
    EXPECT_EQ(contents(session_ / "pids.max"), "");
    EXPECT_EQ(contents(own_ / "cgroup.subtree_control"), "");
    auto lenient = backend->apply(session(), "s1", limits, Enforcement::best_effort);
    ASSERT_TRUE(lenient) << lenient.error().describe();
    ASSERT_EQ((*lenient)->not_enforced().size(), 1u);
    EXPECT_EQ((*lenient)->not_enforced()[0], "pids: " + host_.limits_unavailable);
}

TEST_F(FakeCgroupTree, UnifiedLimits_ExplicitSwapIsWrittenAsIs) {
    Limits limits;
    limits.memory = 1ull << 30;
    limits.swap = 256ull << 20;
    auto applied = make_unified_backend(host_)->apply(session(), "s1", limits, Enforcement::strict);
    ASSERT_TRUE(applied) << applied.error().describe();
    EXPECT_EQ(contents(session_ / "memory.swap.max"), "268435456");
}

TEST_F(FakeCgroupTree, UnifiedLimits_StrictRefusesAMissingControllerAndWritesNothing) {
    host_.v2_controllers = {"cpu", "pids"};
    Limits limits;
    limits.memory = 64ull << 20;
    limits.pids = 10;
    auto applied = make_unified_backend(host_)->apply(session(), "s1", limits, Enforcement::strict);
    ASSERT_FALSE(applied);
    const std::string message = applied.error().describe();
    EXPECT_NE(message.find("limit `memory` cannot be enforced"), std::string::npos) << message;
    EXPECT_NE(message.find("cgroup.controllers"), std::string::npos) << message;
    EXPECT_EQ(contents(session_ / "pids.max"), "") << "refused before writing anything";
    EXPECT_EQ(contents(own_ / "cgroup.subtree_control"), "");
}

TEST_F(FakeCgroupTree, UnifiedLimits_BestEffortAppliesWhatItCanAndListsTheRest) {
    host_.v2_controllers = {"pids"};
    Limits limits;
    limits.memory = 64ull << 20;
    limits.pids = 10;
    auto applied =
        make_unified_backend(host_)->apply(session(), "s1", limits, Enforcement::best_effort);
    ASSERT_TRUE(applied) << applied.error().describe();
    EXPECT_EQ(contents(session_ / "pids.max"), "10");
    EXPECT_EQ(contents(session_ / "memory.max"), "");
    EXPECT_EQ(contents(own_ / "cgroup.subtree_control"), "+pids");
    auto notes = (*applied)->not_enforced();
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_EQ(notes[0].rfind("memory: ", 0), 0u) << notes[0];
    EXPECT_EQ(notes[1].rfind("swap: ", 0), 0u) << notes[1];
}

TEST_F(FakeCgroupTree, UnifiedLimits_IoWeightOnlyWhereASchedulerHonoursIt) {
    Limits limits;
    limits.io_weight = 200;
    auto backend = make_unified_backend(host_);
    auto applied = backend->apply(session(), "s1", limits, Enforcement::best_effort);
    ASSERT_TRUE(applied) << applied.error().describe();
    if (host_has_weighted_io_scheduler()) {
        EXPECT_EQ(contents(session_ / "io.weight"), "default 200");
    } else {
        EXPECT_FALSE(backend->support().get(LimitKind::io).enforceable);
        ASSERT_EQ((*applied)->not_enforced().size(), 1u);
        EXPECT_NE((*applied)->not_enforced()[0].find("bfq"), std::string::npos);
    }
}

TEST_F(FakeCgroupTree, UnifiedLimits_SessionOutsideOurCgroupIsRefused) {
    fs::create_directories(tmp_ / "elsewhere");
    auto outside = Cgroup::open_unowned((tmp_ / "elsewhere").string());
    ASSERT_TRUE(outside);
    Limits limits;
    limits.pids = 10;
    auto applied = make_unified_backend(host_)->apply(*outside, "x", limits, Enforcement::strict);
    ASSERT_FALSE(applied);
    EXPECT_NE(applied.error().describe().find("not below our cgroup"), std::string::npos);
}

TEST_F(FakeCgroupTree, UnifiedLimits_EventsComeFromMemoryAndPidsEvents) {
    Limits limits;
    limits.memory = 64ull << 20;
    limits.pids = 64;
    auto applied = make_unified_backend(host_)->apply(session(), "s1", limits, Enforcement::strict);
    ASSERT_TRUE(applied);
    // Regular files cannot be polled for changes the way kernfs files can (that is tested on
    // the real kernel in integration/event_watch_test.cpp): here only the counters are read.
    EXPECT_TRUE((*applied)->event_fds().empty());
    touch(session_ / "memory.events", "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n");
    touch(session_ / "pids.events", "max 3\n");
    auto events = (*applied)->read_events();
    EXPECT_EQ(events.oom_kills, 2u);
    EXPECT_EQ(events.memory_max_hits, 7u);
    EXPECT_EQ(events.pids_limit_hits, 3u);
}

TEST(LimitsFormat, CpuQuotaAndBlkioWeight) {
    EXPECT_EQ(cpu_quota_usec(0.2), 20000u);
    EXPECT_EQ(cpu_quota_usec(1.5), 150000u);
    EXPECT_EQ(cpu_quota_usec(0.001), 1000u) << "the kernel's minimum quota is 1 ms";
    EXPECT_EQ(blkio_weight_from_io_weight(100), 500u);
    EXPECT_EQ(blkio_weight_from_io_weight(1), 10u);
    EXPECT_EQ(blkio_weight_from_io_weight(10000), 1000u);
}

TEST(LimitsFormat, MemoryImpliesSwapOff) {
    Limits limits;
    EXPECT_TRUE(requested_limits(limits).empty());
    limits.memory = 1;
    EXPECT_EQ(requested_limits(limits),
              (std::vector<LimitKind>{LimitKind::memory, LimitKind::swap}));
    EXPECT_STREQ(limit_name(LimitKind::pids), "pids");
}

}  // namespace
}  // namespace corral
