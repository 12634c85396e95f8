#pragma once
// A session's namespaces, held by one process: the holder. It is created with clone3 and every
// namespace the policy asks for; in its new mount namespace it runs the mount plan and
// pivot_root()s, in its network namespace it brings `lo` up, in its uts namespace it sets the
// hostname, and with a pid namespace it is PID 1 and reaps orphans for the session's lifetime.
// Every process of the session then joins these namespaces (launcher.hpp: setns through the
// holder's pidfd), so all of a session's processes see each other like on one machine.

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/descriptor_store.hpp"
#include "isolation/id_range.hpp"
#include "isolation/mount_plan.hpp"
#include "isolation/pid_ref.hpp"
#include "policies/policy.hpp"

namespace corral {

class SetupDeadline;  // setup_deadline.hpp

/// Who a sandbox's user is on the host.
struct HostIdentity {
    uid_t uid = 0;
    gid_t gid = 0;
};

/// How a holder is started beyond what the policy says.
struct SandboxOptions {
    /// Give the holder a descriptor store (descriptor_store.hpp), so a process's output pipes
    /// outlive the daemon. With a policy that asks for no namespace, a holder without any (a
    /// "keeper") is started for it alone.
    bool keep_output = false;
    /// Test seam: the holder behaves as the kernel does on a host with fs.suid_dumpable=1 (its
    /// dumpable flag is reset to 1 by its credential change), so a test can prove it becomes
    /// non-dumpable again without changing the host's sysctl. Never set by the daemon.
    bool rehearse_suid_dumpable = false;
    /// Where a holder that start() has to give up before its setup goes once it was sent
    /// SIGKILL: corrald's ChildReaper reaps it when its pidfd says it ended, so nothing on the
    /// event loop waits for a process (issue 12). Unset: start() reaps it itself, a short wait.
    std::function<void(PidRef)> reap_given_up;
    /// Clone the holder in corrald's launch zygote (launch_zygote.hpp) when it was started, a
    /// copy of that small process instead of corrald's memory and descriptor table; else on the
    /// launch worker (launch_worker.hpp), from its small descriptor table, instead of copying
    /// the caller's table (and closing it again in the holder): corrald, with thousands of
    /// descriptors. Where neither can take it (not started, too many detached trees to pass),
    /// start() clones directly.
    bool clone_from_small_table = false;
};

/// The running holder of a session's namespaces.
//
// Identity (DESIGN.md "Identity", issue 10): with a user namespace and a root caller, the holder's
// namespace maps inside 0..65535 to a range of host ids leased for this session alone
// (id_range.hpp); the lease stays held by the holder for the namespaces' whole life. Without root
// the namespace maps inside 0 to the caller's own uid, as bubblewrap does.
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
    /// `resolv_conf`: the daemon's resolv.conf for isolated networks (compile_mount_plan).
    static Result<Sandbox> create(const Policy& policy, const Cgroup& holder_cgroup,
                                  const WorkdirBinding& workdir,
                                  const std::string& resolv_conf = {},
                                  const SandboxOptions& options = {});
    /// create() waits for the holder's setup as long as it makes progress, within
    /// kSetupReportLimit / kSetupReportCeiling (it runs on corrald's loop; issue 12 item 1,
    /// setup_deadline.hpp).
    /// create() in two halves, so the caller can do its own work while the holder mounts on
    /// another CPU: start() clones the holder, wait_until_ready() waits for its setup and, when
    /// that failed, ends it and returns the error. Launching into a sandbox that is not ready
    /// yet is an error of the caller.
    static Result<Sandbox> start(const Policy& policy, const Cgroup& holder_cgroup,
                                 const WorkdirBinding& workdir, const std::string& resolv_conf = {},
                                 const SandboxOptions& options = {});
    /// `limit`: how long to wait while the holder uses no CPU (none: as long as it takes;
    /// setup_deadline.hpp); a holder that has not reported by then (stopped, frozen, a mount that
    /// does not return) is killed and reaped, and the error (ETIMEDOUT) says so. A blocking wait:
    /// for callers without an event loop (`corral run`, tests); corrald watches
    /// setup_report_fd() instead.
    Status wait_until_ready(std::optional<std::chrono::milliseconds> limit = std::nullopt);
    /// wait_until_ready() for an event loop (issue 12 item 1: corrald's loop must not wait for a
    /// holder that is stopped, frozen or slow): the read end of the holder's report channel while
    /// its setup has not been reported (-1 once it has, or without a holder). It becomes readable
    /// when the holder reports, or at end of file when it died; then read_setup_report().
    int setup_report_fd() const { return pending_report_.get(); }
    /// Reads the holder's setup report once setup_report_fd() is readable. Ok: the holder is
    /// ready. EAGAIN: nothing there yet (when the caller made the channel non-blocking), wait
    /// again. Any other Error names the failed step; the holder has then been sent SIGKILL and is
    /// left for the caller to reap without waiting (try_reap once holder_pidfd() is readable).
    Status read_setup_report();
    /// The error of a holder whose setup report did not come within `deadline` (the caller
    /// kills it), in wait_until_ready()'s words.
    static Error setup_deadline_error(const SetupDeadline& deadline);
    /// Takes over the holder a previous run of the daemon started (DESIGN.md "Surviving the
    /// daemon"): `pid` must still run, have started at `start_ticks` and be in `holder_cgroup`
    /// (open_verified_process). It is not our child: its end is seen through its pidfd and its
    /// exit is collected by whoever it was reparented to. `identity` is what the previous run
    /// recorded; it must lie inside the holder's own uid/gid maps. With a policy that asks for
    /// no namespace, `pid` is a keeper (or -1: nothing to take). When the holder has a
    /// descriptor store, its channel is taken back too (keeps_output(); `notes` says why not).
    static Result<Sandbox> adopt(pid_t pid, uint64_t start_ticks, const Policy& policy,
                                 const Cgroup& holder_cgroup, std::optional<HostIdentity> identity,
                                 std::vector<std::string>* notes = nullptr);

    /// Whether `policy` asks for any namespace, so create() starts a holder (which needs a cgroup
    /// of its own; a session without one skips creating it).
    static bool needed(const Policy& policy);
    /// Whether create() starts a process for `policy` with `options`: a holder, or a keeper.
    static bool needed(const Policy& policy, const SandboxOptions& options) {
        return needed(policy) || options.keep_output;
    }

    /// True when there is a holder process (a namespace holder, or a keeper).
    bool active() const { return holder_.valid(); }
    /// Whether the holder keeps a descriptor store (hold_output works).
    bool keeps_output() const { return holder_.valid() && store_.valid(); }
    /// Hands copies of `fds` to the holder's slots `slot`, `slot+1`... (DescriptorStore::hold).
    Status hold_output(int slot, std::span<const int> fds);
    /// Lets the holder close slots it keeps.
    void release_output(int slot, int count);
    /// A copy of what the holder keeps in `slot`; EBADF: nothing.
    Result<UniqueFd> take_output(int slot) const;
    /// CLONE_NEW* flags of the namespaces the holder owns (for setns(pidfd, flags)).
    int namespace_flags() const { return flags_; }
    /// pidfd of the holder.
    int holder_pidfd() const { return holder_.pidfd(); }
    pid_t holder_pid() const { return holder_.pid(); }
    /// The host ids of the sandbox's user when it has a user namespace of its own (a leased range,
    /// or the caller's ids without root); nullopt otherwise (the policy's ids apply as they are).
    std::optional<HostIdentity> host_identity() const { return identity_; }
    /// Why the workdir could not be idmapped to its owner (empty when it was, or need not be):
    /// the sandbox then sees it with its own identity, and writes to files it does not own fail.
    const std::string& workdir_warning() const { return workdir_warning_; }
    /// Sends the holder SIGKILL without waiting, so its teardown (the namespaces go with it)
    /// overlaps the caller's own work; stop() then reaps it.
    void begin_stop();
    /// Ends the holder now (idempotent). Blocks until it is reaped: never call it on an event
    /// loop that also reaps the session's processes (see try_reap).
    void stop();
    /// After begin_stop(): reaps the holder if it has exited, without blocking; true once there
    /// is no holder any more. As PID 1 of a pid namespace the holder exits only after every
    /// process of that namespace was reaped — the daemon's own children among them — so an event
    /// loop waits for holder_pidfd() to become readable, then calls this.
    bool try_reap();
    /// Gives the holder up without waiting: SIGKILL, then forget it. Returns it (invalid when
    /// there was none) for whoever reaps it when it ends (corrald: ChildReaper::hand_over).
    PidRef release();

  private:
    PidRef holder_;
    bool adopted_ = false;  ///< not our child: never waited for, its pidfd tells its end
    int flags_ = 0;
    UniqueFd pending_report_;  ///< read end of the holder's report pipe until it is ready
    DescriptorStore store_;
    IdRangeLease lease_;
    std::optional<HostIdentity> identity_;
    std::string workdir_warning_;
};

/// Whether a bound directory like `dir` can be idmapped here (kernel and file system), as the
/// workdir of a root-started sandbox is; the error says why not. For `corral doctor`.
Status probe_idmapped_mount(const std::string& dir);

}  // namespace corral
