#pragma once
// Daemon-level reaping. corrald is a child subreaper (PR_SET_CHILD_SUBREAPER): a session process
// that double-forks leaves its orphans to us instead of the host's PID 1, so they are reaped here
// and never pile up as zombies. On SIGCHLD (through asio::signal_set, no global handler state) we
// peek with waitid(WNOWAIT): a pid that belongs to a process record is left for its own pidfd
// handler (which needs the exit status); anything else is an orphan and is reaped.
//
// The walk stays short: the kernel reparents orphans to the first live thread of the subreaper
// (kernel/exit.c, find_new_reaper -> find_alive_thread): our main thread. Run there, the walk
// asks for that thread's children only (__WNOTHREAD), and corrald forks its namespace holders
// and launches from the launch worker's thread (launch_worker.hpp), so the walk meets orphans,
// not the ~1,000 holders of 1,000 sessions (issue 18: 0.45 ms per finished run). A child of
// another thread that nobody owns any more is therefore never left to the walk: its last owner
// hands it over (hand_over), and it is reaped when its pidfd says it ended.
//
// The reaper also keeps SIGPIPE from killing the daemon when a session process closes its stdin
// early: a signal_set installs a handler (not SIG_IGN), and handlers — unlike SIG_IGN — are reset
// by execve, so the session's processes still get the default SIGPIPE behaviour.

#include <sys/types.h>

#include <list>
#include <memory>
#include <set>
#include <vector>

#include "base/asio.hpp"
#include "isolation/pid_ref.hpp"

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
    /// `child` is nobody's any more and may still run (an owner gave it up after SIGKILL): it
    /// is reaped once its pidfd is readable, wherever it was forked. Without a pidfd, left to
    /// the walk (which finds it only as a child of the main thread).
    void hand_over(PidRef child);
    /// Reaps every exited child that no owner claims. Never blocks.
    void reap_orphans();
    /// Reaps the handed-over children that have ended, now. Never blocks. For daemon teardown,
    /// where no event loop reports their end: a waiting child handed over while its session was
    /// discarded must not stay a zombie, or its pid namespace's holder never exits (it waits
    /// until its namespace is reaped) and the teardown waits out its bound for each such session.
    void reap_handed_over();
    /// How many handed-over children are still awaited (for tests).
    size_t handed_over_pending() const { return handed_over_.size(); }
    /// How many orphans were reaped so far (for tests and health output).
    size_t orphans_reaped() const { return orphans_reaped_; }

  private:
    struct HandedOver;
    void arm();
    /// Reaps the unowned children /proc lists: of this thread when `this_thread_only`, else of
    /// every thread.
    void reap_unowned_children(bool this_thread_only);

    boost::asio::io_context& io_;
    boost::asio::signal_set signals_;
    std::list<std::unique_ptr<HandedOver>> handed_over_;
    std::set<pid_t> owned_;
    size_t orphans_reaped_ = 0;
    bool stopped_at_owned_ = false;  ///< the last round met an owned zombie before the end
};

}  // namespace corral
