#include "isolation/mount_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace corral {
namespace {

using Kind = MountStep::Kind;

Policy isolated_policy() {
    Policy policy;
    policy.namespaces.pid = true;
    policy.namespaces.mount = true;
    policy.namespaces.ipc = true;
    policy.namespaces.uts = true;
    policy.namespaces.network = NetworkMode::isolated;
    policy.filesystem.read_only = {"/usr", "/etc/"};
    policy.filesystem.read_write = {"/var/cache"};
    policy.filesystem.hidden = {"/home", "/root"};
    policy.filesystem.tmpfs = {{"/tmp", 64u << 20}};
    return policy;
}

/// Where the step of `kind` at `target` stands in `plan`; plan.size() where there is none.
size_t index_of(const std::vector<MountStep>& plan, Kind kind, const std::string& target) {
    return static_cast<size_t>(std::find_if(plan.begin(), plan.end(),
                                            [&](const MountStep& step) {
                                                return step.kind == kind && step.target == target;
                                            }) -
                               plan.begin());
}

TEST(MountPlan, DefaultLikePolicyCompilesToOrderedSteps) {
    auto plan = compile_mount_plan(isolated_policy(), {"/srv/corral/s1", "/workspace"});
    ASSERT_TRUE(plan.ok()) << plan.error().describe();
    std::vector<MountStep> expected = {
        {Kind::bind_read_only, "/usr", "/usr", 0},
        {Kind::bind_read_only, "/etc", "/etc", 0},
        {Kind::bind_read_write, "/var/cache", "/var/cache", 0},
        {Kind::hide, "", "/home", 0},
        {Kind::hide, "", "/root", 0},
        {Kind::tmpfs, "", "/tmp", 64u << 20},
        {Kind::workdir, "/srv/corral/s1", "/workspace", 0},
        {Kind::dev, "", "/dev", 0},
        {Kind::sysfs, "", "/sys", 0},
        {Kind::proc, "", "/proc", 0},
    };
    EXPECT_EQ(*plan, expected);
}

// A fresh /dev, /sys or /proc mounted after a hidden path, a tmpfs or the workdir beneath it
// covered them (security/filesystem_escape_test.cpp: KernelFilesystemMasks); what is elsewhere
// keeps its place.
TEST(MountPlan, WhatLiesBeneathAFreshKernelFilesystemComesAfterIt) {
    Policy policy = isolated_policy();
    policy.filesystem.hidden = {"/home", "/proc/sys/kernel", "/sys/firmware"};
    policy.filesystem.tmpfs = {{"/dev/shm", 8u << 20}, {"/tmp", 0}};
    auto plan = compile_mount_plan(policy, {"/dev/shm/job", "/dev/shm/job"});
    ASSERT_TRUE(plan.ok()) << plan.error().describe();
    const size_t dev = index_of(*plan, Kind::dev, "/dev");
    const size_t sys = index_of(*plan, Kind::sysfs, "/sys");
    const size_t proc = index_of(*plan, Kind::proc, "/proc");
    ASSERT_LT(proc, plan->size());
    EXPECT_GT(index_of(*plan, Kind::tmpfs, "/dev/shm"), dev);
    EXPECT_GT(index_of(*plan, Kind::workdir, "/dev/shm/job"), dev);
    EXPECT_LT(index_of(*plan, Kind::workdir, "/dev/shm/job"), plan->size());
    EXPECT_GT(index_of(*plan, Kind::hide, "/sys/firmware"), sys);
    EXPECT_GT(index_of(*plan, Kind::hide, "/proc/sys/kernel"), proc);
    EXPECT_LT(index_of(*plan, Kind::hide, "/home"), dev) << "elsewhere: before, as always";
    EXPECT_LT(index_of(*plan, Kind::tmpfs, "/tmp"), dev);
    // The host's /proc (no pid namespace), bound with the root: protected after every bind, and
    // what is hidden beneath it after that (as beneath a fresh one).
    Policy without_pid = policy;
    without_pid.namespaces.pid = false;
    without_pid.filesystem.read_write = {"/proc/sys"};
    auto kept = compile_mount_plan(without_pid, {"/srv/job", "/workspace"});
    ASSERT_TRUE(kept.ok());
    const size_t host_proc = index_of(*kept, Kind::host_proc, "/proc");
    ASSERT_LT(host_proc, kept->size());
    EXPECT_EQ(index_of(*kept, Kind::proc, "/proc"), kept->size()) << "no fresh /proc";
    EXPECT_GT(host_proc, index_of(*kept, Kind::bind_read_write, "/proc/sys"));
    EXPECT_GT(index_of(*kept, Kind::hide, "/proc/sys/kernel"), host_proc);
    EXPECT_GT(index_of(*kept, Kind::hide, "/sys/firmware"), index_of(*kept, Kind::sysfs, "/sys"));
}

TEST(MountPlan, HiddenAndTmpfsBeneathTheWorkdirComeAfterItsBind) {
    Policy policy = isolated_policy();
    policy.filesystem.hidden = {"/home", "/home/u/proj/.secrets"};
    policy.filesystem.tmpfs = {{"/home/u/proj/cache", 0}};
    auto plan = compile_mount_plan(policy, {"/home/u/proj", "/home/u/proj"});
    ASSERT_TRUE(plan.ok()) << plan.error().describe();
    size_t workdir = index_of(*plan, Kind::workdir, "/home/u/proj");
    ASSERT_LT(workdir, plan->size());
    EXPECT_LT(index_of(*plan, Kind::hide, "/home"), workdir) << "the workdir must stay visible";
    EXPECT_GT(index_of(*plan, Kind::hide, "/home/u/proj/.secrets"), workdir) << "or the bind uncovers it";
    EXPECT_GT(index_of(*plan, Kind::tmpfs, "/home/u/proj/cache"), workdir);
    EXPECT_LT(index_of(*plan, Kind::tmpfs, "/home/u/proj/cache"), plan->size());
}

// The workdir's inside path compared as written: `mount: /home/u/proj/` put what is hidden beneath
// it before its bind, which then uncovered it (helper 25's review of stop 37).
TEST(MountPlan, TheWorkdirComparesNormalisedWithWhatLiesBeneathIt) {
    Policy policy = isolated_policy();
    policy.filesystem.hidden = {"/home/u/proj/.secrets"};
    for (const std::string inside : {"/home/u/proj/", "//home/u/./proj//"}) {
        auto plan = compile_mount_plan(policy, {"/srv/proj", inside});
        ASSERT_TRUE(plan.ok()) << plan.error().describe();
        const size_t workdir = index_of(*plan, Kind::workdir, "/home/u/proj");
        const size_t secrets = index_of(*plan, Kind::hide, "/home/u/proj/.secrets");
        ASSERT_LT(workdir, plan->size()) << inside << ": the workdir's target is normalised";
        EXPECT_GT(secrets, workdir) << inside << ": the bind would uncover the hidden path";
        EXPECT_LT(secrets, plan->size()) << inside;
    }
}

TEST(MountPlan, DescribesOneLinePerStep) {
    auto plan = compile_mount_plan(isolated_policy(), {"/srv/corral/s1", "/workspace"});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(describe_mount_plan(*plan),
              "ro-bind /usr -> /usr\n"
              "ro-bind /etc -> /etc\n"
              "bind /var/cache -> /var/cache\n"
              "hide /home\n"
              "hide /root\n"
              "tmpfs /tmp size=67108864\n"
              "workdir /srv/corral/s1 -> /workspace\n"
              "dev /dev\n"
              "sysfs /sys\n"
              "proc /proc\n");
}

TEST(MountPlan, WholeRootReadOnlyIsOneRecursiveStep) {
    Policy policy;
    policy.namespaces.mount = true;
    policy.filesystem.read_only = {"/"};
    auto plan = compile_mount_plan(policy, {});
    ASSERT_TRUE(plan.ok());
    std::vector<MountStep> expected = {
        {Kind::bind_read_only, "/", "/", 0},
        {Kind::dev, "", "/dev", 0},
        {Kind::host_proc, "", "/proc", 0},  // no pid namespace: the host's, protected
    };
    EXPECT_EQ(*plan, expected);
}

TEST(MountPlan, NoFreshProcWithoutPidNamespace) {
    Policy policy;
    policy.namespaces.mount = true;
    auto plan = compile_mount_plan(policy, {"/work/a", ""});
    ASSERT_TRUE(plan.ok());
    for (const auto& step : *plan) EXPECT_NE(step.kind, Kind::proc);
    for (const auto& step : *plan) EXPECT_NE(step.kind, Kind::sysfs);
    // The workdir appears at its host path when no inside path is given.
    EXPECT_EQ(plan->front(), (MountStep{Kind::workdir, "/work/a", "/work/a", 0}));
}

TEST(MountPlan, EmptyWithoutMountNamespace) {
    Policy policy = isolated_policy();
    policy.namespaces.mount = false;
    auto plan = compile_mount_plan(policy, {"/srv/x", "/workspace"});
    ASSERT_TRUE(plan.ok());
    EXPECT_TRUE(plan->empty());
}

TEST(MountPlan, NormalizesSlashesAndDots) {
    Policy policy;
    policy.namespaces.mount = true;
    policy.filesystem.hidden = {"//home/./user//"};
    auto plan = compile_mount_plan(policy, {});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->front().target, "/home/user");
}

TEST(MountPlan, RelativeReadOnlyPathIsAnErrorNamingTheKey) {
    Policy policy;
    policy.namespaces.mount = true;
    policy.filesystem.read_only = {"usr"};
    auto plan = compile_mount_plan(policy, {});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("filesystem.read_only"), std::string::npos);
    EXPECT_NE(plan.error().message.find("`usr`"), std::string::npos);
}

TEST(MountPlan, EmptyAndDotDotPathsAreErrors) {
    Policy policy;
    policy.namespaces.mount = true;
    policy.filesystem.hidden = {""};
    auto plan = compile_mount_plan(policy, {});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("filesystem.hidden"), std::string::npos);

    policy.filesystem.hidden = {};
    policy.filesystem.tmpfs = {{"/usr/../etc", 0}};
    plan = compile_mount_plan(policy, {});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("filesystem.tmpfs"), std::string::npos);

    policy.filesystem.tmpfs = {};
    policy.filesystem.read_write = {"data"};
    plan = compile_mount_plan(policy, {});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("filesystem.read_write"), std::string::npos);
}

TEST(MountPlan, RelativeWorkdirIsAnError) {
    Policy policy;
    policy.namespaces.mount = true;
    auto plan = compile_mount_plan(policy, {"/srv/x", "workspace"});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("workdir.mount"), std::string::npos);
}

TEST(MountPlan, HidingOrReplacingRootIsRefused) {
    Policy policy;
    policy.namespaces.mount = true;
    policy.filesystem.hidden = {"/"};
    EXPECT_FALSE(compile_mount_plan(policy, {}).ok());
    policy.filesystem.hidden = {};
    policy.filesystem.tmpfs = {{"/", 0}};
    EXPECT_FALSE(compile_mount_plan(policy, {}).ok());
}

// Issue 15: an isolated sandbox's /etc/resolv.conf is the daemon's file (its own resolver),
// bound read-only after the policy's binds of /etc, so none of them covers it; a host-network
// sandbox keeps the host's.
TEST(MountPlan, IsolatedNetworkGetsTheDaemonsResolvConfLast) {
    auto plan = compile_mount_plan(isolated_policy(), {"/srv/corral/s1", "/workspace"},
                                   "/var/lib/corral/resolv.conf");
    ASSERT_TRUE(plan.ok()) << plan.error().describe();
    // A step of its own: it goes wherever /etc/resolv.conf leads (mounts.cpp, add_resolv_conf).
    const MountStep resolv{Kind::resolv_conf, "/var/lib/corral/resolv.conf", "/etc/resolv.conf",
                           0, -1, true};
    auto at = std::find(plan->begin(), plan->end(), resolv);
    ASSERT_NE(at, plan->end()) << describe_mount_plan(*plan);
    EXPECT_EQ((at + 1)->kind, Kind::dev) << "after every file step, before /dev";
    EXPECT_NE(describe_mount_plan(*plan).find(
                  "resolv.conf /var/lib/corral/resolv.conf -> /etc/resolv.conf\n"),
              std::string::npos);
    Policy host = isolated_policy();
    host.namespaces.network = NetworkMode::host;
    auto host_plan = compile_mount_plan(host, {"/srv/corral/s1", "/workspace"}, "/var/lib/corral/resolv.conf");
    ASSERT_TRUE(host_plan.ok());
    EXPECT_EQ(std::find(host_plan->begin(), host_plan->end(), resolv), host_plan->end());
}

}  // namespace
}  // namespace corral
