#pragma once
// Resource limits of a session, behind one small interface chosen once at start-up from what the
// host has (CONVENTIONS.md: backends behind a small interface):
//   - unified: v2 controller files on the session's cgroup (controllers enabled in
//     cgroup.subtree_control down the path);
//   - hybrid: v2 keeps tracking and killing; limits go on v1 controller cgroups created for the
//     session beneath the cgroups corral runs in. New processes join them by writing "0" to their
//     cgroup.procs from the child before exec (join_fds()).
// Nothing else in corral asks which host it is on.
//
// (Interface written by the lead as the contract used by `corral run` and the session manager;
// the limits helper owns and implements it and may extend it.)

#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "isolation/cgroup.hpp"
#include "policies/policy.hpp"

namespace corral {

/// Counters of limit events since the session started.
struct LimitEvents {
    uint64_t oom_kills = 0;        ///< processes the OOM killer ended
    uint64_t pids_limit_hits = 0;  ///< forks refused at the pids limit
};

/// Which limits this host can enforce, each with the reason when it cannot.
struct LimitSupport {
    struct Entry {
        std::string limit;   ///< "memory", "swap", "pids", "cpu", "io_weight"
        bool enforceable = false;
        std::string how;     ///< "v2 memory.max", "v1 memory.limit_in_bytes", or why not
    };
    std::vector<Entry> entries;
};

/// The limits applied to one session. Destruction removes any cgroups it created (killing what
/// is still inside them first: only cgroups corral created).
class SessionLimits {
public:
    virtual ~SessionLimits() = default;
    /// v1 cgroup.procs fds the launcher's child writes "0" into (empty on unified hosts).
    virtual std::vector<int> join_fds() const = 0;
    /// fds that become readable when a limit event happens (for the daemon's event loop).
    virtual std::vector<int> event_fds() const = 0;
    /// Current counters (re-reads the kernel files).
    virtual LimitEvents read_events() const = 0;
    /// `usage` from the v2 cgroup completed with what the limit cgroups know (memory peak, pids...).
    virtual ResourceUsage merge_usage(ResourceUsage usage) const = 0;
    /// Limits the policy asked for that are not enforced here (best-effort only), with reasons.
    virtual std::vector<std::string> not_enforced() const = 0;
};

/// A host's way of applying limits.
class LimitBackend {
public:
    virtual ~LimitBackend() = default;
    /// "unified" or "hybrid-v1".
    virtual std::string name() const = 0;
    /// What can be enforced here (for `corral doctor` and /v1/health).
    virtual LimitSupport support() const = 0;
    /// Applies `limits` to the session whose v2 cgroup is `session_cgroup`. Under strict
    /// enforcement a limit this host cannot enforce is an error naming the limit and the reason.
    virtual Result<std::unique_ptr<SessionLimits>> apply(const Cgroup& session_cgroup,
                                                         const std::string& session_name,
                                                         const Limits& limits,
                                                         Enforcement enforcement) = 0;
};

/// The backend for this host.
std::unique_ptr<LimitBackend> make_limit_backend(const CgroupHost& host);

}  // namespace corral
