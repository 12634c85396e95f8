#include "isolation/sandbox.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/pipe.hpp"
#include "base/unique_fd.hpp"
#include "isolation/child_report.hpp"
#include "isolation/mounts.hpp"
#include "isolation/namespaces.hpp"

namespace corral {
namespace {

/// What the holder needs after clone, all computed beforehand.
struct HolderPlan {
    int flags = 0;
    PreparedMounts mounts;
    std::string hostname;
    int report_fd = -1;
    int go_fd = -1;  ///< user namespace: wait until the parent wrote the id maps
};

[[noreturn]] void holder_fail(const HolderPlan& plan, const char* step, int error) noexcept {
    write_failure_report(plan.report_fd, step, error);
    ::_exit(127);
}

/// Drops every inherited descriptor (the daemon's sockets, other sessions' pipes) and points
/// stdio at /dev/null: the holder lives as long as the session and must not keep them open.
void release_descriptors() noexcept {
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        for (int i = 0; i < 3; ++i) ::dup2(null, i);
    }
    ::close_range(3, ~0U, 0);
}

/// The holder's life after setup. As PID 1 of a pid namespace it reaps every orphan of the
/// session; it ends only by SIGKILL (Sandbox::stop) or cgroup.kill. All signals stay blocked:
/// a session-wide SIGTERM must not take the namespaces away from the processes still running.
[[noreturn]] void hold_forever(bool pid_namespace) noexcept {
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    for (;;) {
        siginfo_t info;
        ::sigwaitinfo(pid_namespace ? &child : &all, &info);
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
    }
}

[[noreturn]] void holder_main(const HolderPlan& plan) noexcept {
    if (plan.go_fd >= 0) {
        char go;
        ssize_t n;
        do {
            n = ::read(plan.go_fd, &go, 1);
        } while (n < 0 && errno == EINTR);
        if (n != 1) ::_exit(127);  // the parent gave up
        if (!become_namespace_root()) holder_fail(plan, "become root of the user namespace", errno);
    }
    ::umask(022);
    if (plan.flags & CLONE_NEWNS) {
        if (const char* step = execute_mounts(plan.mounts)) holder_fail(plan, step, errno);
    }
    if ((plan.flags & CLONE_NEWUTS) && !set_hostname(plan.hostname.data(), plan.hostname.size()))
        holder_fail(plan, "sethostname", errno);
    if ((plan.flags & CLONE_NEWNET) && !bring_loopback_up())
        holder_fail(plan, "bring up lo", errno);
    write_report(plan.report_fd, ChildReport::ready, ::getpid());
    release_descriptors();
    hold_forever(plan.flags & CLONE_NEWPID);
}

Result<HolderPlan> plan_holder(const Policy& policy, const WorkdirBinding& workdir, int flags) {
    HolderPlan plan;
    plan.flags = flags;
    plan.hostname = policy.filesystem.hostname;
    if (flags & CLONE_NEWNS) {
        auto steps = compile_mount_plan(policy, workdir);
        if (!steps) return std::move(steps.error().context("mount plan"));
        auto prepared = prepare_mounts(*steps);
        if (!prepared) return std::move(prepared.error().context("mount plan"));
        plan.mounts = std::move(*prepared);
    }
    return plan;
}

/// Kills and reaps a holder that did not come up.
void discard(PidRef& holder) {
    (void)holder.send_signal(SIGKILL);
    (void)holder.wait();
}

}  // namespace

Sandbox::Sandbox(Sandbox&& other) noexcept
    : holder_(std::exchange(other.holder_, PidRef{})),
      flags_(std::exchange(other.flags_, 0)),
      pending_report_(std::move(other.pending_report_)) {}

Sandbox& Sandbox::operator=(Sandbox&& other) noexcept {
    if (this != &other) {
        stop();
        holder_ = std::exchange(other.holder_, PidRef{});
        flags_ = std::exchange(other.flags_, 0);
        pending_report_ = std::move(other.pending_report_);
    }
    return *this;
}

Sandbox::~Sandbox() {
    stop();
}

void Sandbox::begin_stop() {
    if (holder_.valid()) (void)holder_.send_signal(SIGKILL);
}

void Sandbox::stop() {
    if (!holder_.valid()) return;
    (void)holder_.send_signal(SIGKILL);
    (void)holder_.wait();
    holder_ = PidRef{};
}

bool Sandbox::needed(const Policy& policy) {
    return namespace_clone_flags(policy.namespaces) != 0;
}

Result<Sandbox> Sandbox::create(const Policy& policy, const Cgroup& holder_cgroup,
                                const WorkdirBinding& workdir) {
    auto sandbox = start(policy, holder_cgroup, workdir);
    if (!sandbox) return sandbox;
    CORRAL_TRY(sandbox->wait_until_ready(), "");
    return sandbox;
}

Result<Sandbox> Sandbox::start(const Policy& policy, const Cgroup& holder_cgroup,
                               const WorkdirBinding& workdir) {
    int flags = namespace_clone_flags(policy.namespaces);
    if (flags == 0) return Sandbox{};
    if (!holder_cgroup.valid()) return plain_error("namespace holder: no cgroup given");
    auto plan = plan_holder(policy, workdir, flags);
    if (!plan) return std::move(plan.error());

    auto report = make_pipe();
    if (!report) return std::move(report.error());
    Pipe go;
    if (flags & CLONE_NEWUSER) {
        auto made = make_pipe();
        if (!made) return std::move(made.error());
        go = std::move(*made);
    }
    plan->report_fd = report->write_end.get();
    plan->go_fd = go.read_end.get();

    int pidfd = -1;
    pid_t pid =
        clone3_fork(static_cast<uint64_t>(flags) | CLONE_PIDFD, holder_cgroup.dir_fd(), &pidfd);
    if (pid < 0) return sys_error("clone3 namespace holder");
    if (pid == 0) holder_main(*plan);
    PidRef holder(pid, UniqueFd(pidfd));
    report->write_end.reset();
    go.read_end.reset();

    if (flags & CLONE_NEWUSER) {
        uid_t uid = policy.user.inherit ? ::geteuid() : policy.user.uid;
        gid_t gid = policy.user.inherit ? ::getegid() : policy.user.gid;
        auto mapped = write_id_maps(pid, uid, gid);
        if (!mapped || ::write(go.write_end.get(), "1", 1) != 1) {
            discard(holder);
            if (!mapped) return std::move(mapped.error().context("namespace holder"));
            return sys_error("namespace holder: release");
        }
    }
    Sandbox sandbox;
    sandbox.holder_ = std::move(holder);
    sandbox.flags_ = flags;
    sandbox.pending_report_ = std::move(report->read_end);
    return sandbox;
}

Status Sandbox::wait_until_ready() {
    if (!pending_report_) return {};
    auto message = read_report(pending_report_.get());
    pending_report_.reset();
    if (!message || !*message || (*message)->kind != ChildReport::ready) {
        discard(holder_);
        holder_ = PidRef{};
        if (!message) return std::move(message.error().context("namespace holder"));
        if (!*message) return plain_error("namespace holder died during setup");
        return sys_error((*message)->error, (*message)->step);
    }
    return {};
}

}  // namespace corral
