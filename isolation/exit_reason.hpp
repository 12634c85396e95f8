#pragma once
// Why a process ended: one type for `corral run`, the daemon's records and the API.

#include <optional>
#include <string_view>

#include "isolation/pid_ref.hpp"

namespace corral {

/// The exit reasons of DESIGN.md, in the words the API and reports use.
/// `unknown`: the process ended, but nobody could learn how — it was started by a previous run of
/// the daemon and was not this run's child (DESIGN.md "Surviving the daemon").
enum class ExitReason {
    exited,
    signaled,
    timeout,
    oom,
    pids_limit,
    seccomp,
    killed,
    setup_failed,
    unknown
};

/// "exited", "signaled", "timeout", "oom", "pids-limit", "seccomp", "killed", "setup-failed",
/// "unknown".
std::string_view to_string(ExitReason reason);
/// The reverse of to_string; nullopt for anything else.
std::optional<ExitReason> parse_exit_reason(std::string_view text);

/// What the supervisor knows besides the wait status, to tell the truth about an ending.
struct EndingContext {
    bool timed_out = false;        ///< our timeout fired and we stopped it
    bool killed_by_request = false;///< the API / session end / forwarded stop killed it
    bool oom_event = false;        ///< the cgroup saw an OOM kill
    bool pids_limit_hit = false;   ///< the cgroup refused forks at its pids limit
};

/// Classifies a wait status: our own actions first (timeout, killed), then what the kernel did
/// (SIGSYS -> seccomp, an OOM kill in the tree -> oom, refused forks -> pids-limit), then plain
/// exited/signaled. A limit hit is the reason even when the main process exited 0: the record
/// says the tree ran into its limit; exitCode still says how the main process ended.
ExitReason classify_exit(const WaitStatus& status, const EndingContext& context);

/// What a shell exits with when execve of a command fails with `error`: 127 when there is no
/// such program (ENOENT, ENOTDIR), 126 when it exists but cannot be executed (EACCES, ENOEXEC,
/// EPERM, ...), as POSIX sh specifies for "command not found" / "not executable".
int shell_exec_failure_code(int error);

/// The shell convention: the exit code, or 128 + signal number.
int shell_exit_code(const WaitStatus& status);

}  // namespace corral
