#pragma once
// The guard that ends a `corral run` job when `corral run` itself dies first.
//
// Why: `corral run` is the job's only supervisor: its timeout, its stop signals and the kill of
// the run's cgroup all live in its process. A CI runner that cancels a job with SIGKILL (or any
// signal `corral run` does not handle) used to leave the whole job running, reparented to PID 1,
// with no timeout (stop 44's operator probe: `corral run --timeout 2s -- sleep 304`, SIGKILL to
// corral run, and sleep 304 lived on). The command leads its own session, so a runner that kills
// its process group does not reach it either.
//
// How: a small process that shares corral run's memory (CLONE_VM: no copy of the address space,
// on a 64 KiB stack of its own) and leads a session of its own (a kill of corral run's process
// group spares it), waiting on corral run's pidfd. When corral run is gone it writes "1" to the
// run cgroup's cgroup.kill (every process of the job: holder, command, daemons it double-forked),
// waits for the tree to empty and removes the run's cgroups. While corral run lives it only
// waits; once the job and its holder are gone corral run stands it down (SIGKILL, reaped at the
// very end, by when it has died on the other CPU: waiting for it at once cost a run ~0.2 ms). It
// touches nothing of libc's state: only system calls on descriptors and names prepared before it
// started.
//
// Not covered: kernels without cgroup.kill (before 5.14) get no kill (the cgroups stay, and the
// next run's create_run_cgroup steps around them). Killing the watchdog along with corral run
// needs the caller's whole cgroup killed, and that kills the job too: the run's cgroup is below it.

#include <sys/types.h>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/cgroup.hpp"

namespace corral::cli {

class RunWatchdog {
  public:
    RunWatchdog() = default;
    /// Starts the guard of `instance`, the run's cgroup named `name` below the directory
    /// `parent` (both as created by create_run_cgroup).
    static Result<RunWatchdog> start(const Cgroup& instance, const std::string& parent,
                                     const std::string& name);
    RunWatchdog(RunWatchdog&& other) noexcept;
    RunWatchdog& operator=(RunWatchdog&& other) noexcept;
    RunWatchdog(const RunWatchdog&) = delete;
    RunWatchdog& operator=(const RunWatchdog&) = delete;
    /// Ends the guard: corral run has ended the job and its holder itself. Does not wait.
    void stand_down();
    /// Stands the guard down if it is not yet, and reaps it.
    ~RunWatchdog();

    /// Also removes `v1_directory` (a v1 limit cgroup of the run: hybrid hosts) once the job is
    /// gone. Up to four; call before the command starts.
    Status also_remove(const std::string& v1_directory);

    pid_t pid() const { return pid_; }

  private:
    void stop();
    pid_t pid_ = -1;
    UniqueFd pidfd_;  ///< signalled and waited on: never the pid, which could be reused
    bool standing_down_ = false;
    void* stack_ = nullptr;  ///< its stack and, at the bottom, what it needs (struct Guarded)
};

}  // namespace corral::cli
