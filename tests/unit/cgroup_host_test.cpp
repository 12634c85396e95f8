// Parsing of /proc/self/mountinfo + /proc/self/cgroup into a CgroupHost (no privileges needed).
#include <gtest/gtest.h>

#include "isolation/cgroup.hpp"

namespace corral {
namespace {

// This machine (Debian 12 in a VM): v1 controllers each on their own mount, cgroup2 at
// /sys/fs/cgroup/unified without controllers, our memory cgroup delegated below /process_api.
constexpr const char* kHybridMountinfo =
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kHybridCgroup =
    "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
    "4:memory:/process_api/72d7eabca3128b20c1f3ff1546c669bc\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n"
    "0::/\n";

TEST(CgroupHost_Hybrid, FindsUnifiedMountAndEveryV1Controller) {
    auto host = parse_cgroup_host(kHybridMountinfo, kHybridCgroup);
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(host->layout, CgroupLayout::hybrid);
    EXPECT_EQ(host->v2_mount, "/sys/fs/cgroup/unified");
    EXPECT_EQ(host->v2_own, "/sys/fs/cgroup/unified");
    EXPECT_EQ(host->v1_own.at("memory"),
              "/sys/fs/cgroup/memory/process_api/72d7eabca3128b20c1f3ff1546c669bc");
    EXPECT_EQ(host->v1_own.at("pids"), "/sys/fs/cgroup/pids");
    EXPECT_EQ(host->v1_own.at("cpu"), "/sys/fs/cgroup/cpu");
    EXPECT_EQ(host->v1_own.at("cpuacct"), "/sys/fs/cgroup/cpuacct");
    EXPECT_EQ(host->v1_own.at("blkio"), "/sys/fs/cgroup/blkio");
    EXPECT_EQ(host->v1_own.at("name=systemd"), "/sys/fs/cgroup/systemd");
    EXPECT_TRUE(host->v2_controllers.empty());  // parsing never reads the filesystem
}

TEST(CgroupHost_Hybrid, JointControllersMapEachNameToTheSharedDirectory) {
    // The classic systemd hybrid layout: cpu,cpuacct and net_cls,net_prio share a hierarchy.
    const char* mountinfo =
        "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
        "31 25 0:27 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
        "35 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "36 25 0:32 / /sys/fs/cgroup/net_cls,net_prio rw - cgroup cgroup rw,net_cls,net_prio\n"
        "37 25 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    const char* cgroup =
        "5:memory:/user.slice/job\n4:net_cls,net_prio:/\n3:cpu,cpuacct:/user.slice/job\n"
        "1:name=systemd:/user.slice/job\n0::/user.slice/job\n";
    auto host = parse_cgroup_host(mountinfo, cgroup);
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(host->layout, CgroupLayout::hybrid);
    EXPECT_EQ(host->v2_own, "/sys/fs/cgroup/unified/user.slice/job");
    EXPECT_EQ(host->v1_own.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct/user.slice/job");
    EXPECT_EQ(host->v1_own.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct/user.slice/job");
    EXPECT_EQ(host->v1_own.at("net_prio"), "/sys/fs/cgroup/net_cls,net_prio");
    EXPECT_EQ(host->v1_own.at("memory"), "/sys/fs/cgroup/memory/user.slice/job");
    EXPECT_EQ(host->v1_own.at("name=systemd"), "/sys/fs/cgroup/systemd/user.slice/job");
}

TEST(CgroupHost_Unified, PureV2HostIsUnifiedWithOwnCgroupBelowTheMount) {
    const char* mountinfo =
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
        "rw,nsdelegate,memory_recursiveprot\n";
    const char* cgroup = "0::/system.slice/corrald.service\n";
    auto host = parse_cgroup_host(mountinfo, cgroup);
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(host->layout, CgroupLayout::unified);
    EXPECT_EQ(host->v2_mount, "/sys/fs/cgroup");
    EXPECT_EQ(host->v2_own, "/sys/fs/cgroup/system.slice/corrald.service");
    EXPECT_TRUE(host->v1_own.empty());
}

TEST(CgroupHost_Unified, NamedOnlyV1HierarchyDoesNotMakeTheHostHybrid) {
    const char* mountinfo =
        "25 22 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
        "26 25 0:24 / /run/elogind rw - cgroup cgroup rw,name=elogind\n";
    auto host = parse_cgroup_host(mountinfo, "1:name=elogind:/\n0::/x\n");
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(host->layout, CgroupLayout::unified);
    EXPECT_EQ(host->v1_own.at("name=elogind"), "/run/elogind");
}

TEST(CgroupHost_Namespace, MountRootIsStrippedFromOurPath) {
    // A container given only its own subtree: the mount's root (4th field) is that subtree.
    const char* mountinfo =
        "700 690 0:30 /kubepods/pod1/ctr /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
    auto host = parse_cgroup_host(mountinfo, "0::/kubepods/pod1/ctr/app\n");
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(host->v2_own, "/sys/fs/cgroup/app");
    auto at_root = parse_cgroup_host(mountinfo, "0::/kubepods/pod1/ctr\n");
    ASSERT_TRUE(at_root);
    EXPECT_EQ(at_root->v2_own, "/sys/fs/cgroup");
}

TEST(CgroupHost_Namespace, PathOutsideTheMountedSubtreeIsAnError) {
    const char* mountinfo = "700 690 0:30 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    // "/kubepods/pod10" shares a string prefix but is not below "/kubepods/pod1".
    auto host = parse_cgroup_host(mountinfo, "0::/kubepods/pod10\n");
    ASSERT_FALSE(host);
    EXPECT_NE(host.error().message.find("cgroup2 mount"), std::string::npos);
}

TEST(CgroupHost_Parse, EscapedSpacesInMountPointsAreDecoded) {
    const char* mountinfo = "25 22 0:23 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n";
    auto host = parse_cgroup_host(mountinfo, "0::/\n");
    ASSERT_TRUE(host);
    EXPECT_EQ(host->v2_own, "/sys/fs/my cgroup");
}

TEST(CgroupHost_Parse, PureV1HostWithoutCgroup2IsAnError) {
    const char* mountinfo = "37 25 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    auto host = parse_cgroup_host(mountinfo, "4:memory:/\n");
    ASSERT_FALSE(host);
}

TEST(CgroupHost_Parse, KeyedValuesSkipNonNumericLines) {
    auto values = parse_keyed_values("populated 1\nfrozen 0\nbogus\nmax max\noom_kill 3\n");
    EXPECT_EQ(values.at("populated"), 1u);
    EXPECT_EQ(values.at("frozen"), 0u);
    EXPECT_EQ(values.at("oom_kill"), 3u);
    EXPECT_EQ(values.count("max"), 0u);
    EXPECT_EQ(values.count("bogus"), 0u);
}

// Issue 11.1: a 6.1 kernel counts a refused fork in the forking task's own cgroup (the `main`
// leaf), not in the session that holds pids.max: the subtree's counters are summed.
TEST(PidsEvents_PerTaskKernel, RefusedForksInLeavesCountForTheSubtree) {
    std::vector<PidsEventsFiles> subtree = {{"max 0\n", std::nullopt},  // session: the limit
                                            {"max 5\n", std::nullopt},  // main leaf: the bomb
                                            {"max 2\n", std::nullopt}};
    EXPECT_EQ(count_pids_limit_hits(subtree), 7u);
}

// 6.12+: pids.events is hierarchical (the hit shows in the limited cgroup and every ancestor),
// so summing it would count one hit once per level; pids.events.local counts it once.
TEST(PidsEvents_HierarchicalKernel, EachHitCountsOnceWhereItsLimitIs) {
    std::vector<PidsEventsFiles> subtree = {{"max 4\n", "max 3\n"},   // session: 3 of its own
                                            {"max 1\n", "max 1\n"},   // a leaf's own limit
                                            {"max 0\n", "max 0\n"}};  // the bomb's leaf
    EXPECT_EQ(count_pids_limit_hits(subtree), 4u);
}

// 6.12+ mounted with pids_localevents: pids.events is per task again, .local stays zero.
TEST(PidsEvents_LocalEventsMount, FallsBackToThePerTaskCounters) {
    std::vector<PidsEventsFiles> subtree = {{"max 0\n", "max 0\n"}, {"max 9\n", "max 0\n"}};
    EXPECT_EQ(count_pids_limit_hits(subtree), 9u);
}

TEST(PidsEvents_NoController, NoFilesIsNoHit) {
    EXPECT_EQ(count_pids_limit_hits({{"", std::nullopt}, {"", std::nullopt}}), 0u);
    EXPECT_EQ(count_pids_limit_hits({}), 0u);
}

TEST(CgroupHost_Discover, ThisHostHasAUsableCgroup2Directory) {
    auto host = discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_FALSE(host->v2_own.empty());
    EXPECT_EQ(host->v2_own.rfind(host->v2_mount, 0), 0u);
}

}  // namespace
}  // namespace corral
