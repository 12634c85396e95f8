// Where corral builds its cgroups (cgroup_placement.hpp), decided from observed facts. The real
// kernel side runs under ../shared/vm/pure-v2 (the limits, corral run and session manager suites
// from the root cgroup and from --cgroup /user.slice/user-0.slice/session-1.scope).
#include "isolation/cgroup_placement.hpp"

#include <gtest/gtest.h>

namespace corral {
namespace {

CgroupHost unified_host(const std::string& own) {
    CgroupHost host;
    host.layout = CgroupLayout::unified;
    host.v2_mount = "/sys/fs/cgroup";
    host.v2_own = "/sys/fs/cgroup" + own;
    return host;
}

/// A login shell's place on a systemd host: the scope holds the shell.
PlacementFacts shared_scope() {
    PlacementFacts facts;
    facts.own_holds_others = true;
    facts.others = "149 152";
    facts.mount_is_root = true;
    facts.root_user = true;
    return facts;
}

TEST(CgroupPlacement_Own, TheRootCgroupIsUsedAsIs) {
    PlacementFacts facts = shared_scope();
    facts.own_is_root = true;  // the root is exempt from the no-internal-process rule
    auto plan = plan_cgroup_placement(unified_host(""), facts);
    EXPECT_EQ(plan.mode, PlacementMode::own);
    EXPECT_EQ(plan.base, "/sys/fs/cgroup");
}

TEST(CgroupPlacement_Own, ADelegatedCgroupWithNoOtherProcessIsUsedAsIs) {
    PlacementFacts facts = shared_scope();
    facts.own_holds_others = false;  // corrald.service with Delegate=yes
    facts.systemd_running = true;
    facts.can_request_scope = true;
    auto plan = plan_cgroup_placement(unified_host("/system.slice/corrald.service"), facts);
    EXPECT_EQ(plan.mode, PlacementMode::own);
    EXPECT_FALSE(plan.step_into_leaf) << "corrald leaves by itself";
    EXPECT_EQ(plan.base, "/sys/fs/cgroup/system.slice/corrald.service");
}

// `systemd-run --scope -p Delegate=yes corral run ...`, or corral run as a container's only
// process: alone in its cgroup, it steps into a leaf of it rather than asking for more.
TEST(CgroupPlacement_Own, AloneInItsCgroupTheCallerStepsIntoALeaf) {
    PlacementFacts facts = shared_scope();
    facts.own_holds_others = false;
    facts.caller_in_own = true;
    facts.systemd_running = true;
    facts.can_request_scope = true;
    auto plan = plan_cgroup_placement(unified_host("/system.slice/run-r1.scope"), facts);
    EXPECT_EQ(plan.mode, PlacementMode::own);
    EXPECT_TRUE(plan.step_into_leaf);
    EXPECT_NE(plan.reason.find("/system.slice/run-r1.scope/self"), std::string::npos)
        << plan.reason;
}

TEST(CgroupPlacement_Systemd, ASharedScopeAsksSystemdForADelegatedOne) {
    PlacementFacts facts = shared_scope();
    facts.systemd_running = true;
    facts.can_request_scope = true;
    auto plan = plan_cgroup_placement(unified_host("/user.slice/user-0.slice/session-1.scope"), facts);
    EXPECT_EQ(plan.mode, PlacementMode::systemd_scope);
    EXPECT_NE(plan.reason.find("Delegate=yes"), std::string::npos) << plan.reason;
}

// Under systemd, corral never builds beside systemd's own tree below the root, even as root:
// systemd owns that tree and would fight over it. Without a D-Bus client it says why instead.
TEST(CgroupPlacement_Systemd, WithoutADbusClientItIsUnavailableWithTheReason) {
    PlacementFacts facts = shared_scope();
    facts.systemd_running = true;
    facts.can_request_scope = false;
    auto plan = plan_cgroup_placement(unified_host("/user.slice/user-0.slice/session-1.scope"), facts);
    EXPECT_EQ(plan.mode, PlacementMode::unavailable);
    EXPECT_NE(plan.reason.find("systemd-run --scope -p Delegate=yes"), std::string::npos)
        << plan.reason;
    EXPECT_NE(plan.reason.find("149 152"), std::string::npos) << "names the other processes";
}

TEST(CgroupPlacement_Cgroupfs, RootWithoutSystemdBuildsBelowTheRootCgroup) {
    auto plan = plan_cgroup_placement(unified_host("/user.slice/user-0.slice/session-1.scope"),
                                      shared_scope());
    EXPECT_EQ(plan.mode, PlacementMode::cgroupfs_root);
    EXPECT_EQ(plan.base, "/sys/fs/cgroup");
}

// Security (issue 11.5; the cgroup escapes of CVE-2022-0492 began with a container writing
// cgroups outside its own): corral goes above its own cgroup only as root, only without
// systemd, and only to the real root of the mount, never out of a cgroup namespace's root.
TEST(CgroupPlacement_Cgroupfs, NeverAboveItsCgroupUnlessRootAndTheRealRootIsMounted) {
    PlacementFacts not_root = shared_scope();
    not_root.root_user = false;
    auto plan = plan_cgroup_placement(unified_host("/user.slice/user-1000.slice/session-2.scope"),
                                      not_root);
    EXPECT_EQ(plan.mode, PlacementMode::unavailable);
    EXPECT_NE(plan.reason.find("not root"), std::string::npos) << plan.reason;

    PlacementFacts namespaced = shared_scope();
    namespaced.mount_is_root = false;  // a container: the mount shows its cgroup namespace root
    plan = plan_cgroup_placement(unified_host("/job"), namespaced);
    EXPECT_EQ(plan.mode, PlacementMode::unavailable);
    EXPECT_NE(plan.reason.find("not the root cgroup"), std::string::npos) << plan.reason;
}

// Our hybrid machines (DEVELOPERS.md): the v2 tree carries no controllers, so nothing ever moves
// out of our own cgroups there, whatever else holds them.
TEST(CgroupPlacement_Hybrid, AlwaysOwnCgroup) {
    PlacementFacts facts = shared_scope();
    facts.hybrid = true;
    CgroupHost host = unified_host("/process_api/x");
    host.layout = CgroupLayout::hybrid;
    auto plan = plan_cgroup_placement(host, facts);
    EXPECT_EQ(plan.mode, PlacementMode::own);
    EXPECT_EQ(plan.base, host.v2_own);
}

TEST(CgroupPlacement_Names, EveryModeHasAName) {
    EXPECT_STREQ(placement_mode_name(PlacementMode::own), "own");
    EXPECT_STREQ(placement_mode_name(PlacementMode::systemd_scope), "systemd-scope");
    EXPECT_STREQ(placement_mode_name(PlacementMode::cgroupfs_root), "cgroupfs-root");
    EXPECT_STREQ(placement_mode_name(PlacementMode::unavailable), "unavailable");
}

}  // namespace
}  // namespace corral
