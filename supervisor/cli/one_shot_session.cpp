#include "supervisor/cli/one_shot_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/cgroup_placement.hpp"
#include "isolation/confinement.hpp"
#include "isolation/launcher.hpp"
#include "isolation/limits.hpp"
#include "isolation/sandbox.hpp"
#include "isolation/seccomp_listener.hpp"
#include "isolation/systemd_scope.hpp"
#include "policies/environment.hpp"
#include "supervisor/cli/run_watchdog.hpp"
#include "supervisor/cli/workdir_copy.hpp"

extern char** environ;

namespace corral::cli {
namespace {

using Clock = std::chrono::steady_clock;

/// Refused calls answered per wake-up of the loop.
constexpr size_t kRefusalsPerWake = 64;

/// Signals we take over while a session runs: stop requests to forward, and SIGCHLD for orphans.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/// Blocks the forwarded signals and SIGCHLD for the session's lifetime and reads them from a
/// signalfd. The launcher resets the mask in the child, so the command sees default signals.
class SignalCapture {
  public:
    SignalCapture() {
        sigset_t set;
        sigemptyset(&set);
        for (int sig : kForwardedSignals) sigaddset(&set, sig);
        sigaddset(&set, SIGCHLD);
        sigprocmask(SIG_BLOCK, &set, &previous_);
        fd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    }
    ~SignalCapture() { sigprocmask(SIG_SETMASK, &previous_, nullptr); }
    int fd() const { return fd_.get(); }
    /// The next pending signal number, or 0.
    int next() {
        signalfd_siginfo info;
        if (::read(fd_.get(), &info, sizeof info) != sizeof info) return 0;
        return static_cast<int>(info.ssi_signo);
    }

  private:
    sigset_t previous_;
    UniqueFd fd_;
};

/// Reaps exited orphans (we are a child subreaper) without touching the processes whose
/// statuses we still need: WNOWAIT peeks first, and a tracked pid stops the round.
void reap_orphans(pid_t main_pid, pid_t holder_pid) {
    for (;;) {
        siginfo_t info{};
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid == 0) return;
        if (info.si_pid == main_pid || info.si_pid == holder_pid) return;
        waitpid(info.si_pid, nullptr, WNOHANG);
    }
}

int remaining_ms(std::optional<Clock::time_point> deadline) {
    if (!deadline) return -1;
    auto left = std::chrono::duration_cast<Millis>(*deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left + 1);
}

/// Stops a cgroup's processes the graceful way: SIGTERM to all, wait up to `grace`, then
/// cgroup.kill and wait for populated 0. Returns how many processes there were.
size_t stop_gracefully(Cgroup& group, Millis grace) {
    // Most commands leave nothing: one read of cgroup.events says so (listing the pids walks the
    // subtree's directories).
    if (auto populated = group.populated(); populated && !*populated) return 0;
    auto pids = group.pids();
    size_t count = pids ? pids->size() : 0;
    if (count == 0) return 0;
    (void)group.signal_all(SIGTERM);
    if (!group.wait_until_empty(grace)) {
        (void)group.kill_all();
        (void)group.wait_until_empty(std::chrono::seconds(10));
    }
    return count;
}

/// Whether `group`'s cgroup.subtree_control is empty (a v2 cgroup with controllers enabled for
/// its children may hold no process itself).
bool no_controllers_below(const Cgroup& group) {
    auto enabled = read_file(group.dir_fd(), "cgroup.subtree_control");
    return enabled && enabled->find_first_not_of(" \n") == std::string::npos;
}

/// Everything a running one-shot session owns; members are destroyed in reverse order, so the
/// sandbox holder dies before the cgroups are removed.
struct SessionResources {
    Cgroup instance;
    RunWatchdog watchdog;  ///< ends the job if we die first; stopped after the rest has gone
    std::unique_ptr<SessionLimits> limits;
    Cgroup holder_leaf;  ///< `holder` below instance, or instance itself (set_up)
    Sandbox sandbox;
    Cgroup main_leaf;  ///< the command's: `main` below instance, or instance itself (set_up)
};

/// The run's own cgroup, `corral-run-<pid>`. A `corral run` killed before it could remove its
/// cgroup (SIGKILL from a CI runner's timeout) leaves one behind, and the next `corral run` that
/// gets its pid found the name taken and failed (exit 125, EEXIST). That pid is ours now, so its
/// creator is gone: the tree is removed where nothing runs in it (an empty tree, rmdir only);
/// one whose command outlived its killed supervisor is left as it is, and the run takes the
/// first free `corral-run-<pid>-<n>`.
Result<Cgroup> create_run_cgroup(const std::string& parent) {
    const std::string name = "corral-run-" + std::to_string(::getpid());
    auto created = Cgroup::create(parent, name);
    if (created || created.error().code != EEXIST) return created;
    if (Cgroup::remove_empty_tree(parent, name)) {
        auto again = Cgroup::create(parent, name);
        if (again || again.error().code != EEXIST) return again;
    }
    for (int n = 1; n <= 16; ++n) {
        auto other = Cgroup::create(parent, name + "-" + std::to_string(n));
        if (other || other.error().code != EEXIST) return other;
    }
    return created;
}

Result<SessionResources> set_up(const Policy& policy, const WorkdirBinding& workdir,
                                std::vector<std::string>& not_enforced) {
    SessionResources res;
    // From a login shell's scope, corral's cgroups go where controllers may be enabled.
    PlacementOptions placement{false, "corral-run", scope_requester()};
    // Only v1 limits use the v1 hierarchies: without any, their mounts are not confirmed.
    if (!limits_use_controllers(policy.limits)) placement.v1 = V1Hierarchies::skip;
    auto host = discover_placed_cgroup_host(placement);
    if (!host) return std::move(host.error().context("discover cgroups"));
    auto instance = create_run_cgroup(host->v2_own);
    if (!instance) return std::move(instance.error().context("create session cgroup"));
    res.instance = std::move(*instance);
    // Before anything runs in it: from here on the tree dies with us however we die.
    const std::string& path = res.instance.path();
    auto watchdog = RunWatchdog::start(res.instance, host->v2_own,
                                       path.substr(path.find_last_of('/') + 1));
    if (!watchdog) return std::move(watchdog.error().context("start the run's watchdog"));
    res.watchdog = std::move(*watchdog);

    auto backend = make_limit_backend(*host);
    auto limits = backend->apply(res.instance, "run-" + std::to_string(getpid()), policy.limits,
                                 policy.enforcement);
    if (!limits) return std::move(limits.error().context("apply limits"));
    res.limits = std::move(*limits);
    not_enforced = res.limits->not_enforced();
    for (const auto& v1 : res.limits->v1_directories())
        CORRAL_TRY(res.watchdog.also_remove(v1), "start the run's watchdog");

    // Where no controller is enabled below the run's cgroup (the no-internal-process rule would
    // forbid a process in it then), the holder lives in it and only the command gets a leaf of
    // its own: the leaf is what stops the command's processes and leaves the holder. One cgroup
    // fewer to make and remove on every sandboxed launch (issue 18).
    const bool leafless = no_controllers_below(res.instance);
    if (Sandbox::needed(policy)) {
        auto holder_leaf =
            leafless ? res.instance.unowned_view() : res.instance.create_child("holder");
        if (!holder_leaf) return std::move(holder_leaf.error().context("create holder cgroup"));
        res.holder_leaf = std::move(*holder_leaf);
    }
    // Only started: the holder mounts on another CPU while run_one_shot prepares the command.
    auto sandbox = Sandbox::start(policy, res.holder_leaf, workdir);
    if (!sandbox) return std::move(sandbox.error().context("set up sandbox"));
    res.sandbox = std::move(*sandbox);

    // Without a sandbox the command is the session's only occupant: it runs in the session's
    // cgroup itself where no controller is enabled below it, as the holder does with one.
    auto main_leaf = !res.sandbox.active() && leafless ? res.instance.unowned_view()
                                                       : res.instance.create_child("main");
    if (!main_leaf) return std::move(main_leaf.error().context("create command cgroup"));
    res.main_leaf = std::move(*main_leaf);
    return res;
}

/// Who owns the job's tmpfs copy: the host identity the sandbox writes as, so the job can
/// change its own checkout (a root-owned one under `strict`'s nobody included).
/// With a user namespace the copy stays the caller's: the sandbox's bind of it is idmapped to
/// its owner, as for a bound cwd.
CopyOwner copy_in_owner(const Policy& policy) {
    if (::geteuid() != 0 || policy.namespaces.user) return {};
    const SandboxWriter writer = sandbox_writer(policy);
    return {writer.uid, writer.gid};
}

/// Outputs copied back belong to the job directory's owner, as if they had been built there.
/// Asked of the descriptor: by now the job may have swapped the path.
CopyOwner copy_back_owner(const JobDirectory& job) {
    struct stat st {};
    if (::geteuid() != 0 || ::fstat(job.get(), &st) != 0) return {};
    return {st.st_uid, st.st_gid};
}

}  // namespace

RunReport run_one_shot(const Policy& policy, const OneShotRequest& request) {
    const Millis timeout = request.timeout;
    const auto started = Clock::now();
    RunReport report;
    report.policy = policy.name;
    auto finish = [&]() -> RunReport {
        report.duration_ms = static_cast<uint64_t>(
            std::chrono::duration_cast<Millis>(Clock::now() - started).count());
        return report;
    };

    SignalCapture signals;
    // Orphans of the command (double-forked daemons) are reparented to us, not to the host's
    // PID 1, so they stay reaped and countable.
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    const RunWorkdirPlan& workdir = request.workdir;
    WorkdirBinding binding;
    std::optional<CopiedWorkdir> copied;
    if (workdir.from == WorkdirFrom::copy) {
        auto copy = CopiedWorkdir::create(workdir.job.get(), workdir.job_dir, policy.workdir.size,
                                          copy_in_owner(policy));
        if (!copy) {
            report.error = copy.error().context("workdir.from: copy").describe();
            return finish();
        }
        copied.emplace(std::move(*copy));
        binding = WorkdirBinding{copied->mount_point(), policy.workdir.mount};
    } else if (workdir.bind_job_dir) {
        binding = WorkdirBinding{workdir.job_dir, workdir.job_dir};
        binding.host_fd = workdir.job.get();  // cloned from the descriptor, not the path
    }
    auto resources = set_up(policy, binding, report.not_enforced);
    if (!resources) {
        report.error = resources.error().describe();
        return finish();
    }
    SessionResources& res = *resources;
    // A policy's own user in a user namespace is a leased host uid, known only now; the sandbox
    // never idmaps a root-owned directory for it (isolation/sandbox.cpp), so the copy is its.
    if (copied && policy.namespaces.user && !policy.user.inherit && res.sandbox.host_identity()) {
        const HostIdentity identity = *res.sandbox.host_identity();
        if (auto given = copied->give_to({identity.uid, identity.gid}); !given) {
            report.error = given.error().context("workdir.from: copy").describe();
            return finish();
        }
    }
    // With a sandbox of its own mounts, Landlock waits for its root (below).
    const bool landlock_in_sandbox = res.sandbox.active() && policy.namespaces.mount;
    auto confinement = compile_confinement(policy, landlock_in_sandbox);
    if (!confinement) {
        report.error = confinement.error().context("compile policy").describe();
        return finish();
    }

    LaunchSpec spec;
    spec.argv = request.command;
    spec.env = build_environment(policy.env, environ, request.env_set, request.env_unset);
    spec.cwd = workdir.command_cwd;
    spec.cgroup_fd = res.main_leaf.dir_fd();
    spec.v1_join_fds = res.limits->join_fds();
    if (res.sandbox.active()) {
        spec.namespace_holder_pidfd = res.sandbox.holder_pidfd();
        spec.namespace_flags = res.sandbox.namespace_flags();
    }
    spec.stdin_fd = STDIN_FILENO;
    spec.confinement = &*confinement;
    // Refused syscalls are counted by a listener this loop answers (isolation/seccomp_listener).
    std::optional<SeccompRefusals> refusals;
    if (!confinement->seccomp_filter.empty()) {
        refusals.emplace(confinement->seccomp_marked);
        spec.refusals = &*refusals;
    }
    if (auto ready = res.sandbox.wait_until_ready(); !ready) {
        report.error = ready.error().context("set up sandbox").describe();
        return finish();
    }
    if (landlock_in_sandbox && policy.landlock.enabled()) {
        // Its rules hold inodes: the sandbox's own /tmp and workdir, not the host's paths.
        const std::string root_path = "/proc/" + std::to_string(res.sandbox.holder_pid()) + "/root";
        UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        Status rooted = root ? root_landlock(policy, root.get(), *confinement)
                             : Status(sys_error("open the sandbox's root `" + root_path + "`"));
        if (!rooted) {
            report.error = rooted.error().context("compile policy").describe();
            return finish();
        }
    }
    if (!res.sandbox.workdir_warning().empty())
        std::fprintf(stderr, "corral: %s\n", res.sandbox.workdir_warning().c_str());
    // The sandbox holds the copy now; the host keeps nothing of it but our descriptor.
    if (copied) copied->detach();
    auto main = launch(spec);
    if (refusals) report.seccomp = refusals->counts();
    if (!main) {
        report.exit_code = exec_failure_exit_code(main.error());
        report.error = main.error().context("start command").describe();
        return finish();
    }

    EndingContext ending;
    std::optional<Clock::time_point> timeout_at;
    if (timeout.count() > 0) timeout_at = started + timeout;
    std::optional<Clock::time_point> kill_at;  // set once a graceful stop has begun
    std::optional<WaitStatus> status;
    auto begin_stop = [&](int sig) {
        (void)res.main_leaf.signal_all(sig);
        if (!kill_at) kill_at = Clock::now() + policy.timeouts.grace;
    };

    // limits.oom_group where the kernel cannot do it (v1): the first OOM kill ends the session.
    std::vector<pollfd> fds = {{main->pidfd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    if (res.limits->supervisor_must_end_session_on_oom())
        for (int fd : res.limits->event_fds()) fds.push_back({fd, POLLIN, 0});
    // Last, so the limit events keep their places; bounded work per wake-up (a flood of refused
    // calls waits in the kernel, it does not starve the rest of this loop).
    const size_t limit_fds_end = fds.size();
    if (refusals && refusals->attached()) fds.push_back({refusals->fd(), POLLIN, 0});

    // The v1 OOM notification comes when the cgroup hits OOM, just before the kill is counted:
    // after an event with no kill yet, look again a few times shortly after.
    std::optional<Clock::time_point> oom_recheck_at;
    int oom_rechecks_left = 0;

    while (!status) {
        int wait_ms = remaining_ms(kill_at ? kill_at : timeout_at);
        if (oom_recheck_at) {
            int recheck_ms = remaining_ms(oom_recheck_at);
            wait_ms = wait_ms < 0 ? recheck_ms : std::min(wait_ms, recheck_ms);
        }
        if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
        if (fds.size() > limit_fds_end && fds.back().revents != 0) {
            refusals->serve(kRefusalsPerWake);
            if (refusals->hung_up()) fds.back().fd = -1;  // poll skips it from now on
        }
        bool limit_event = false;
        for (size_t i = 2; i < limit_fds_end; ++i) limit_event |= (fds[i].revents & POLLIN) != 0;
        if (limit_event) oom_rechecks_left = 50;
        if (limit_event || (oom_recheck_at && Clock::now() >= *oom_recheck_at)) {
            oom_recheck_at.reset();
            if (res.limits->read_events().oom_kills > 0) {
                ending.oom_event = true;
                (void)res.main_leaf.kill_all();
            } else if (oom_rechecks_left-- > 0) {
                oom_recheck_at = Clock::now() + Millis(20);
            }
        }
        while (int sig = signals.next()) {
            if (sig == SIGCHLD) {
                reap_orphans(main->pid(), res.sandbox.holder_pid());
            } else if (kill_at) {
                (void)res.main_leaf.kill_all();  // a second stop request: no more grace
            } else {
                ending.killed_by_request = true;
                begin_stop(sig);
            }
        }
        if (fds[0].revents & POLLIN) {
            auto waited = main->wait();
            if (waited)
                status = *waited;
            else
                break;
        }
        if (!status && timeout_at && !kill_at && Clock::now() >= *timeout_at) {
            ending.timed_out = true;
            begin_stop(SIGTERM);
        } else if (!status && kill_at && Clock::now() >= *kill_at) {
            (void)res.main_leaf.kill_all();
        }
    }

    // Whatever the command left behind gets SIGTERM, the grace period, then cgroup.kill.
    report.left_behind = stop_gracefully(res.main_leaf, policy.timeouts.grace);
    // Nothing needs the namespaces any more: the holder's teardown runs while we read the rest.
    res.sandbox.begin_stop();
    // The job is gone and the holder told to end: what is left are empty cgroups to remove. The
    // guard dies on the other CPU while we read the rest; the end of the run reaps it.
    res.watchdog.stand_down();
    reap_orphans(0, res.sandbox.holder_pid());
    auto events = res.limits->read_events();
    ending.oom_event = events.oom_kills > 0;
    ending.pids_limit_hit = events.pids_limit_hits > 0;

    if (status) {
        report.status = classify_exit(*status, ending);
        if (status->exited)
            report.exit_code = status->code;
        else
            report.signal = status->code;
    } else {
        report.error = "lost track of the command's process";
    }
    if (request.measure_usage) report.usage = res.limits->usage();
    if (refusals) report.seccomp = refusals->counts();
    // Every process of the job has ended: nothing changes the copy while it is read.
    if (copied && !policy.workdir.outputs.empty())
        report.outputs = copied->copy_back(policy.workdir.outputs, workdir.job.get(),
                                           workdir.job_dir, copy_back_owner(workdir.job));
    res.sandbox.stop();
    reap_orphans(0, 0);
    return finish();
}

}  // namespace corral::cli
