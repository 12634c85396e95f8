#pragma once
// Where corral builds its cgroups on a pure cgroup v2 host (DESIGN.md, "Hosts with systemd").
//
// The no-internal-process rule: a non-root cgroup that holds processes cannot enable controllers
// for its children (EBUSY), and no process may join a cgroup whose subtree_control is set. A
// command started from a systemd login shell lives in `session-N.scope` beside the shell, so
// corral may not build a limited subtree there. In order of preference:
//
//  1. own:           our own cgroup, when it is the root (exempt from the rule), holds no other
//                    process, or the host is hybrid (the v2 tree carries no controllers: limits
//                    go through v1, and nothing ever moves out of our own cgroups there);
//  2. systemd-scope: systemd runs: ask it over D-Bus for a transient scope with Delegate=yes
//                    holding this process, as `systemd-run --scope -p Delegate=yes` does, and
//                    build there (this process moves into a leaf of it);
//  3. cgroupfs-root: no systemd and we are root: build right below the highest cgroup we may
//                    manage, the root of the cgroup2 mount, as runc/crun's cgroupfs driver does.
//                    Only corral's own cgroups are created there; no other process ever moves;
//  4. unavailable:   none of these: v2 limits are refused (strict) or reported (best-effort)
//                    with the reason.

#include <functional>
#include <string>

#include "base/error.hpp"
#include "isolation/cgroup.hpp"

namespace corral {

/// Which of the four ways corral uses on this host.
enum class PlacementMode { own, systemd_scope, cgroupfs_root, unavailable };

/// "own", "systemd-scope", "cgroupfs-root", "unavailable".
const char* placement_mode_name(PlacementMode mode);

/// A decision: where corral's cgroups go, and why.
struct CgroupPlan {
    PlacementMode mode = PlacementMode::own;
    std::string base;    ///< the directory corral treats as its own (CgroupHost::v2_own)
    std::string reason;  ///< why this way (for unavailable: why none of the others)
    /// own: the caller lives in the base alone and does not leave it by itself (`corral run`
    /// under `systemd-run --scope -p Delegate=yes`, or as a container's only process), so
    /// place_cgroups moves it into `<base>/self` first.
    bool step_into_leaf = false;
};

/// Asks the service manager for a transient scope `unit` with Delegate=yes that holds this
/// process, and returns once this process is in it (systemd_scope.hpp has the sd-bus one).
using ScopeRequester = std::function<Status(const std::string& unit)>;

/// How the caller lives in its cgroup, and what it can ask for.
struct PlacementOptions {
    /// The caller moves itself out of its own cgroup into a leaf of its subtree before limits
    /// are applied (corrald's `<instance>/supervisor`): then only *other* processes count.
    bool caller_leaves_own = false;
    /// Names the transient scope: `<unit_prefix>-<pid>.scope`.
    std::string unit_prefix = "corral";
    /// Empty where this binary has no D-Bus client (the statically linked `corral`).
    ScopeRequester request_scope;
    /// skip: the caller applies no v1 limit, so discovery leaves CgroupHost::v1_own empty.
    V1Hierarchies v1 = V1Hierarchies::find;
};

/// Pure decision from what was observed (for tests and doctor).
struct PlacementFacts {
    bool hybrid = false;
    bool own_is_root = false;        ///< v2_own is the real root cgroup (no cgroup.type)
    bool own_holds_others = false;   ///< processes other than the caller live in v2_own
    bool caller_in_own = false;      ///< the caller lives in v2_own and does not leave it
    std::string others;              ///< a few of their pids, for the message
    bool systemd_running = false;    ///< /run/systemd/system exists (sd_booted)
    bool can_request_scope = false;  ///< this binary has a D-Bus client
    bool root_user = false;          ///< euid 0
    bool mount_is_root = false;      ///< the cgroup2 mount shows the real root cgroup
};

/// The plan for these facts; `host` gives the paths.
CgroupPlan plan_cgroup_placement(const CgroupHost& host, const PlacementFacts& facts);
/// Observes this process and host (reads only), each fact only where the plan depends on it: on a
/// hybrid host nothing but `hybrid`, `root_user` and `can_request_scope`; who else lives in
/// v2_own (own_holds_others, caller_in_own, others) not in the root either.
PlacementFacts observe_placement_facts(const CgroupHost& host, const PlacementOptions& options);

/// Decides and carries the plan out: for systemd-scope asks for the scope and moves this process
/// into `<scope>/self` (so does own with step_into_leaf, into `<own>/self`); then points
/// host.v2_own (and v2_controllers) at the plan's base and records host.v2_started_in. For
/// unavailable, host.limits_unavailable gets the reason and v2_own stays. A failed scope request
/// makes the plan unavailable with systemd's error. Errors only when the host cannot be read at
/// all.
Result<CgroupPlan> place_cgroups(CgroupHost& host, const PlacementOptions& options);

/// discover_cgroup_host(options.v1) followed by place_cgroups().
Result<CgroupHost> discover_placed_cgroup_host(const PlacementOptions& options);

}  // namespace corral
