#pragma once
// How long corrald waits for a child's or a namespace holder's setup report (issue 12 item 1).
//
// The wait is on corrald's loop, so it must end: a child stopped (SIGSTOP) or frozen before
// execve, or a holder whose mounts never return, is killed and the spawn or the session's
// creation fails saying so. But a deadline on wall time alone also kills setups that are merely
// slow: a session's own `limits.cpu` (cpu.max is written before the holder and its children are
// cloned into the cgroup) runs them at a few percent of a CPU, and an emulated or loaded host is
// 10-15x slower (review of the bounded waits). So the limit counts only time in which the child
// made no progress: when it passes, the child's CPU time (/proc/<pid>/schedstat) is compared with
// what it was when the limit began, and a child that ran at all gets another limit, up to a
// ceiling. A stopped or frozen child uses no CPU and is killed after one limit.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>

#include "base/error.hpp"

namespace corral {

/// One limit without progress ends the wait (corrald; `corral run` waits as long as it takes).
inline constexpr std::chrono::milliseconds kSetupReportLimit{std::chrono::seconds(10)};
/// However much progress it makes, a setup is given at most this long in all: the loop is
/// blocked for at most this long (a session can slow its own children down to nothing).
inline constexpr std::chrono::milliseconds kSetupReportCeiling{std::chrono::seconds(30)};

/// The deadline of one setup wait, extended while `pid` (our unreaped child) uses CPU.
class SetupDeadline {
  public:
    /// No limit: poll_timeout() is -1 and expired() never happens.
    SetupDeadline() = default;
    SetupDeadline(std::chrono::milliseconds limit, pid_t pid,
                  std::chrono::milliseconds ceiling = kSetupReportCeiling);
    /// The same, for a child whose CPU time now is known: read earlier while it was blocked (a
    /// child started ahead, launch_ahead.hpp), so it is not read again on the launch's way.
    static SetupDeadline from_cpu(std::chrono::milliseconds limit, pid_t pid, uint64_t cpu_ns);

    /// poll()'s timeout for the time left in the current limit (-1: none).
    int poll_timeout() const;
    /// At a poll() that timed out: whether the wait is over (the child used no CPU during the
    /// last limit, or the ceiling passed). Otherwise a new limit begins and false is returned.
    bool expired();
    /// For the error message: "within <limit> ms in which it used no CPU (waited ...)".
    std::string describe() const;

  private:
    SetupDeadline(std::chrono::milliseconds limit, pid_t pid, std::chrono::milliseconds ceiling,
                  std::optional<uint64_t> cpu_ns);
    std::optional<std::chrono::milliseconds> limit_;
    std::chrono::milliseconds ceiling_{0};
    pid_t pid_ = -1;
    std::chrono::steady_clock::time_point began_{};
    std::chrono::steady_clock::time_point deadline_{};
    std::optional<uint64_t> cpu_ns_;
};

/// CPU time `pid` has used, in nanoseconds (/proc/<pid>/schedstat's first field; nullopt when it
/// cannot be read).
std::optional<uint64_t> process_cpu_ns(pid_t pid);

/// Parent side: waits until `fd` is readable (a report, or end of file), at most as `deadline`
/// allows. ETIMEDOUT naming `what` when it expired.
Status await_report(int fd, SetupDeadline& deadline, const char* what);

}  // namespace corral
