#pragma once
// A small process that starts corrald's forked launches, so a launch copies its memory instead of
// corrald's (issue 18).
//
// Why: a launch that may not share corrald's memory (launcher.hpp: every session with namespaces,
// another identity or counted refusals, i.e. `default` and stricter) was a fork of corrald. The
// fork copies the page tables of every page corrald has written (copy_page_range), the child's
// execve tears that copy down again (exit_mmap), and every page corrald writes afterwards is
// copied once more (copy-on-write faults): ~22% of all CPU of an idle daemon's `default` runs in a
// profile, and it grows with corrald's heap, i.e. with the number of sessions.
//
// The zygote is forked once, by the launch worker's thread (launch_worker.hpp), when the session
// manager starts and before it reads the journal, and executes corrald-launch: a small static
// program (supervisor/corrald_launch_main.cpp) that corrald carries in its own binary and runs
// from a sealed memfd (sealed_executable.hpp), so there is no second file to install or to trust.
// Single-threaded, with a descriptor table of stdio and one socket (corrald moves it into its own
// cgroup with itself). Why its own program: a fork of corrald was a copy of corrald's 118
// mappings (20 shared libraries: nftables, systemd, their compressors and crypto), and every
// clone copies the mappings of the process it clones, and every execve tears them down again: the
// zygote's clone of a command took 163 us back-to-back and 496 us after a 20 ms pause (a fork of
// a process with a handful of mappings: 52 and 178 us on the same machine). Where it cannot be
// executed (a memfd may not be executed, vm.memfd_noexec = 2; an LSM refuses; it would hold fewer
// capabilities than corrald), the fork serves as the zygote itself, a copy of corrald before it
// knows any session, as before. For each launch corrald sends the spec as bytes
// (launch_message.hpp) and its descriptors (SCM_RIGHTS); the zygote runs launch_begin() with
// CLONE_PARENT and sends back the child's pidfd and report channel. The child is therefore a
// child of the worker's thread, exactly as a launch from the worker (corrald waits for it and
// reads its reports; the orphan walk does not meet it, child_reaper.hpp), and is made by the same
// code: born in its cgroup, every signal blocked, non-dumpable, the same setup steps.
//
// A session's namespace holder (holder_plan.hpp) is cloned there too (clone_holder): its plan
// crosses as bytes with the descriptors it names, and the zygote clones it with CLONE_PARENT,
// the plan's namespaces and CLONE_INTO_CGROUP, so it is the worker thread's child as one cloned
// on the worker was (Sandbox waits for it the same way). A holder lives as long as its session,
// as its sandbox's PID 1: a copy of corrald was a copy of every session's token (until it
// dropped its heap copy after setup, and in corrald's other mappings for good), and each clone
// copied corrald's page tables (copy_page_range ~9.5% of corrald's CPU beside 1,000 sessions)
// and left corrald copy-on-write faults to pay.
//
// Security: the zygote holds corrald's privileges and nothing of any session but the launch at
// hand (no tokens: before, every launch was a copy of corrald with all of them until its execve;
// now it is a copy of the zygote). Nothing of a session can reach it
// (it is in corrald's namespaces and cgroup, non-dumpable, its socket has no name), and it never
// waits for a child, so a child stopped before execve stalls nobody. A child it starts keeps
// nothing of its table but the spec's descriptors (launcher.cpp: keep_only_planned), and the
// zygote wipes each request once served. It dies with corrald (PR_SET_PDEATHSIG, and the end of
// its socket). If it dies or stops answering (kSetupReportLimit), corrald kills and reaps it and
// launches from the worker, as before the zygote, until it is restarted.
//
// Restarts (stop 34): a dead zygote left every later launch and holder to fork from the worker,
// a copy of corrald's whole address space (issue 18's cost, growing with sessions). An executed
// zygote is started again, by the worker's thread as at start, when a launch or holder clone
// finds it dead (its exchange failed: no check of its own on the way of a launch), and the
// request at hand goes to the new one if nothing of it was started. Safe while sessions exist:
// the new zygote is the carried program again, nothing of corrald's memory (the worker's fork is
// a copy of corrald only until its execveat, as each of the worker's own launches is). Bounded:
// at most one attempt per kRestartInterval, so one that is killed each time (an LSM, a watchdog)
// costs a fork and a handshake every few seconds, not every launch; a restart that fails is
// logged and not tried again (launches fork from the worker, as before restarts). The new one is
// forked by the worker's thread, so it is born in corrald's cgroup (where corrald moved itself,
// with its threads) and its CLONE_PARENT children are that thread's, as the first one's.
// A *forked* zygote is never restarted: a fork of corrald now would be a copy of corrald with
// every session's tokens (issue 10.1, CVE-2019-5736), and it would serve, and hand its memory to
// every holder it clones, for as long as it lives.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/holder_plan.hpp"
#include "isolation/launch_ahead.hpp"
#include "isolation/launcher.hpp"
#include "isolation/pid_ref.hpp"
#include "isolation/setup_deadline.hpp"

namespace corral {

class LaunchWorker;

class LaunchZygote {
  public:
    /// Forks the zygote from `worker`'s thread. With an `image` (an executable's descriptor:
    /// the one registered with set_image() unless one is given), the fork executes it, with
    /// nothing of corrald's memory, libraries or environment; if that zygote does not start or
    /// lacks any of our capabilities, the fork serves as the zygote itself, as without an
    /// image. A launch it has not answered within `answer_limit` gives it up (bury). Errors name
    /// the step.
    static Result<std::unique_ptr<LaunchZygote>> start(
        LaunchWorker& worker, std::chrono::milliseconds answer_limit = kSetupReportLimit,
        int image = registered_image());
    /// The program a zygote runs from now on (corrald's carried corrald-launch: supervisor/).
    /// Once, before the first start(); the descriptor is kept for the process's life.
    static void set_image(UniqueFd image);
    /// What set_image() was given; -1 when nothing was.
    static int registered_image();
    ~LaunchZygote();

    /// launch_begin(spec) in the zygote (a fork launch, whatever spec.may_share_memory says); an
    /// executed zygote found dead is restarted first (see above: kRestartInterval).
    /// nullopt: nothing was launched and the caller should launch another way, because the
    /// zygote is gone (killed and reaped then: alive() is false until a restart) or the spec is
    /// too large for one message. A zygote that took the request but gave no answer (gone or silent
    /// past its limit) is given up; if it had started the command (the spec's cgroup, a fresh
    /// leaf, is not empty once the zygote is reaped), what is there is killed and reaped and the
    /// launch fails (ECANCELED): the command is never started twice.
    std::optional<Result<PendingLaunch>> launch_begin(const LaunchSpec& spec);
    /// A session's first process started ahead (launch_ahead.hpp) for ahead_part(spec),
    /// as corrald's child. nullopt: nothing was started (as launch_begin). An unanswered request
    /// is handled as an unanswered launch.
    std::optional<Result<WaitingLaunch>> launch_ahead(const LaunchSpec& spec);
    /// A session's namespace holder (holder_plan.hpp) cloned in the zygote with CLONE_PARENT
    /// into `cgroup_fd` (the holder's own fresh leaf): a child of the worker's thread, as one
    /// cloned there (sandbox.cpp), but a copy of the zygote's memory, not corrald's. nullopt:
    /// nothing was cloned, clone another way (as launch_begin: the zygote gone, or the plan too
    /// large for one message). An unanswered clone is handled as an unanswered launch.
    std::optional<Result<PidRef>> clone_holder(const HolderPlan& plan, int cgroup_fd);
    /// Kills and reaps the zygote (a caller that cannot use it); later launches get nullopt, and
    /// it is never restarted.
    void give_up();

    /// The least time between two restarts of an executed zygote (see above). A restart costs a
    /// fork of corrald from the worker (one worker launch's worth: corrald's page tables), an
    /// execveat of the static carried program and a handshake, ~1-2 ms; one every 5 s is at
    /// most ~0.04% of a CPU and two log lines per 5 s for a zygote killed each time it starts,
    /// while one killed once (the OOM killer, an operator) is back at the next launch.
    static constexpr std::chrono::seconds kRestartInterval{5};

    /// Whether it runs the image (its own program) rather than a fork of corrald (tests).
    bool executed() const { return executed_; }
    /// Whether the zygote is (as far as we know) still there.
    bool alive() const;
    /// Its pid (tests, and operators reading `ps`: it is named corrald-launch); a restart
    /// changes it.
    pid_t pid() const;
    /// Launches it started (tests).
    uint64_t launches() const;
    /// Holders it cloned (tests).
    uint64_t holders() const;
    /// Waiting children it started (launch_ahead; tests).
    uint64_t launches_ahead() const;
    /// Times it was restarted (tests).
    uint64_t restarts() const;

    LaunchZygote(const LaunchZygote&) = delete;
    LaunchZygote& operator=(const LaunchZygote&) = delete;

  private:
    LaunchZygote(UniqueFd socket, PidRef process, std::chrono::milliseconds answer_limit,
                 LaunchWorker& worker, bool executed, UniqueFd image);
    /// start() of one kind: the fork executes `image`, or serves itself when it is -1.
    static Result<std::unique_ptr<LaunchZygote>> start_one(LaunchWorker& worker,
                                                           std::chrono::milliseconds answer_limit,
                                                           int image);
    /// Kills and reaps the zygote; later launches get nullopt (or restart it).
    void bury();
    /// Starts a new zygote in place of a buried executed one (mutex_ held): true when it serves.
    /// Never for a forked one, nor after give_up() or a restart that failed, nor within
    /// kRestartInterval of the last attempt.
    bool restart();
    /// Sends one request and reads its answer (mutex_ held), restarting a dead executed zygote
    /// first, and once more for a request the lost zygote had not started anything of. The
    /// answer's bytes start with the zygote's Answer; its descriptors are `channels` of the
    /// child's, then its pidfd when it has one. nullopt: nothing was started (the request went
    /// nowhere, or the zygote was lost and `cgroup_fd`, the child's fresh cgroup, is empty). An
    /// Error: the zygote's, or the zygote was lost after it started something (ended here,
    /// ECANCELED: never retried, the command must not start twice).
    std::optional<Result<PassedMessage>> exchange(std::string_view bytes, std::span<const int> fds,
                                                  int cgroup_fd, size_t channels);
    /// exchange() with the zygote there is now, no restart.
    std::optional<Result<PassedMessage>> exchange_once(std::string_view bytes,
                                                       std::span<const int> fds, int cgroup_fd,
                                                       size_t channels);

    mutable std::mutex mutex_;  ///< one launch (or restart) at a time
    UniqueFd socket_;           ///< replaced by a restart, under mutex_
    PidRef process_;            ///< replaced by a restart, under mutex_
    std::chrono::milliseconds answer_limit_;
    LaunchWorker& worker_;  ///< forks a restarted zygote (process-wide: outlives us)
    /// Our own copy of the image an executed zygote runs, to restart it (the caller's may be
    /// closed); invalid for a forked one, which is never restarted.
    UniqueFd image_;
    /// The last restart attempt: the next is not before kRestartInterval after it.
    std::optional<std::chrono::steady_clock::time_point> last_restart_;
    bool restartable_ = true;  ///< false after give_up() or a failed restart
    uint64_t launches_ = 0;
    uint64_t holders_ = 0;
    uint64_t launches_ahead_ = 0;
    uint64_t restarts_ = 0;
    const bool executed_;
};

/// The zygote's side (launch_zygote_main.cpp): serves launches on `socket` until it closes,
/// while `parent` (corrald's worker thread) lives; the holders it clones are named
/// `holder_name` (corrald's name, as a holder cloned by corrald is). Never returns.
[[noreturn]] void launch_zygote_main(int socket, pid_t parent, const char* holder_name) noexcept;

}  // namespace corral
