#pragma once
// corrald's launches, from a thread whose descriptor table is small.
//
// Why: a child gets a copy of its parent's descriptor table, and closes every descriptor it does
// not keep before execve. corrald holds ~12 descriptors per session (pidfds, pipes, cgroup
// directories, the holder's store socket), so with 1,000 sessions every `run` copied ~12,000
// descriptors and then closed them one by one in the child (filp_flush, dnotify_flush,
// locks_remove_posix per file): a third of corrald's CPU per launch in a profile, and `run` took
// 3.6-5.9x its time in an idle daemon (issue 18: "it grows ... at 1,000 sessions").
//
// The worker thread unshares its descriptor table at start and closes everything in its copy but
// its end of a socket pair; for each launch the caller passes it the descriptors the LaunchSpec
// names (SCM_RIGHTS), the worker calls launch_begin() with the spec rewritten to its numbers (the
// child copies a table of about ten), and passes the child's pidfd and report channel back. The
// child is still our child (any thread of corrald may wait for it), born in its cgroup by
// clone3, non-dumpable and with every signal blocked, exactly as launch_begin() makes it.
//
// The caller waits for the worker's answer: the worker does what the caller did before (set up,
// clone3, close), never waits for the child, so the wait is as bounded as the launch was. A
// child that shares corrald's memory (launcher.hpp, issue 18) suspends the worker until it has
// exec'd: where the spec names no setup limit, the worker gives it kSetupReportLimit, which the
// setup watchdog applies (setup_watchdog.hpp), so the caller's wait stays bounded.
//
// A launch that may not share corrald's memory is not forked from the worker's thread at all
// when the launch zygote is there (launch_zygote.hpp): the caller hands it to the zygote, a small
// process this thread forked, whose clone of the command (CLONE_PARENT) makes the command a child
// of this thread all the same. The worker launches it only when there is no zygote (a kernel
// without CLONE_INTO_CGROUP; the zygote killed or stuck, then given up, until an executed one is
// restarted, launch_zygote.hpp; a spec too large for one message).
//
// A session's namespace holder is cloned there too (run_in_small_table, sandbox.hpp) when there
// is no zygote to clone it (launch_zygote.hpp, clone_holder): it copied
// the whole table and closed it again in the child (~14% of corrald's CPU while sessions were
// made beside 800 others, issue 18), and a holder born of this thread is not a child of the
// thread orphans are reparented to, so the orphan reaper's walk does not meet it
// (child_reaper.hpp).

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/launcher.hpp"

namespace corral {

class LaunchZygote;

class LaunchWorker {
  public:
    /// corrald's worker, started on first use; nullptr where it cannot start (the caller then
    /// launches directly). Never destroyed: its thread waits in recvmsg until the process exits.
    static LaunchWorker* shared();

    /// launch_begin(spec), from the worker's small descriptor table. Thread-safe.
    Result<PendingLaunch> launch_begin(const LaunchSpec& spec);

    /// Work done on the worker's thread: `received[i]` is the worker's copy of the caller's
    /// `fds[i]`; the descriptors it returns are passed back into the caller's table, in order
    /// (the worker's copies close afterwards). It must not wait for anything the caller does:
    /// the caller waits for it.
    using SmallTableWork =
        std::function<Result<std::vector<UniqueFd>>(std::span<const int> received)>;
    /// Most descriptors one call may pass (SCM_RIGHTS takes up to 253 in one message).
    static constexpr size_t kMaxDescriptors = kMaxPassedDescriptors;
    /// Inside work: the worker's number for the caller's `fd`, one of `originals` (-1 for -1 or
    /// one not passed).
    static int renumbered(int fd, std::span<const int> originals, std::span<const int> received);
    /// Runs `work` on the worker's thread with copies of `fds` in its table (at most
    /// kMaxDescriptors: more is EMSGSIZE, nothing run). Thread-safe; one call at a time.
    Result<std::vector<UniqueFd>> run_in_small_table(std::span<const int> fds,
                                                     const SmallTableWork& work);

    /// Starts the launch zygote (launch_zygote.hpp), which then starts every launch that does not
    /// share our memory, if this kernel has CLONE_INTO_CGROUP; only the first call does anything.
    /// The zygote is a copy of this process as it is then: corrald calls it when its session
    /// manager starts, before it reads any session. launch_begin() never starts it.
    void start_zygote();
    /// The zygote (started if it was not), nullptr when there is none.
    LaunchZygote* zygote();
    /// The zygote if start_zygote() started one, else nullptr; never starts it (a zygote
    /// forked later would be a copy of corrald with its sessions). The object stays for the
    /// process's life: an executed zygote that died is restarted inside it (under its mutex, so
    /// a pointer read here never dangles), a forked one stays dead.
    LaunchZygote* started_zygote() const { return started_zygote_.load(std::memory_order_acquire); }
    /// What starts forked launches now, for operators (GET /v1/health): "executed" (the zygote
    /// runs corrald's carried program), "forked" (the zygote is a fork of corrald: the program
    /// could not be executed or would lack capabilities, launch_zygote.hpp), or "none" (no
    /// zygote, or it died and was given up: launches fork from this worker, copying corrald,
    /// until an executed one is restarted at a launch, when it says "executed" again).
    const char* zygote_kind() const;

    /// Descriptors open in the worker's table now (for tests: small however many corrald holds).
    Result<int> open_descriptors();

    LaunchWorker(const LaunchWorker&) = delete;
    LaunchWorker& operator=(const LaunchWorker&) = delete;

  private:
    struct Job;
    LaunchWorker() = default;
    Status start();
    void serve(int socket) noexcept;

    std::mutex mutex_;  ///< one job at a time
    UniqueFd socket_;   ///< our end, in corrald's table
    std::thread thread_;
    std::once_flag zygote_started_;
    std::atomic<LaunchZygote*> started_zygote_{nullptr};  ///< zygote_, once start_zygote ran
    /// Starts the launches that fork (launch_zygote.hpp); nullptr: they fork from the thread.
    std::unique_ptr<LaunchZygote> zygote_;
};

}  // namespace corral
