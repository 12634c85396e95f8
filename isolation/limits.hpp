#pragma once
// Resource limits (memory, swap, pids, cpu, io) on a session, behind one interface whose backend
// is chosen once at start-up from the host's cgroup layout (CONVENTIONS.md: backends behind a
// small interface). Nothing else in corral asks which cgroup version the host runs.
//
//  - unified: v2 controller files on the session cgroup; the controllers are enabled in
//    cgroup.subtree_control of every cgroup from ours down to the session's parent.
//  - hybrid:  the v2 tree (which tracks and kills) has no controllers, so limits go on v1
//    cgroups `<our v1 cgroup>/corral-<session>` that every process of the session also joins
//    (the launcher's child writes "0" into their `tasks` files: LaunchSpec::v1_join_fds).
//
// Enforcement is honest: with Enforcement::strict a limit the host cannot enforce is an error
// naming the limit and the reason; with best_effort it is listed in not_enforced().

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "isolation/cgroup.hpp"
#include "policies/policy.hpp"

namespace corral {

/// A resource corral can limit through cgroups.
enum class LimitKind { memory, swap, pids, cpu, io };

/// "memory", "swap", "pids", "cpu", "io".
const char* limit_name(LimitKind kind);

/// Whether one kind of limit can be enforced here, and how (or why not).
struct LimitCapability {
    bool enforceable = false;
    std::string detail;  ///< "memory.max" / "v1 memory.limit_in_bytes", or the reason it cannot
};

/// What a backend can enforce on this host, for every LimitKind.
struct LimitSupport {
    std::map<LimitKind, LimitCapability> kinds;

    /// The capability of `kind` (not enforceable with a generic reason when unknown).
    LimitCapability get(LimitKind kind) const;
};

/// Limits the policy asks for. Swap counts as asked (off) whenever memory is set.
std::vector<LimitKind> requested_limits(const Limits& limits);
/// Whether `limits` need a controller at all: a limit, or limits.accounting's usage files.
/// Without, a backend creates no controller cgroup and probes nothing.
bool limits_use_controllers(const Limits& limits);

/// Counters of limit events of a session (cumulative since it started).
struct LimitEvents {
    uint64_t oom_kills = 0;        ///< v2 memory.events oom_kill; v1 memory.oom_control oom_kill
    uint64_t memory_max_hits = 0;  ///< v2 memory.events max; v1 memory.failcnt
    uint64_t pids_limit_hits = 0;  ///< pids.events max (forks refused)
};

/// The limits of one running session. Destruction removes whatever cgroups the backend created
/// for the session (hybrid: the v1 cgroups, after killing anything still in them); the v2
/// session cgroup itself belongs to the caller.
class SessionLimits {
  public:
    virtual ~SessionLimits();

    /// v1 `tasks` fds (O_WRONLY|O_CLOEXEC) the launcher's child writes "0" into so that it
    /// joins the session's v1 cgroups before exec; the child is single-threaded then, so moving
    /// its one thread moves the whole process (limits_hybrid_v1.cpp says why not cgroup.procs).
    /// Empty on unified hosts.
    virtual std::vector<int> join_fds() const = 0;
    /// Session usage: cpu from v2 cpu.stat; memory/pids/io from whichever hierarchy has them.
    virtual ResourceUsage usage() const = 0;
    /// fds that become readable when a limit event may have happened (one epoll fd watching
    /// v2 memory.events/pids.events, or the v1 OOM eventfd and pids.events; event_watch.hpp).
    /// After readiness call read_events(), which also consumes the events.
    virtual std::vector<int> event_fds() const = 0;
    /// Drains event_fds() and returns the current counters.
    virtual LimitEvents read_events() = 0;
    /// Best-effort sessions: "<limit>: <reason>" for every asked limit that is not enforced.
    virtual std::vector<std::string> not_enforced() const = 0;
    /// True when the policy asked for oom_group but the kernel cannot do it (v1): the caller
    /// ends the whole session itself when read_events() shows a new OOM kill.
    virtual bool supervisor_must_end_session_on_oom() const = 0;
    /// Once the session's v2 cgroup is empty: one pass of removing the backend's own cgroups
    /// (killing anything still in them); true once none is left. Never waits, so an event loop
    /// can call it again on a timer while a killed task is still exiting (v1 says nothing when
    /// a cgroup empties). Destruction removes what is left, waiting a bounded time.
    virtual bool try_remove_cgroups() { return true; }
    /// The v1 cgroups made for the session (full paths; none with v2 limits).
    virtual std::vector<std::string> v1_directories() const { return {}; }
};

/// A way of applying limits on this host.
class LimitBackend {
  public:
    virtual ~LimitBackend();

    /// "unified" or "hybrid-v1".
    virtual std::string name() const = 0;
    /// What this host can enforce (for `corral doctor`, /v1/health and session creation).
    virtual LimitSupport support() const = 0;
    /// Applies `limits` to a new session whose v2 cgroup is `session_cgroup` (still empty: no
    /// process yet). `session_name` names the backend's own cgroups. Strict enforcement turns
    /// any unenforceable asked limit into an error naming it; best-effort records it.
    /// `existing`: the session is one a previous run of the daemon made and this run takes over
    /// (its processes already run): the backend's cgroups of that name are reused, not created.
    virtual Result<std::unique_ptr<SessionLimits>> apply(const Cgroup& session_cgroup,
                                                         const std::string& session_name,
                                                         const Limits& limits,
                                                         Enforcement enforcement,
                                                         bool existing = false) const = 0;
};

/// The backend that fits the host: hybrid-v1 when layout is hybrid, else unified.
std::unique_ptr<LimitBackend> make_limit_backend(const CgroupHost& host);
/// The v2-controller backend (exposed so tests can exercise it on any host).
std::unique_ptr<LimitBackend> make_unified_backend(const CgroupHost& host);
/// The v1-controller backend; probes which v1 limit files exist by creating (and removing) a
/// short-lived `corral-probe-<pid>` cgroup under each of our v1 cgroups.
std::unique_ptr<LimitBackend> make_hybrid_v1_backend(const CgroupHost& host);

/// Enables `controllers` ("memory", "pids", ...) in cgroup.subtree_control of every cgroup from
/// `top` (our own v2 cgroup) down to the parent of `leaf`, so `leaf` gets their interface files.
/// One write per cgroup ("+a +b"). EBUSY (the no-internal-process rule: a cgroup on the way still
/// has processes of its own) comes back with an explanation. `leaf` must be strictly below `top`.
Status enable_controllers_down_to(const std::string& top, const std::string& leaf,
                                  const std::vector<std::string>& controllers);

/// cpu.max / cfs quota for a fraction of cores over a 100 ms period (at least 1 ms).
uint64_t cpu_quota_usec(double cores, uint64_t period_usec = 100000);
/// io.weight (1..10000, default 100) -> blkio weight (10..1000, default 500).
uint64_t blkio_weight_from_io_weight(uint64_t io_weight);
/// Whether any swap area is active (/proc/swaps): with none, "swap off" holds trivially.
bool host_swap_active();
/// Whether some block device uses the bfq scheduler, the only one that honours io/blkio
/// weights among the stock schedulers (mq-deadline and kyber ignore them).
bool host_has_weighted_io_scheduler();

}  // namespace corral
