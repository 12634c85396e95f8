#pragma once
// A session's namespaces, held by one process: the holder. It is created with clone3 and every
// namespace the policy asks for; in its new mount namespace it runs the mount plan and
// pivot_root()s, in its network namespace it brings `lo` up, in its uts namespace it sets the
// hostname, and with a pid namespace it is PID 1 and reaps orphans for the session's lifetime.
// Every process of the session then joins these namespaces (launcher.hpp: setns through the
// holder's pidfd), so all of a session's processes see each other like on one machine.

#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/mount_plan.hpp"
#include "isolation/pid_ref.hpp"
#include "policies/policy.hpp"

namespace corral {

/// The running holder of a session's namespaces.
class Sandbox {
  public:
    Sandbox() = default;
    /// Moves leave the source empty (its destructor must not touch the holder).
    Sandbox(Sandbox&& other) noexcept;
    Sandbox& operator=(Sandbox&& other) noexcept;
    /// Kills the holder (SIGKILL through the pidfd) and reaps it.
    ~Sandbox();

    /// Starts the holder in `holder_cgroup` (a leaf of the session). When the policy asks for no
    /// namespace, returns an empty Sandbox (no process). Setup failures come back as errors naming
    /// the step: "mount /proc: EPERM (Operation not permitted)".
    static Result<Sandbox> create(const Policy& policy, const Cgroup& holder_cgroup,
                                  const WorkdirBinding& workdir);
    /// create() in two halves, so the caller can do its own work while the holder mounts on
    /// another CPU: start() clones the holder, wait_until_ready() waits for its setup and, when
    /// that failed, ends it and returns the error. Launching into a sandbox that is not ready
    /// yet is an error of the caller.
    static Result<Sandbox> start(const Policy& policy, const Cgroup& holder_cgroup,
                                 const WorkdirBinding& workdir);
    Status wait_until_ready();

    /// Whether `policy` asks for any namespace, so create() starts a holder (which needs a cgroup
    /// of its own; a session without one skips creating it).
    static bool needed(const Policy& policy);

    /// True when there is a holder (some namespace was requested).
    bool active() const { return holder_.valid(); }
    /// CLONE_NEW* flags of the namespaces the holder owns (for setns(pidfd, flags)).
    int namespace_flags() const { return flags_; }
    /// pidfd of the holder.
    int holder_pidfd() const { return holder_.pidfd(); }
    pid_t holder_pid() const { return holder_.pid(); }
    /// Sends the holder SIGKILL without waiting, so its teardown (the namespaces go with it)
    /// overlaps the caller's own work; stop() then reaps it.
    void begin_stop();
    /// Ends the holder now (idempotent).
    void stop();

  private:
    PidRef holder_;
    int flags_ = 0;
    UniqueFd pending_report_;  ///< read end of the holder's report pipe until it is ready
};

}  // namespace corral
