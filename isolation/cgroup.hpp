#pragma once
// cgroup v2: the source of truth for "what belongs to a session".
//
// Discovery finds where cgroup2 is mounted (/sys/fs/cgroup on unified hosts, /sys/fs/cgroup/unified
// on hybrid ones): at those usual places when each is confirmed to be a hierarchy's real root seen
// from the initial cgroup namespace, otherwise from /proc/self/mountinfo; and reads
// /proc/self/cgroup (the "0::" line: the cgroup we were started in). corral only ever creates
// cgroups beneath that one.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// How this host mounts cgroups.
enum class CgroupLayout {
    unified,  ///< cgroup2 at /sys/fs/cgroup with controllers
    hybrid,   ///< cgroup2 (no controllers) beside v1 controller hierarchies
};

/// What discovery found. Paths are absolute filesystem paths.
struct CgroupHost {
    CgroupLayout layout = CgroupLayout::unified;
    std::string v2_mount;                       ///< e.g. /sys/fs/cgroup/unified
    std::string v2_own;                         ///< our cgroup dir: v2_mount + "0::" path
    std::map<std::string, std::string> v1_own;  ///< controller -> our v1 cgroup dir
    std::vector<std::string> v2_controllers;    ///< cgroup.controllers of v2_own
    /// Set by place_cgroups (cgroup_placement.hpp): the cgroup this process started in when
    /// v2_own was moved elsewhere (a systemd scope, the root); empty when they are the same.
    std::string v2_started_in;
    /// Set by place_cgroups when no cgroup corral may use can have controllers enabled below
    /// it: the reason, which every v2 limit then reports.
    std::string limits_unavailable;
};

/// Whether discovery looks for the v1 hierarchies that hold us (CgroupHost::v1_own).
enum class V1Hierarchies {
    find,  ///< v1_own names our cgroup in each (confirmed at its usual mount, or from mountinfo)
    /// v1_own stays empty: only v1 limits use those directories, and a caller that applies none
    /// (`corral run` of a policy without limits) need not confirm one mount per hierarchy, nine
    /// on a systemd hybrid host (issue 18). The layout is still hybrid where /proc/self/cgroup
    /// lists v1 controllers: the kernel has bound them to v1, so cgroup2 cannot have them.
    skip,
};

/// Pure parsing, for tests: mountinfo + /proc/self/cgroup text -> CgroupHost (no controller list).
/// The layout is hybrid when a v1 hierarchy with a resource controller (not just name=...) is
/// mounted and holds us; v1_own has one entry per controller name ("cpu" and "cpuacct" for a
/// joint cpu,cpuacct hierarchy; "name=systemd" for named ones).
Result<CgroupHost> parse_cgroup_host(std::string_view mountinfo, std::string_view proc_self_cgroup);
/// Reads this process's cgroup file, then finds the mounts where they usually are or, where that
/// cannot be confirmed, in mountinfo; and cgroup.controllers.
Result<CgroupHost> discover_cgroup_host(V1Hierarchies v1 = V1Hierarchies::find);
/// discover_cgroup_host()'s two ways to the mounts (no controller list), for tests that compare
/// them on the host they run on. nullopt: not confirmed where they usually are.
std::optional<CgroupHost> discover_cgroup_host_at_usual_mounts(
    std::string_view proc_self_cgroup, V1Hierarchies v1 = V1Hierarchies::find);
Result<CgroupHost> discover_cgroup_host_from_mountinfo(std::string_view proc_self_cgroup);

/// Every pid in the cgroup2 directory `dir_fd` and its descendants (cgroup.procs of each):
/// Cgroup::pids() for a directory held only by its descriptor.
Result<std::vector<pid_t>> pids_in_subtree(int dir_fd);

/// Whether cgroup2 directory `dir` is the real root cgroup: it has cgroup.procs but no
/// cgroup.type (CFTYPE_NOT_ON_ROOT); the root of a cgroup namespace or of a bind-mounted subtree
/// is an ordinary cgroup and has one.
bool is_real_root_cgroup(const std::string& dir);
/// The controllers `dir`'s cgroup.controllers lists (those its parent enabled for it).
Result<std::vector<std::string>> read_cgroup_controllers(const std::string& dir);

/// Parses "key value" lines (cgroup.events, cpu.stat, memory.events, pids.events, v1
/// memory.oom_control) into a map; lines whose value is not a number are skipped.
std::map<std::string, uint64_t> parse_keyed_values(std::string_view text);

/// The pids event files of one cgroup; `events_local` is nullopt where the kernel has none
/// (before 6.12).
struct PidsEventsFiles {
    std::string events;                       ///< pids.events
    std::optional<std::string> events_local;  ///< pids.events.local
};
/// Pure: how many forks a pids limit refused within a subtree (its cgroups' files, each once),
/// whichever way this kernel counts them (cgroup_pids_events.cpp explains both).
uint64_t count_pids_limit_hits(const std::vector<PidsEventsFiles>& subtree);
/// The answer to "how many pids-limit hits in this subtree": walks `dir` and its descendants.
/// A run whose leaf (or session) hit a limit shows a count above zero here on every kernel.
/// On 6.12+ a hit of a limit set above `dir` is counted above it, not here.
Result<uint64_t> pids_limit_hits_in_subtree(const std::string& dir);
/// The same for the directory open at `dir_fd` (O_PATH is enough).
Result<uint64_t> pids_limit_hits_in_subtree(int dir_fd);

/// How kill_all ends a subtree.
enum class KillMethod {
    automatic,          ///< cgroup.kill where the kernel has it, else freeze_and_signal
    kill_file,          ///< cgroup.kill only (5.14+)
    freeze_and_signal,  ///< freeze, SIGKILL every pid, thaw, until empty (pre-5.14 kernels)
};

/// cpu/memory/pids/io usage of a cgroup subtree. Unavailable values stay nullopt.
struct ResourceUsage {
    uint64_t cpu_user_usec = 0;
    uint64_t cpu_system_usec = 0;
    uint64_t cpu_total_usec = 0;
    std::optional<uint64_t> memory_current;
    std::optional<uint64_t> memory_peak;
    std::optional<uint64_t> pids_current;
    std::optional<uint64_t> pids_peak;
    std::optional<uint64_t> io_read_bytes;
    std::optional<uint64_t> io_write_bytes;
    uint64_t oom_kills = 0;        ///< processes the OOM killer ended
    uint64_t pids_limit_hits = 0;  ///< forks refused at a pids limit (pids_limit_hits_in_subtree)
};

/// A v2 cgroup directory. When `owned`, destruction ends everything in it (cgroup.kill), waits
/// for populated 0 and removes it with all its descendants.
class Cgroup {
  public:
    Cgroup() = default;
    Cgroup(Cgroup&&) noexcept = default;
    Cgroup& operator=(Cgroup&&) noexcept;
    ~Cgroup();

    /// Creates (mkdir) `name` beneath `parent_dir` (absolute path); fails if it exists.
    static Result<Cgroup> create(const std::string& parent_dir, const std::string& name);
    /// rmdir of `parent_dir`/`name` and every cgroup below it, deepest first, never a kill: an
    /// error (EBUSY) where a process still is. For a tree no handle owns (one a killed `corral
    /// run` left); gone already is success.
    static Status remove_empty_tree(const std::string& parent_dir, const std::string& name);
    /// Opens an existing directory without owning it (never removed by us).
    static Result<Cgroup> open_unowned(const std::string& dir);
    /// Opens an existing directory that corral created earlier (recovery after a restart) and
    /// owns it from now on: destruction kills and removes it.
    static Result<Cgroup> adopt(const std::string& dir);

    /// Another handle on this cgroup (its descriptor duplicated, no path lookup) that never
    /// removes it.
    Result<Cgroup> unowned_view() const;

    /// Creates and owns a child cgroup.
    Result<Cgroup> create_child(const std::string& name) const;

    /// O_DIRECTORY|O_PATH fd, for clone3's CLONE_INTO_CGROUP.
    int dir_fd() const { return dir_.get(); }
    const std::string& path() const { return path_; }
    bool valid() const { return dir_.valid(); }
    /// Whether destruction/remove() ends and deletes it.
    bool owned() const { return owned_; }

    /// Kills every process in the subtree: cgroup.kill, or freeze -> SIGKILL each pid -> thaw,
    /// repeated until empty, where the kernel has no cgroup.kill. Returns how many were signalled
    /// (best effort count of pids seen). `method` exists so tests can force the fallback.
    /// `fallback_bound`: how long the fallback may wait in all (for "frozen", for the killed to
    /// exit); at least one round is always made. The default keeps corrald's event loop free
    /// (issue 12): its callers there wait for "populated 0" on the loop anyway; one with no loop
    /// to keep free (start-up clean-up) gives more. EBUSY when the bound passed still populated.
    Result<size_t> kill_all(KillMethod method = KillMethod::automatic,
                            std::chrono::milliseconds fallback_bound = kLoopKillBound);
    /// The fallback's default bound (kill_all).
    static constexpr std::chrono::milliseconds kLoopKillBound{50};
    /// Sends `signal` to every process of the subtree (graceful stop). Returns the count.
    Result<size_t> signal_all(int signal);
    /// Every pid in the subtree (cgroup.procs of each descendant).
    Result<std::vector<pid_t>> pids() const;
    /// cgroup.events "populated".
    Result<bool> populated() const;
    /// Blocks until populated 0 (poll(POLLPRI) on cgroup.events, no sleep loop), or the timeout
    /// (then an ETIMEDOUT error).
    Status wait_until_empty(std::chrono::milliseconds timeout) const;
    /// Blocks until cgroup.events shows `key value` (e.g. "frozen", 1), or the timeout.
    Status wait_for_event(const std::string& key, uint64_t value,
                          std::chrono::milliseconds timeout) const;
    /// cgroup.events, open and read once: it raises POLLPRI (poll) / EPOLLPRI (epoll, asio's
    /// wait_error) at the next change. Reading it again re-arms it; a fresh watch_events() does
    /// too. Non-blocking, close-on-exec.
    Result<UniqueFd> watch_events() const;
    /// Usage from cpu.stat (and memory/pids files where this hierarchy has them).
    Result<ResourceUsage> usage() const;
    /// Moves a pid into this cgroup (for the fallback launcher path).
    Status attach(pid_t pid) const;
    /// Ends the subtree (kill_all, wait empty) and rmdirs it, children first. Idempotent; an
    /// error for a cgroup we do not own (we never kill or delete what corral did not create).
    Status remove(std::chrono::milliseconds timeout = std::chrono::seconds(10));
    /// rmdir alone, never a kill: true when it is gone (now or before), false when the kernel
    /// refused (EBUSY: it still holds a process or a child cgroup), an error for anything else
    /// (or a cgroup we do not own). The common end of a process's leaf, one system call.
    Result<bool> remove_if_empty();
    /// Stops owning the directory without touching it: for a subtree the kernel cannot empty
    /// now (a task stuck in D state), so no destructor waits for it on the event loop. The
    /// daemon's start-up clean-up removes what is left under its instance.
    void leave() {
        dir_.reset();
        owned_ = false;
    }

  private:
    static Result<Cgroup> open_dir(const std::string& dir, bool owned);
    Result<size_t> kill_by_freezing(std::chrono::milliseconds bound);

    std::string path_;
    UniqueFd dir_;
    bool owned_ = false;
};

/// Moves the calling process (all its threads) into `<instance_dir>/supervisor`, creating both
/// directories when missing, and returns that leaf (unowned: never killed by us). The
/// no-internal-process rule forbids enabling controllers for children in a cgroup that has
/// processes of its own, so the daemon must leave `instance_dir` before sessions get limits.
/// `instance_dir` must lie strictly below host.v2_own: nothing outside our own subtree moves.
Result<Cgroup> enter_supervisor_leaf(const CgroupHost& host, const std::string& instance_dir);

/// Whether this kernel has cgroup.kill (5.14+), probed on a cgroup we own.
bool cgroup_kill_supported(const Cgroup& any);

}  // namespace corral
