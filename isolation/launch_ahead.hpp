#pragma once
// A session's first process started ahead (issue 18, "a session ready to run"): a prepared
// session (session_prepared.cpp) holds a child that has already been cloned into the first
// process's leaf and has entered the session's namespaces, and waits there for its command. The
// first launch hands it the rest of its spec instead of asking the launch zygote for a clone.
//
// Why: after an idle pause, a launch's way to its command was the zygote's wake-up, its clone3
// (264 us: page tables, the cgroup's css_set, the pid namespace), and the child's entering of the
// session (setns into six namespaces, the identity change): ~0.35 ms of the ~2.4 ms a client
// waited for a new session's first run. Done while the session is prepared, none of it is on the
// client's path; what is left is one message to the waiting child.
//
// Its way: the zygote clones it as it clones a launch's child (CLONE_PARENT, born in the leaf with
// every signal blocked, in the holder's pid namespace) and it runs the same first half as every
// launched child (launcher.cpp: enter_session): a session of its own (setsid), non-dumpable, every
// descriptor closed but the session's and its end of `go` (a SOCK_SEQPACKET socket pair with
// corrald), signals reset, the v1 cgroups and the session's namespaces joined, root of the
// session's user namespace, non-dumpable again. Then it drops the capability bounding set its
// session's confinement asks for (~40 prctl calls, the first step of apply_confinement; the
// command's confinement skips that step when it asks for the same set and drops again otherwise: a
// bounding set only shrinks, so the command never keeps more than its own confinement allows),
// closes the session's descriptors too, blocks every signal, installs its session's seccomp filter
// with no_new_privs (the last step of apply_confinement, ~0.1 ms of the kernel's: it converts,
// JIT-compiles and emulates the program for every syscall number), says so on `go` (one byte, which
// corrald requires before it hands a command over: a child that failed to enter wrote its failure
// there instead, one still entering has written nothing; the filter's listener comes with it), and
// waits on `go`. The filter goes ahead only where it allows every call the child still makes up to
// execve (filter_may_go_ahead), and the child takes only a command confined by that same filter
// (corrald compares them first; the child checks again and refuses another): a filter only
// restricts, and the command is confined by exactly its own. The launch message
// (launch_message.hpp, without the session's part, which it has already joined) and the write end
// of the launch's report channel arrive there, and it runs the same second half as every launched
// child (become_command: stdio, cwd, confinement, execve), reporting the same way. If corrald
// closes `go` (the session ended, corrald stopped) it exits with 0 and nothing else.
//
// Security: it is a launch's child that waits between its two halves, so it holds what one holds
// there and no more: nothing of corrald's table (keep_only_planned, before it joins anything), no
// session's secrets (it is a copy of the zygote, which wipes every request once served, and the
// request that made it carries no command, environment or cwd), and it cannot be reached from
// the session: non-dumpable with its mm owned by the host's user namespace (no ptrace, no
// /proc/N/mem or /proc/N/fd for a process of the session; CVE-2016-9962, runc's process that was
// dumpable while it joined a container), and nothing of a client's runs in the session while it
// waits: a prepared session has run nothing, and the session's first launch either takes it (it
// *is* that process) or kills it before launching another way (Process::launch_child).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/confinement.hpp"
#include "isolation/launcher.hpp"
#include "isolation/pid_ref.hpp"

namespace corral {

/// A child that entered its session and waits for its command.
struct WaitingLaunch {
    PidRef child;  ///< its pidfd; corrald's child (the zygote clones it with CLONE_PARENT)
    UniqueFd go;   ///< corrald's end of the socket pair the command comes over
    /// When it started (/proc/<pid>/stat; an execve keeps it): read while it waits, so that the
    /// command it becomes does not read it on its way (0: unknown, read then).
    uint64_t start_ticks = 0;
    /// Its CPU time then (/proc/<pid>/schedstat): the launch's setup deadline starts from it
    /// (setup_deadline.hpp). Read maybe before it finished entering its session: what it used
    /// since counts as progress once, which gives it at most one more window.
    std::optional<uint64_t> cpu_ns;
    /// The seccomp filter its child installed while it waits (seccomp_fingerprint of ahead_part's
    /// confinement), 0 for none: only a command confined by the same filter is handed to it.
    uint64_t filter_ahead = 0;
    /// The listener of that filter, once it came with the child's word that it entered.
    UniqueFd listener;
};

/// What of a launch's spec a waiting child is started with, and all that crosses to the zygote for
/// it: the session's part (cgroup_fd, v1_join_fds, namespace_holder_pidfd, namespace_flags) and
/// of `spec`'s confinement the capability bounding set and, where filter_may_go_ahead(), the
/// seccomp filter, which `ahead` holds for the returned spec (no confinement there when `spec`'s
/// has neither). Nothing of the command: no argv, environment, cwd, stdio, ruleset or secret.
LaunchSpec ahead_part(const LaunchSpec& spec, Confinement& ahead);

/// The system calls a waiting child may make after installing its filter ahead, up to execve.
std::vector<std::string> calls_after_filter_ahead();
/// Whether `c`'s seccomp filter may be installed by a waiting child (it has one, and it allows
/// every call of calls_after_filter_ahead() whatever the arguments: the child could not finish
/// its set-up under it otherwise).
bool filter_may_go_ahead(const Confinement& c);
/// Which seccomp filter `c` asks for, as a number (0: none): what WaitingLaunch::filter_ahead is
/// compared with.
uint64_t seccomp_fingerprint(const Confinement* c);

/// What is left of a launch's spec for a child started with ahead_part() of it: `spec` without
/// the session's part, which the child has joined already.
LaunchSpec command_part(const LaunchSpec& spec);

/// In the launch zygote: clones the waiting child for an ahead_part() spec (plus clone_parent).
/// The caller must be single-threaded (the child allocates once its command comes).
Result<WaitingLaunch> start_waiting_launch(const LaunchSpec& spec);

/// Kills `waiting`'s child and reaps it if it is gone within a moment (a SIGKILLed child blocked in
/// recvmsg goes at once; it must be gone before another launch is charged to the same pids
/// limit). true: reaped; false: still there (stuck in the kernel), the caller hands it over.
bool end_waiting_launch(WaitingLaunch& waiting);

/// Hands `spec` to `waiting`'s child, which must have been started with ahead_part() of a spec of
/// the same session (only command_part() of `spec` is sent), and only once the child has said it
/// entered its session (one byte on `go`: a child that failed to enter, or has not finished yet,
/// is not used). As launch_begin() from then on: the child's report channel, its listener when it
/// counts refusals. nullopt: the child did not take it (gone, not in its session, no descriptors
/// left, or the spec too large for one message); `waiting` still holds it then, for the caller to
/// end (end_waiting_launch) before launching another way. No error of its own: whatever fails
/// here, another way may still work.
std::optional<PendingLaunch> launch_waiting(WaitingLaunch& waiting, const LaunchSpec& spec);

}  // namespace corral
