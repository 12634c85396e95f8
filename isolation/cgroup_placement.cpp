// Where corral builds its cgroups: own cgroup, a systemd scope, or below the root (see the header).
#include "isolation/cgroup_placement.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/file_io.hpp"

namespace corral {
namespace {

std::string unit_name(const PlacementOptions& options) {
    return options.unit_prefix + "-" + std::to_string(::getpid()) + ".scope";
}

/// Moves this process into `<dir>/self` (created), so `dir` itself holds no process.
Status enter_self_leaf(const std::string& dir) {
    const std::string leaf = dir + "/self";
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST)
        return sys_error("mkdir `" + leaf + "`");
    CORRAL_TRY(write_file(leaf + "/cgroup.procs", "0"), "move into `" + leaf + "`");
    return {};
}

}  // namespace

const char* placement_mode_name(PlacementMode mode) {
    switch (mode) {
        case PlacementMode::own:
            return "own";
        case PlacementMode::systemd_scope:
            return "systemd-scope";
        case PlacementMode::cgroupfs_root:
            return "cgroupfs-root";
        case PlacementMode::unavailable:
            return "unavailable";
    }
    return "?";
}

PlacementFacts observe_placement_facts(const CgroupHost& host, const PlacementOptions& options) {
    PlacementFacts facts;
    facts.hybrid = host.layout == CgroupLayout::hybrid;
    facts.can_request_scope = static_cast<bool>(options.request_scope);
    facts.root_user = ::geteuid() == 0;
    // A hybrid host's plan is decided by that alone (plan_cgroup_placement's first case): nothing
    // else is looked at, on every `corral run` (issue 18).
    if (facts.hybrid) return facts;
    facts.own_is_root = is_real_root_cgroup(host.v2_own);
    facts.mount_is_root = is_real_root_cgroup(host.v2_mount);
    facts.systemd_running = ::access("/run/systemd/system", F_OK) == 0;  // sd_booted()
    // In the real root, too, the plan is decided before it matters who else lives in v2_own
    // (plan_cgroup_placement's second case). There v2_own is the root cgroup, which holds every
    // process of the host: reading its cgroup.procs (the kernel walks every task) and parsing it
    // cost each `corral run` ~0.1 ms of CPU on the 2-vCPU machine, more on a busy host.
    if (facts.own_is_root) return facts;
    if (auto procs = read_file(host.v2_own + "/cgroup.procs")) {
        std::istringstream lines(*procs);
        int shown = 0;
        const pid_t self = ::getpid();
        for (pid_t pid; lines >> pid;) {
            if (pid == self) {
                facts.caller_in_own = !options.caller_leaves_own;
                continue;
            }
            facts.own_holds_others = true;
            if (shown++ < 5)
                facts.others += (facts.others.empty() ? "" : " ") + std::to_string(pid);
        }
    }
    return facts;
}

CgroupPlan plan_cgroup_placement(const CgroupHost& host, const PlacementFacts& facts) {
    if (facts.hybrid)
        return {PlacementMode::own, host.v2_own,
                "hybrid host: the cgroup2 tree only tracks and kills, limits go through v1"};
    if (facts.own_is_root)
        return {PlacementMode::own, host.v2_own,
                "the root cgroup (exempt from the no-internal-process rule)"};
    if (!facts.own_holds_others && !facts.caller_in_own)
        return {PlacementMode::own, host.v2_own,
                "`" + host.v2_own + "` holds no other process (delegated to corral)"};
    if (!facts.own_holds_others)
        return {PlacementMode::own, host.v2_own,
                "`" + host.v2_own + "` holds only corral, which steps into `" + host.v2_own +
                    "/self` so that controllers can be enabled below it",
                true};
    const std::string busy = "`" + host.v2_own + "` holds other processes (" + facts.others +
                             ") and the no-internal-process rule forbids controllers below it";
    if (facts.systemd_running) {
        if (facts.can_request_scope)
            return {PlacementMode::systemd_scope, "",
                    busy +
                        "; systemd runs here: corral asks it over D-Bus for a transient "
                        "scope with Delegate=yes"};
        return {PlacementMode::unavailable, "",
                busy +
                    "; systemd runs here but this corral binary has no D-Bus client "
                    "(statically linked): start it with `systemd-run --scope -p "
                    "Delegate=yes`, or use corrald"};
    }
    if (facts.root_user && facts.mount_is_root)
        return {PlacementMode::cgroupfs_root, host.v2_mount,
                busy +
                    "; no systemd here and corral is root: its cgroups go right below the "
                    "root cgroup `" +
                    host.v2_mount + "` (cgroupfs, as runc/crun do)"};
    std::string why = busy + "; systemd is not running (no /run/systemd/system)";
    why += facts.root_user ? " and the cgroup2 mount `" + host.v2_mount +
                                 "` is not the root cgroup (a cgroup namespace?)"
                           : " and corral is not root";
    return {PlacementMode::unavailable, "", why};
}

Result<CgroupPlan> place_cgroups(CgroupHost& host, const PlacementOptions& options) {
    CgroupPlan plan = plan_cgroup_placement(host, observe_placement_facts(host, options));
    if (plan.mode == PlacementMode::systemd_scope) {
        const std::string unit = unit_name(options);
        auto scoped = options.request_scope(unit);
        if (scoped) {
            auto moved = discover_cgroup_host(options.v1);
            if (!moved) return std::move(moved.error().context("after moving into " + unit));
            plan.base = moved->v2_own;
            plan.reason += " (`" + unit + "`)";
            if (!options.caller_leaves_own) {
                auto entered = enter_self_leaf(plan.base);
                if (!entered) {
                    plan = {PlacementMode::unavailable, "",
                            plan.reason + ", but " + entered.error().describe()};
                }
            }
        } else {
            plan = {PlacementMode::unavailable, "",
                    plan.reason + ", but systemd refused: " + scoped.error().describe()};
        }
    }
    if (plan.mode == PlacementMode::own && plan.step_into_leaf) {
        if (auto entered = enter_self_leaf(plan.base); !entered)
            plan = {PlacementMode::unavailable, "",
                    plan.reason + ", but " + entered.error().describe()};
    }
    if (plan.mode == PlacementMode::unavailable) {
        host.limits_unavailable = plan.reason;
        return plan;
    }
    if (plan.base != host.v2_own) {
        host.v2_started_in = host.v2_own;
        host.v2_own = plan.base;
        // Empty where the base's cgroup.controllers cannot be read: each v2 limit then finds
        // its controller missing.
        auto controllers = read_cgroup_controllers(plan.base);
        host.v2_controllers = controllers ? std::move(*controllers) : std::vector<std::string>{};
    }
    return plan;
}

Result<CgroupHost> discover_placed_cgroup_host(const PlacementOptions& options) {
    auto host = discover_cgroup_host(options.v1);
    if (!host) return host;
    auto plan = place_cgroups(*host, options);
    if (!plan) return std::move(plan.error());
    return host;
}

}  // namespace corral
