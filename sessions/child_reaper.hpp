#pragma once
// Daemon-level reaping. corrald is a child subreaper (PR_SET_CHILD_SUBREAPER): a session process
// that double-forks leaves its orphans to us instead of the host's PID 1, so they are reaped here
// and never pile up as zombies. On SIGCHLD (through asio::signal_set, no global handler state) we
// peek with waitid(WNOWAIT): a pid that belongs to a process record is left for its own pidfd
// handler (which needs the exit status); anything else is an orphan and is reaped.
//
// The reaper also keeps SIGPIPE from killing the daemon when a session process closes its stdin
// early: a signal_set installs a handler (not SIG_IGN), and handlers — unlike SIG_IGN — are reset
// by execve, so the session's processes still get the default SIGPIPE behaviour.

#include <sys/types.h>

#include <set>
#include <vector>

#include "base/asio.hpp"

namespace corral {

/// Reaps orphaned children on the event loop; knows which pids have owners.
class ChildReaper {
  public:
    /// Starts listening for SIGCHLD/SIGPIPE on `io`; `subreaper` also sets PR_SET_CHILD_SUBREAPER.
    ChildReaper(boost::asio::io_context& io, bool subreaper);
    ~ChildReaper();

    /// `pid` is reaped by its owner (pidfd handler); the reaper must not touch it.
    void add_owned(pid_t pid);
    /// The owner reaped `pid`; re-scan if the last round stopped at an owned zombie, since an
    /// orphan may have waited behind it.
    void remove_owned(pid_t pid);
    /// Reaps every exited child that no owner claims. Never blocks.
    void reap_orphans();
    /// How many orphans were reaped so far (for tests and health output).
    size_t orphans_reaped() const { return orphans_reaped_; }

  private:
    void arm();
    void reap_unowned_children_of_all_threads();

    boost::asio::signal_set signals_;
    std::set<pid_t> owned_;
    size_t orphans_reaped_ = 0;
    bool stopped_at_owned_ = false;  ///< the last round met an owned zombie before the end
};

}  // namespace corral
