#pragma once
// A process reference that bundles pid and pidfd (as systemd's PidRef): signals go through the
// pidfd so a recycled pid can never be hit, and waiting uses waitid(P_PIDFD).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// How a process ended, as waitid reports it.
struct WaitStatus {
    bool exited = false;  ///< true: `code` is the exit code; false: `code` is the signal
    int code = 0;
    bool core_dumped = false;
};

/// pid + pidfd of a process: a child of ours, or one taken over with open_verified_process.
class PidRef {
  public:
    PidRef() = default;
    PidRef(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}

    pid_t pid() const { return pid_; }
    /// Closes the pidfd of a process already reaped: the record keeps the pid, the daemon one
    /// descriptor less per finished process.
    void close_pidfd() { pidfd_.reset(); }
    int pidfd() const { return pidfd_.get(); }
    /// Hands the pidfd on (the launch zygote sends it to corrald); this keeps the pid only.
    UniqueFd take_pidfd() { return std::move(pidfd_); }
    bool valid() const { return pid_ > 0; }

    /// pidfd_send_signal; ESRCH once the process is gone.
    Status send_signal(int signal) const;
    /// Blocks until the process exits and reaps it.
    Result<WaitStatus> wait() const;
    /// Reaps it if it has exited; nullopt while it runs.
    Result<std::optional<WaitStatus>> try_wait() const;

  private:
    pid_t pid_ = -1;
    UniqueFd pidfd_;
};

/// Numeric field `field` (3 and up: those after comm, proc(5)'s numbering) of /proc/<pid>/stat.
Result<uint64_t> process_stat_field(pid_t pid, int field);
/// /proc/<pid>/stat field 22: when the process started, in clock ticks since boot. With the pid it
/// names one process for the life of the host (a recycled pid starts later). ESRCH when gone.
Result<uint64_t> process_start_ticks(pid_t pid);

/// Takes a reference to a process that is not our child (one a previous run of the daemon
/// started), only if it is alive, started at `start_ticks` and is a member of the cgroup whose
/// cgroup.procs is `cgroup_procs` (an fd of it). The pidfd is opened first and checked alive
/// after the checks, so the checks cannot have been about a process that took a recycled pid
/// (the pid-reuse attacks on supervisors, e.g. CVE-2019-6133). Waiting on such a reference
/// fails (ECHILD): watch its pidfd for readability, or its cgroup.
Result<PidRef> open_verified_process(pid_t pid, uint64_t start_ticks,
                                     const std::string& cgroup_dir);

/// Whether the process behind `pidfd` has exited (its pidfd is readable), without waiting.
bool pidfd_exited(int pidfd);

}  // namespace corral
