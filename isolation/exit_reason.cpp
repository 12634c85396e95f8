#include "isolation/exit_reason.hpp"

#include <cerrno>
#include <csignal>

namespace corral {

std::string_view to_string(ExitReason reason) {
    switch (reason) {
        case ExitReason::exited: return "exited";
        case ExitReason::signaled: return "signaled";
        case ExitReason::timeout: return "timeout";
        case ExitReason::oom: return "oom";
        case ExitReason::pids_limit: return "pids-limit";
        case ExitReason::seccomp: return "seccomp";
        case ExitReason::killed: return "killed";
        case ExitReason::setup_failed: return "setup-failed";
        case ExitReason::unknown: return "unknown";
    }
    return "unknown";
}

std::optional<ExitReason> parse_exit_reason(std::string_view text) {
    for (ExitReason reason :
         {ExitReason::exited, ExitReason::signaled, ExitReason::timeout, ExitReason::oom,
          ExitReason::pids_limit, ExitReason::seccomp, ExitReason::killed,
          ExitReason::setup_failed, ExitReason::unknown}) {
        if (to_string(reason) == text) return reason;
    }
    return std::nullopt;
}

ExitReason classify_exit(const WaitStatus& status, const EndingContext& context) {
    if (context.timed_out) return ExitReason::timeout;
    if (!status.exited && status.code == SIGSYS) return ExitReason::seccomp;
    if (!status.exited && status.code == SIGKILL && context.oom_event) return ExitReason::oom;
    if (context.killed_by_request && !status.exited) return ExitReason::killed;
    // A limit hit anywhere in the process's tree is reported even when the main process survived
    // it or exited by itself (issue 12.6: a pipeline whose child was OOM-killed exits 137, a
    // shell whose child's forks were refused exits 0); the record's usage carries the counts.
    if (context.oom_event) return ExitReason::oom;
    if (context.pids_limit_hit) return ExitReason::pids_limit;
    return status.exited ? ExitReason::exited : ExitReason::signaled;
}

int shell_exec_failure_code(int error) {
    return error == ENOENT || error == ENOTDIR ? 127 : 126;
}

int shell_exit_code(const WaitStatus& status) {
    return status.exited ? status.code : 128 + status.code;
}

}  // namespace corral
