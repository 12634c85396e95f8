#pragma once
// What a freshly cloned child tells its parent, and the clone3 call itself. Shared by the launcher
// and the namespace holder. Everything the child calls here is async-signal-safe: the daemon is
// multithreaded, so after clone the child may find malloc's locks held by threads that no longer
// exist in it.

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// One fixed-size message over a CLOEXEC pipe (smaller than PIPE_BUF, so each write is atomic).
struct ChildReport {
    /// policy_path_failure: a failure of a step placing a path the policy named (MountOp's
    /// policy_path), which the parent may take for the policy's error rather than the host's.
    enum Kind : int { failure = 1, ready = 3, listener = 4, policy_path_failure = 5 };
    int kind = 0;
    int error = 0;        ///< errno of the failed step
    pid_t pid = -1;       ///< ready: the sender
    char step[244] = {};  ///< NUL-terminated step name, truncated if longer
};

/// Child side: writes a failure report (step + errno) of `kind` (a failure kind). Async-signal-safe.
void write_failure_report(int fd, const char* step, int error,
                          ChildReport::Kind kind = ChildReport::failure) noexcept;
/// Child side: writes a report of `kind` carrying `pid`. Async-signal-safe.
void write_report(int fd, ChildReport::Kind kind, pid_t pid) noexcept;
/// Parent side: reads one report; nullopt at end of file (the writer exec'd or died).
Result<std::optional<ChildReport>> read_report(int fd);

/// Child side, over a SOCK_SEQPACKET socket: a `listener` report carrying the descriptor
/// `listener` (SCM_RIGHTS). Async-signal-safe. Returns false with errno set.
bool write_listener_report(int socket, int listener) noexcept;
/// Parent side of a SOCK_SEQPACKET report socket: read_report, and a descriptor that came with
/// the report (SCM_RIGHTS, close-on-exec) in *received.
Result<std::optional<ChildReport>> read_report_with_fd(int socket, UniqueFd& received);

/// Raw clone3 without a new stack (fork-like). `cgroup_fd` >= 0 adds CLONE_INTO_CGROUP; with
/// CLONE_PIDFD the pidfd lands in *pidfd. Returns the pid, 0 in the child, -1 with errno.
pid_t clone3_fork(uint64_t flags, int cgroup_fd, int* pidfd) noexcept;

}  // namespace corral
