#pragma once
// Starts one process of a session. Everything is computed before the clone; the child only makes
// async-signal-safe system calls and reports a setup failure (step name + errno) over a CLOEXEC
// pipe, so the caller gets "chdir `/nope`: ENOENT", never a bare 127.
//
// Path: clone3(CLONE_INTO_CGROUP | CLONE_PIDFD) puts the child in its leaf cgroup before its first
// instruction (no window where a fork escapes tracking). Where clone3 or CLONE_INTO_CGROUP is
// missing (ENOSYS/EINVAL), fall back to clone + writing the pid to cgroup.procs before the child is
// released. When the session has namespaces, the child setns()es into the holder's namespaces
// (sandbox.hpp); a pid namespace applies only to children, so for the clone the calling thread
// enters the holder's pid namespace for its children and returns to its own right after.
//
// Refusal counting (seccomp_listener.hpp): the report channel is then a SOCK_SEQPACKET socket
// pair, over which the child sends its seccomp listener (SCM_RIGHTS) as the first call after
// installing its filter, before execve. The listener is close-on-exec, so the command never holds
// it: a process holding its own listener could answer its own refused calls with "continue".
//
// Sharing memory (issue 18): fork's copy of corrald's address space was half of corrald's CPU per
// launch (copy_page_range at the clone, unmapping the copy at execve, copy-on-write faults in
// corrald afterwards). Where launch_may_share_memory() allows it, the child is started with
// CLONE_VM | CLONE_VFORK (clone_vm.hpp) instead: nothing is copied, and the launching thread is
// suspended until the child has exec'd or exited. The rule, because that suspension reaches
// corrald's loop (it waits for the launch worker, launch_worker.hpp):
//
//   Share memory only where nothing that cannot already stop corrald can stop or stall the child
//   before execve.
//
// A child stopped before execve is otherwise bounded by spec.setup_limit (issue 12 item 1); a
// suspended launcher cannot apply one. So the child must keep corrald's credentials, user
// namespace and pid namespace up to execve: no namespaces to join (a session's processes could
// signal, ptrace or freeze a child in their namespaces), no uid/gid or capability change (a
// process of the new identity, or one with fewer capabilities, could stop or ptrace it; a uid
// change makes the kernel set the shared mm's dumpability from suid_dumpable), and no seccomp
// listener to hand over (its refused calls before execve are answered by the launcher, which is
// suspended: the child would wait for ever). With /proc/sys/fs/suid_dumpable 1 it never shares: any
// credential change the kernel makes on the child's behalf would then make corrald's own mm
// dumpable. In practice: sessions of the `none` preset and `corral run --policy none`. Everything
// else forks as before; in corrald, from the launch zygote (launch_zygote.hpp), a small process
// whose memory is copied instead of corrald's.
//
// What a child sharing our memory may do before execve (child_main): only system calls and
// writes to its own stack (and the one word that says it reached execve), never malloc/free
// (corrald's other threads keep running and may hold the allocator's locks) or anything another
// thread reads; errno and TLS are the suspended launcher's. Its signal handlers are a copy (no
// CLONE_SIGHAND), reset to the defaults before it unblocks the signals every launch blocks
// across the clone (glibc's internal 32 and 33 too). It cannot make itself non-dumpable as a
// forked child does: the flag belongs to the mm, which is corrald's until execve.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/confinement.hpp"
#include "isolation/pid_ref.hpp"
#include "isolation/seccomp_listener.hpp"

namespace corral {

class SetupDeadline;  // setup_deadline.hpp

/// What to start and how.
struct LaunchSpec {
    std::vector<std::string> argv;  ///< argv[0] is resolved through PATH from `env` if no '/'
    std::vector<std::string> env;   ///< "KEY=VALUE"
    std::string cwd;                ///< inside the sandbox; must exist
    int cgroup_fd = -1;             ///< v2 leaf (Cgroup::dir_fd); required
    std::vector<int> v1_join_fds;   ///< v1 `tasks` files: the child writes "0"
    int namespace_holder_pidfd = -1;          ///< -1: no namespaces to join
    int namespace_flags = 0;                  ///< CLONE_NEW* of the holder
    int stdin_fd = -1;                        ///< -1: /dev/null
    int stdout_fd = 1;
    int stderr_fd = 2;
    /// When >= 3: becomes the child's fd 3 (a shell context's state-dump pipe); -1: none.
    int extra_fd = -1;
    bool new_session = true;  ///< setsid() so the process has no controlling terminal
    /// After setsid(), make stdin (a PTY slave) the controlling terminal (TIOCSCTTY), so job
    /// control works: the terminal's ^C/^Z reach the foreground process group. Needs new_session.
    bool controlling_terminal = false;
    const Confinement* confinement = nullptr;  ///< nullptr: none
    /// Where the confinement's Landlock ruleset is in the launching thread's descriptor table
    /// when that is not the confinement's own number (launch_worker.hpp); -1: its own.
    int landlock_ruleset_fd = -1;
    /// Counts the refusals of the confinement's seccomp filter (issue 17.6): the child installs
    /// the notifying filter with a listener and hands it over before execve, and the launcher
    /// attaches it here (answering the calls the child makes until execve). nullptr, or a
    /// confinement with nothing to count: the filter without a listener.
    SeccompRefusals* refusals = nullptr;
    /// How long launch() waits for the child to reach execve without it making progress
    /// (kSetupReportLimit in corrald, setup_deadline.hpp): a child stopped or frozen before it is
    /// killed after this, and launch() fails with ETIMEDOUT. nullopt: as long as it takes
    /// (`corral run`, whose only work is this child). launch_begin() applies it to a child that
    /// shares our memory (setup_watchdog.hpp), which suspends it until the child has exec'd.
    std::optional<std::chrono::milliseconds> setup_limit;
    /// false: start the child as a copy of our memory (fork) even where
    /// launch_may_share_memory() allows sharing it (tests compare the two paths).
    bool may_share_memory = true;
    /// The child becomes our parent's child (CLONE_PARENT), not ours: the launch zygote's
    /// launches, which corrald reaps (launch_zygote.hpp). Forks; needs clone3 with
    /// CLONE_INTO_CGROUP (there is no fallback for it).
    bool clone_parent = false;
};

/// Whether spec's child may share our memory until execve (CLONE_VM | CLONE_VFORK; the rule is
/// at the top of this file): no namespaces to join, no identity or capability change, no seccomp
/// listener to hand over, and /proc/sys/fs/suid_dumpable (read once) not 1. launch_begin()
/// shares where this allows and the architecture has clone3_on_stack() (clone_vm.hpp).
bool launch_may_share_memory(const LaunchSpec& spec);
/// The same decision with suid_dumpable's value given (-1: unknown, never shares).
bool launch_may_share_memory(const LaunchSpec& spec, int suid_dumpable);

/// A setup failure inside the child: which step, which errno.
struct LaunchFailure {
    std::string step;  ///< "chdir `/nope`", "execve `foo`", "setns", "seccomp"
    int error = 0;
};

/// Starts the process and waits until it has exec'd (within spec.setup_limit); on a setup
/// failure, the Error's code is the child's errno and its message names the step. The returned
/// PidRef is our child (waitid works). For callers that may block (`corral run`, tests).
Result<PidRef> launch(const LaunchSpec& spec);

/// A child launch_begin() started that may not have reached execve yet. Its report channel
/// becomes readable when the child reports (a setup failure, or its seccomp listener) and at end
/// of file once it has exec'd or died; read_launch_report() reads what is there.
struct PendingLaunch {
    PidRef child;     ///< our child
    UniqueFd report;  ///< the channel's read end (blocking; read it only when readable)
    /// The first report may carry the seccomp listener (spec.refusals with a notifying filter).
    bool listener_expected = false;
    /// The listener, where it came before the launch (a filter installed by a waiting child:
    /// launch_ahead.hpp); then none is expected.
    UniqueFd listener;
    /// Known when launch_begin() returned: the child has exec'd, so there is nothing to watch
    /// `report` for. Only a launch that shared our memory (CLONE_VFORK: we resumed once it had
    /// exec'd or exited) and found no failure report on the channel.
    bool exec_reached = false;
};

/// launch() without the wait, for an event loop (issue 12 item 1: corrald's loop must not wait
/// for a child a same-session process can stop before execve). The caller watches `report`,
/// calls read_launch_report() when it is readable, applies its own SetupDeadline (killing the
/// child through its pidfd when it expires: launch_deadline_error()), and reaps the child.
Result<PendingLaunch> launch_begin(const LaunchSpec& spec);
/// For a single-threaded process that installs no signal handler and ignores no signal from now
/// on (the launch zygote): sets every disposition to the default once, so that the children it
/// launches need not (they clear only the signal mask before execve: 64 system calls fewer in
/// each).
void reset_signal_dispositions_for_good() noexcept;
/// Reads one report of a pending launch (the channel must be readable: it never waits then).
/// true: the child has exec'd. false: a listener came (attached to `refusals`, whose calls the
/// caller now answers) and more is to come. An Error: the setup failed (the child is exiting with
/// 127, or must be killed when the channel itself failed), in launch()'s form.
Result<bool> read_launch_report(PendingLaunch& pending, SeccompRefusals* refusals);
/// The error of a launch whose child did not reach execve within its SetupDeadline.
Error launch_deadline_error(const SetupDeadline& deadline);

/// When launch() failed at execve, the exit code a shell gives for it (127 not found, 126 found
/// but not executable: shell_exec_failure_code); nullopt for every other setup failure.
std::optional<int> exec_failure_exit_code(const Error& launch_error);

/// Whether clone3 with CLONE_INTO_CGROUP works here (probed once; for `corral doctor`).
bool clone_into_cgroup_supported();

}  // namespace corral
