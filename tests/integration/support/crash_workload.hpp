#pragma once
// The scripted workload the crash torture test (DaemonRobust) and the stress bench
// (tests/bench/daemon_stress.cpp) kill corrald under, and the checks after its restart: which
// sessions still held processes when it died, and what of corral's on the host no listed session
// owns — cgroups, v1 cgroups, session directories, mounts, and processes anywhere on the host
// whose cgroups name this instance (an orphan would hold its namespaces too).

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "corrald_process.hpp"

namespace corral::testing {

/// The policies of the crash workload: between them every kind of thing a session leaves on the
/// host — processes and a pid-namespace holder, v1 limit cgroups (hybrid hosts), a workdir tmpfs.
extern const char* const kCrashPolicies[3];

/// What the crash workload's clients were told, for the checks after the restart.
struct CrashLedger {
    std::mutex mutex;
    std::vector<std::string> ids;               ///< every session a 201 named
    std::map<std::string, std::string> tokens;  ///< its full token
    std::set<std::string> deleting;             ///< a DELETE was sent (it may have ended)
};

/// One client's scripted workload until the daemon goes away: create, spawn (a tree with an
/// orphan), run, upload, end every other one. Records what it was given in `ledger`. Session ids
/// are r<round>-w<worker>-<n>. Throws when a request fails (the daemon was killed).
void crash_workload(CorraldProcess& daemon, size_t worker, size_t round, CrashLedger& ledger);

/// The sessions whose cgroup holds processes now (call while the daemon is dead) — other than a
/// `none` session's keeper alone (--keep-output: a holder in no namespace of its own, which the
/// daemon does not count as something left running).
std::set<std::string> populated_sessions(const CorraldProcess& daemon);

/// Everything of corral's on the host that belongs to no session in `owners`: its cgroups, v1
/// cgroups, session directories and mounts below the daemon's directory, each described.
std::vector<std::string> unowned(const CorraldProcess& daemon, const std::set<std::string>& owners);

/// A process on the host whose cgroups (v2, or a v1 corral-<instance>-* one) name the instance.
struct InstanceProcess {
    pid_t pid = -1;
    std::string session;  ///< the session whose cgroup holds it ("" when none does)
    std::string where;    ///< its v2 cgroup path relative to the instance, or its v1 one
    bool zombie = false;  ///< it has exited and waits for its parent to reap it
};

/// Every process on the host (a /proc scan) in this instance's cgroups, the daemon (and its
/// zygote) excluded.
/// Whether `pid` is the launch zygote of the corrald `daemon` (isolation/launch_zygote.hpp): part
/// of the daemon, in its cgroup, never a session's.
bool is_launch_zygote_of(pid_t pid, pid_t daemon);
std::vector<InstanceProcess> instance_processes(const CorraldProcess& daemon);

/// The processes of `instance_processes` no session in `owners` holds: orphans. A zombie is one
/// only if it stays: the children of a killed daemon are reparented to init, which reaps them
/// in its own time (their cgroups, already removed, show as "(deleted)"), so zombies and
/// processes in a removed cgroup (exiting) are waited for, up to `zombie_bound`, before they count.
std::vector<InstanceProcess> orphaned_processes(
    const CorraldProcess& daemon, const std::set<std::string>& owners,
    std::chrono::milliseconds zombie_bound = std::chrono::seconds(5));

}  // namespace corral::testing
