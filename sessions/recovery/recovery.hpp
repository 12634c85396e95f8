#pragma once
// Starting again after a crash (DESIGN.md "Surviving the daemon"). A corrald killed with -9
// leaves its sessions behind: processes and holders in its cgroups, v1 limit cgroups, sized
// workdir tmpfs mounts and state directories. On start the daemon first proves that no live
// daemon owns them (InstanceClaim: a record lock on <state>/corrald.lock held for the daemon's
// lifetime, so a lock that can be taken means its previous owner is dead; the instance cgroup
// names the state dir it belongs to), then reaps what the previous run left (reap_leftovers) —
// only what carries corral's own mark:
//   - the instance cgroup is marked with the xattr trusted.corral.state_dir (like systemd's
//     trusted.invocation_id); an unmarked one is accepted only when it holds nothing but the
//     layout corral makes (`supervisor`, `sessions`);
//   - v1 cgroups are `corral-<instance>-<sid>` for a sid that still has a v2 session cgroup or a
//     state directory of this instance (the v1 cgroups live shorter than both);
//   - mounts are the `corral-workdir` tmpfs on <state>/sessions/<sid>/root; a session directory
//     with any other mount beneath it is left alone (removing it would descend into that mount);
//   - session directories are <state>/sessions/<sid> for a valid session id; a small one is
//     deleted here, a larger one renamed to `.corral-discarded-<sid>-…` (base/tree_removal.hpp)
//     and deleted by the daemon off its loop, and so is any directory with that mark a previous
//     run discarded but had not yet deleted.
//     Any other name in <state>/sessions is not corral's and is left alone.

#include <chrono>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// The xattr that marks a cgroup as a corral instance; its value is the owner's state dir.
inline constexpr const char* kInstanceMarkXattr = "trusted.corral.state_dir";

/// Exclusive ownership of a state dir and an instance cgroup, for as long as this object lives.
class InstanceClaim {
  public:
    InstanceClaim() = default;
    /// Locks `state_dir` (which must exist), creates or opens `instance_dir`, checks its mark and
    /// marks it. EBUSY when a live daemon holds the state dir; EEXIST when the instance cgroup
    /// belongs to another state dir or is not corral's.
    static Result<InstanceClaim> acquire(const std::string& state_dir,
                                         const std::string& instance_dir);
    /// Whether the instance cgroup was already there (a previous run's, to be reaped).
    bool instance_existed() const { return instance_existed_; }

  private:
    UniqueFd state_lock_;
    bool instance_existed_ = false;
};

/// Where one instance keeps its things.
struct LeftoverScope {
    std::string state_dir;                      ///< absolute
    std::string instance_dir;                   ///< <v2_own>/<instance>
    std::string instance_name;
    std::map<std::string, std::string> v1_own;  ///< controller -> our v1 cgroup dir
};

/// What start-up clean-up found and removed.
struct LeftoverReport {
    std::vector<std::string> sessions;  ///< ids of the sessions a previous run left behind
    std::map<std::string, size_t> processes_by_session;  ///< processes killed, per session
    /// When each left session was created, as far as its state directory tells.
    std::map<std::string, std::chrono::system_clock::time_point> created_at;
    size_t processes_killed = 0;        ///< processes (holders included) in its cgroups
    size_t cgroups_removed = 0;         ///< v2 and v1
    size_t mounts_removed = 0;
    size_t directories_removed = 0;     ///< session state directories (discarded)
    /// Discarded directories (absolute paths) to delete off the loop: the session directories
    /// reaped here and those a previous run had discarded.
    std::vector<std::string> discarded;
    std::vector<std::string> left;      ///< what could not be removed, and why
};

/// Kills and removes everything a previous run of this instance left (see the file comment).
/// Call only while holding the InstanceClaim, before this run creates anything. Blocks (bounded
/// by the kernel's kill): it runs before the event loop starts.
/// Sessions in `keep` (journalled ones being re-adopted) are left alone: their cgroups, v1
/// cgroups, mounts and directories.
LeftoverReport reap_leftovers(const LeftoverScope& scope, const std::set<std::string>& keep = {});
/// Kills and removes what one session of a previous run left (its v2 and v1 cgroups, its
/// directory and workdir mount): a journalled session whose adoption failed.
void reap_session_leftovers(const LeftoverScope& scope, const std::string& sid,
                            LeftoverReport& report);

/// Mount points strictly below `dir` (from /proc/self/mountinfo), deepest first, each with its
/// file system type and source: "tmpfs corral-workdir".
std::vector<std::pair<std::string, std::string>> mounts_below(const std::string& dir);

}  // namespace corral
