#pragma once
// A process reference that bundles pid and pidfd (as systemd's PidRef): signals go through the
// pidfd so a recycled pid can never be hit, and waiting uses waitid(P_PIDFD).

#include <sys/types.h>

#include <optional>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// How a process ended, as waitid reports it.
struct WaitStatus {
    bool exited = false;  ///< true: `code` is the exit code; false: `code` is the signal
    int code = 0;
    bool core_dumped = false;
};

/// pid + pidfd of a child of ours.
class PidRef {
  public:
    PidRef() = default;
    PidRef(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}

    pid_t pid() const { return pid_; }
    /// Closes the pidfd of a process already reaped: the record keeps the pid, the daemon one
    /// descriptor less per finished process.
    void close_pidfd() { pidfd_.reset(); }
    int pidfd() const { return pidfd_.get(); }
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

}  // namespace corral
