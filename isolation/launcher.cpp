#include "isolation/launcher.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "base/unique_fd.hpp"
#include "isolation/child_report.hpp"
#include "isolation/clone_vm.hpp"
#include "isolation/exit_reason.hpp"
#include "isolation/launcher_internal.hpp"
#include "isolation/namespaces.hpp"
#include "isolation/setup_deadline.hpp"
#include "isolation/setup_watchdog.hpp"

namespace corral {
namespace {

/// How the step of a failed execve starts; exec_failure_exit_code() recognises it.
constexpr std::string_view kExecStep = "execve `";

/// Everything the child needs, built before the clone so the child never allocates.
struct ChildPlan {
    std::vector<std::string> candidates;  ///< argv[0] resolved against each PATH entry
    std::vector<char*> argv;
    std::vector<char*> envp;
    std::string chdir_step;
    std::string exec_step;
    bool hand_over_listener = false;  ///< the report channel is a socket; see launcher.hpp
    /// The descriptors above stdio the child needs until execve, ascending (keep_only_planned).
    std::vector<int> keep;
};

/// What the child keeps of the launching process's table: the spec's descriptors and its own
/// report channel (and the fallback's release pipe), nothing else.
std::vector<int> planned_descriptors(const LaunchSpec& spec, std::initializer_list<int> own) {
    std::vector<int> keep(own);
    for (int fd : {spec.namespace_holder_pidfd, spec.stdin_fd, spec.stdout_fd, spec.stderr_fd,
                   spec.extra_fd, spec.landlock_ruleset_fd})
        keep.push_back(fd);
    for (int fd : spec.v1_join_fds) keep.push_back(fd);
    if (spec.confinement != nullptr) keep.push_back(spec.confinement->landlock_ruleset.get());
    std::erase_if(keep, [](int fd) { return fd <= 2; });
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    return keep;
}

/// Closes every descriptor above stdio the plan does not name, first thing in the child, before
/// it joins anything of the session. The launching process's table is not only the spec's: the
/// launch worker's socket to corrald (whose messages carry pointers into corrald) or the launch
/// zygote's (which starts whatever it is sent, and whose answers corrald trusts) are in it. A
/// child whose credentials change may become dumpable for a moment (commit_creds sets the mm's
/// dumpability from fs.suid_dumpable, 1 on some hosts; stay_non_dumpable sets it back), and a
/// process of the session could take a descriptor from it then (pidfd_getfd): so none of those
/// is there by then. Async-signal-safe.
void keep_only_planned(const std::vector<int>& keep) noexcept {
    unsigned next = 3;
    for (int fd : keep) {
        if (static_cast<unsigned>(fd) > next) ::close_range(next, static_cast<unsigned>(fd) - 1, 0);
        next = static_cast<unsigned>(fd) + 1;
    }
    ::close_range(next, ~0U, 0);
}

std::string_view env_value(const std::vector<std::string>& env, std::string_view key) {
    for (const auto& entry : env) {
        if (entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 &&
            entry[key.size()] == '=')
            return std::string_view(entry).substr(key.size() + 1);
    }
    return {};
}

/// execvpe's search, done in the parent: the list of paths the child tries in order. The PATH
/// comes from the process's own environment, not the daemon's. The file system the child sees
/// (maybe a sandbox root) is only known to the child, so it tries each candidate itself.
std::vector<std::string> exec_candidates(const std::string& file,
                                         const std::vector<std::string>& env) {
    if (file.find('/') != std::string::npos) return {file};
    std::string_view path = env_value(env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= path.size()) {
        size_t end = path.find(':', pos);
        if (end == std::string_view::npos) end = path.size();
        std::string dir(path.substr(pos, end - pos));
        if (dir.empty()) dir = ".";
        out.push_back(dir + "/" + file);
        pos = end + 1;
    }
    return out;
}

std::vector<char*> c_array(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// ---- child side: async-signal-safe only from here to the end of the child functions ----

[[noreturn]] void child_fail(int report_fd, const char* step, int error) noexcept {
    write_failure_report(report_fd, step, error);
    ::_exit(127);
}

/// Moves the three stdio sources into 0, 1, 2. A source that is itself 0..2 and in the wrong
/// place is first copied above 2 so no dup2 overwrites a source still needed.
bool setup_stdio(const LaunchSpec& spec) noexcept {
    int sources[3] = {spec.stdin_fd, spec.stdout_fd, spec.stderr_fd};
    if (sources[0] < 0) {
        // O_NOCTTY: a session leader without a terminal (enter_session) that opens one acquires
        // it, and /dev/null is whatever the session's mount namespace has there.
        sources[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (sources[0] < 0) return false;
    }
    for (int i = 0; i < 3; ++i) {
        if (sources[i] >= 0 && sources[i] < 3 && sources[i] != i) {
            sources[i] = ::fcntl(sources[i], F_DUPFD_CLOEXEC, 3);
            if (sources[i] < 0) return false;
        }
    }
    for (int i = 0; i < 3; ++i) {
        if (sources[i] < 0) {
            ::close(i);
        } else if (sources[i] == i) {
            if (::fcntl(i, F_SETFD, 0) != 0) return false;  // keep it across exec
        } else if (::dup2(sources[i], i) < 0) {
            return false;
        }
    }
    return true;
}

#if defined(__x86_64__)
/// The kernel's struct sigaction on x86_64 (glibc's differs): SIG_DFL needs no restorer.
struct KernelSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
};
#endif

/// Every handler back to the default, then the mask cleared, in the child (born with every signal
/// blocked: launch_begin): no handler of the caller's may run in it, and a daemon's signal mask
/// and ignored signals would otherwise leak into every command (an ignored SIGPIPE or SIGINT
/// survives execve). With raw system calls where a child may share our memory (x86_64,
/// clone_vm.hpp): glibc's sigaction refuses its internal signals 32 and 33 (SIGCANCEL,
/// SIGSETXID), whose handlers in a child sharing our memory would run on corrald's memory (the
/// setxid handler counts down a word another corrald thread waits on) if one arrived between the
/// unblocking and execve. A forked child takes the same way (there they would only run on a copy,
/// and execve resets handled signals anyway). Elsewhere every child is forked, and glibc's
/// sigaction, which leaves 32 and 33 to glibc, serves.
void reset_dispositions() noexcept {
#if defined(__x86_64__)
    KernelSigaction dfl{};
    dfl.handler = SIG_DFL;
    for (int sig = 1; sig <= 64; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof(uint64_t));
    }
#else
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        ::sigaction(sig, &dfl, nullptr);  // fails harmlessly for glibc's reserved signals
    }
#endif
}

/// Set by reset_signal_dispositions_for_good() in a process whose dispositions are all the
/// default and stay so: its children inherit them (a child is a copy made after the call).
bool dispositions_are_default = false;

void reset_signals() noexcept {
    if (!dispositions_are_default) reset_dispositions();
#if defined(__x86_64__)
    const uint64_t none = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof none);
#else
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
#endif
}

/// Every descriptor above stdio becomes close-on-exec: the daemon's sockets and other sessions'
/// pipes must not leak into a sandboxed command, while the report pipe stays usable until exec.
void mark_fds_cloexec(int first) noexcept {
    if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
    long max = ::sysconf(_SC_OPEN_MAX);
    for (int fd = first; fd < max && fd < 65536; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/// Puts spec.extra_fd at fd 3 (kept across exec). The report pipe is moved out of the way first
/// when it happens to be fd 3; stdio is already in place, so nothing else still needed is there.
bool setup_extra_fd(const LaunchSpec& spec, int& report_fd) noexcept {
    if (report_fd == 3) {
        report_fd = ::fcntl(report_fd, F_DUPFD_CLOEXEC, 4);
        if (report_fd < 0) return false;
    }
    if (spec.extra_fd == 3) return ::fcntl(3, F_SETFD, 0) == 0;
    return ::dup2(spec.extra_fd, 3) == 3;
}

[[noreturn]] void exec_child(const LaunchSpec& spec, const ChildPlan& plan, int report_fd,
                             volatile int* reached_execve) noexcept {
    if (!setup_stdio(spec)) child_fail(report_fd, "set up stdio", errno);
    if (spec.extra_fd >= 3 && !setup_extra_fd(spec, report_fd))
        child_fail(report_fd, "set up fd 3", errno);
    // Already a session leader (enter_session), as TIOCSCTTY needs.
    if (spec.controlling_terminal && ::ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(report_fd, "TIOCSCTTY", errno);
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0)
        child_fail(report_fd, plan.chdir_step.c_str(), errno);
    mark_fds_cloexec(spec.extra_fd >= 3 ? 4 : 3);
    if (spec.confinement != nullptr) {
        int listener = -1;
        if (const char* step =
                apply_confinement(*spec.confinement, plan.hand_over_listener ? &listener : nullptr,
                                  spec.landlock_ruleset_fd))
            child_fail(report_fd, step, errno);

        // The first call under the filter; never a marked one (confinement.cpp).
        if (listener >= 0 && !write_listener_report(report_fd, listener))
            child_fail(report_fd, "hand the seccomp listener over", errno);
    }
    // Sharing our memory: tells the parent, once it runs again, that a child gone without a
    // report got this far (exec'd, or died in or after execve like any command may).
    if (reached_execve != nullptr) *reached_execve = 1;
    int error = ENOENT;
    bool saw_eacces = false;
    for (const auto& candidate : plan.candidates) {
        ::execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
        error = errno;
        if (error == EACCES) {
            saw_eacces = true;
        } else if (error != ENOENT && error != ENOTDIR && error != ESTALE && error != ENODEV &&
                   error != ETIMEDOUT) {
            break;  // a real error for an existing file (ENOEXEC, E2BIG, ...): report it
        }
    }
    if (saw_eacces && (error == ENOENT || error == ENOTDIR)) error = EACCES;
    child_fail(report_fd, plan.exec_step.c_str(), error);
}

/// Joins the v1 controller cgroups (the v2 one is already set by clone3 or the parent). The fds
/// are `tasks` files and "0" moves only the calling thread: this child is a fresh clone with one
/// thread, so that is the whole process, and everything it starts after execve inherits it.
bool join_v1_cgroups(const LaunchSpec& spec) noexcept {
    for (int fd : spec.v1_join_fds) {
        ssize_t n;
        do {
            n = ::pwrite(fd, "0", 1, 0);
        } while (n < 0 && errno == EINTR);
        if (n != 1) return false;
    }
    return true;
}

/// The part of a child's way that depends only on its session: joins the v1 cgroups and the
/// session's namespaces, keeping nothing of the launching process's table but `keep`. It was born
/// in the session's pid namespace (the parent entered it for its children, see
/// PidNamespaceForChildren); every other namespace applies to the caller itself. A failure is
/// reported on `report_fd` and ends the child. `reached_execve` non-null: the child shares our
/// memory (CLONE_VM | CLONE_VFORK, launcher.hpp).
void enter_session(const LaunchSpec& spec, const std::vector<int>& keep, int report_fd,
                   int release_fd, volatile int* reached_execve) noexcept {
    // Forked (no `reached_execve`): until execve this is a copy of the caller's memory. corrald
    // and corral are non-dumpable from main() (fork keeps it); repeat it for any other caller of
    // the launcher (issue 10.1). Defence in depth, kept even though redundant for them: one
    // caller that forgets (a test, a future tool) would expose its memory to /proc/N/mem of the
    // sandbox until execve.
    // Sharing our memory, not: dumpability is a flag of the mm, and until execve our mm *is* the
    // caller's, so PR_SET_DUMPABLE 0 would make corrald itself non-dumpable for good (for corrald
    // and corral a no-op, for any other caller a lasting change). Nothing is exposed by leaving
    // it: launch_may_share_memory() admits only a child with the caller's own credentials and
    // namespaces, so whoever may open its /proc/N/mem or /proc/N/exe (CVE-2019-5736) until
    // execve may open the caller's already, and it is the same memory and the same binary;
    // execve then gives the child a fresh mm, whose dumpability the kernel sets from the new
    // program (setuid, unreadable) as for any exec.
    if (reached_execve == nullptr) ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // A session and process group of its own from its first step, not only from its execve: until
    // then it is in its parent's (corrald's, the zygote's, corral's), where a terminal's ^C, ^Z
    // and hang-up reach it, and where, stopped (a waiting child can wait for long), it makes
    // corrald's group one with a stopped member, which the kernel hangs up with SIGHUP, corrald
    // included, when the group is orphaned (corrald started from a shell that then exits).
    if (spec.new_session && ::setsid() < 0) child_fail(report_fd, "setsid", errno);
    keep_only_planned(keep);
    reset_signals();
    if (release_fd >= 0) {  // fallback path: wait until the parent moved us into the cgroup
        char go;
        ssize_t n;
        do {
            n = ::read(release_fd, &go, 1);
        } while (n < 0 && errno == EINTR);
        if (n != 1) ::_exit(127);
    }
    if (!join_v1_cgroups(spec)) child_fail(report_fd, "join v1 cgroups", errno);
    int flags = spec.namespace_flags & ~CLONE_NEWPID;
    if (spec.namespace_holder_pidfd >= 0 && flags != 0) {
        // Host root before the setns: its namespace's maps were written by root (namespaces.hpp).
        const bool host_root = ::geteuid() == 0;
        if (::setns(spec.namespace_holder_pidfd, flags) != 0)
            child_fail(report_fd, "setns into the session's namespaces", errno);
        if ((flags & CLONE_NEWUSER) && !become_namespace_root(host_root))
            child_fail(report_fd, "become root of the user namespace", errno);
        // A credential change: dumpable again where fs.suid_dumpable is 1 (confinement.hpp).
        if ((flags & CLONE_NEWUSER) && !stay_non_dumpable())
            child_fail(report_fd, "stay non-dumpable", EPERM);
    }
}

/// The child: enters its session, then becomes the command.
[[noreturn]] void child_main(const LaunchSpec& spec, const ChildPlan& plan, int report_fd,
                             int release_fd, volatile int* reached_execve) noexcept {
    enter_session(spec, plan.keep, report_fd, release_fd, reached_execve);
    exec_child(spec, plan, report_fd, reached_execve);
}

/// What a child sharing our memory gets (clone3_on_stack's argument). It lives in the suspended
/// launching thread's frame; `reached_execve` is the only word of it the child writes, and the
/// parent reads it only once the child has exec'd or exited.
struct SharedMemoryChild {
    const LaunchSpec* spec = nullptr;
    const ChildPlan* plan = nullptr;
    int report_fd = -1;
    volatile int reached_execve = 0;
};

int shared_memory_child(void* arg) noexcept {
    auto* child = static_cast<SharedMemoryChild*>(arg);
    child_main(*child->spec, *child->plan, child->report_fd, -1, &child->reached_execve);
}

// ---- parent side ----

Result<UniqueFd> pidfd_open(pid_t pid) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return sys_error("pidfd_open pid " + std::to_string(pid));
    return UniqueFd(fd);
}

/// A SOCK_SEQPACKET pair in the shape of a pipe: one message per report, and descriptors pass.
Result<Pipe> make_report_socket() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        return sys_error("socketpair for the child's report");
    return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

/// Whether the child hands its seccomp listener over before execve (launcher.hpp).
bool hands_over_listener(const LaunchSpec& spec) {
    return spec.refusals != nullptr && spec.confinement != nullptr &&
           !spec.confinement->seccomp_notifying_filter.empty();
}

/// Everything the child needs but its descriptors (ChildPlan::keep, which depend on the caller's
/// own channels). spec.argv must not be empty.
ChildPlan plan_child(const LaunchSpec& spec) {
    ChildPlan plan;
    plan.candidates = exec_candidates(spec.argv[0], spec.env);
    plan.argv = c_array(spec.argv);
    plan.envp = c_array(spec.env);
    plan.chdir_step = "chdir `" + spec.cwd + "`";
    plan.exec_step = std::string(kExecStep) + spec.argv[0] + "`";
    plan.hand_over_listener = hands_over_listener(spec);
    return plan;
}

/// Reaps a child that failed setup (it has exited or is about to).
void reap(const PidRef& child) {
    (void)child.wait();
}

Error failure_error(const ChildReport& report) {
    return sys_error(report.error, report.step);
}

/// For its lifetime, the calling thread's children are born in the pid namespace of a session's
/// holder; then back in our own. setns(CLONE_NEWPID) changes only the namespace of the caller's
/// future children, and only for this thread, so the command can be our own child (we wait for
/// it) without an intermediate process. Returning must not fail: a holder cloned later would
/// nest a new session's pid namespace inside this one, where that session could see it.
class PidNamespaceForChildren {
  public:
    static Result<PidNamespaceForChildren> enter(int holder_pidfd) {
        // Opened for each launch, not kept per thread: a process forked from a launching thread
        // (the launch zygote) would keep the number of a descriptor it does not have.
        UniqueFd own(::open("/proc/thread-self/ns/pid", O_RDONLY | O_CLOEXEC));
        if (!own) return sys_error("open our pid namespace");
        if (::setns(holder_pidfd, CLONE_NEWPID) != 0)
            return sys_error("setns into the session's pid namespace");
        PidNamespaceForChildren entered;
        entered.own_ = std::move(own);
        return entered;
    }
    PidNamespaceForChildren(PidNamespaceForChildren&& other) noexcept = default;
    PidNamespaceForChildren& operator=(PidNamespaceForChildren&&) = delete;
    ~PidNamespaceForChildren() {
        if (!own_) return;
        if (::setns(own_.get(), CLONE_NEWPID) != 0) {
            std::fprintf(stderr, "corral: cannot return to our own pid namespace (%s); aborting\n",
                         std::strerror(errno));
            std::abort();
        }
    }

  private:
    PidNamespaceForChildren() = default;
    UniqueFd own_;  ///< the thread's own pid namespace
};

/// For its lifetime, the calling thread's children are born as a launch's must be: in the
/// session holder's pid namespace when the spec has one, and with every signal blocked. Why the
/// signals: until it resets them, the child has our signal handlers in its copy of our memory: a
/// signal it got before then (a same-session process may signal it once it is in the session's
/// user namespace, and stop it there for as long as it likes) would run corrald's handler in the
/// child, which writes to asio's signal pipe, shared with us: a SIGTERM sent to the child would
/// stop corrald. So it is born with every signal blocked (as glibc's posix_spawn does) and clears
/// the mask only after setting every handler to the default. At the end: our mask, then our
/// own pid namespace, back.
class ChildBirth {
  public:
    static Result<ChildBirth> begin(const LaunchSpec& spec) {
        ChildBirth birth;
        if (spec.namespace_holder_pidfd >= 0 && (spec.namespace_flags & CLONE_NEWPID)) {
            auto entered = PidNamespaceForChildren::enter(spec.namespace_holder_pidfd);
            if (!entered) return std::move(entered.error());
            birth.pid_namespace_.emplace(std::move(*entered));
        }
        sigset_t all;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &birth.ours_);
        birth.blocked_ = true;
        return birth;
    }
    ChildBirth(ChildBirth&& other) noexcept
        : ours_(other.ours_), blocked_(std::exchange(other.blocked_, false)) {
        // Moved only when there is one (GCC 12 took a moved optional's empty payload for an
        // uninitialized descriptor: -Wmaybe-uninitialized), and the other's emptied at once:
        // exactly one of the two returns to our pid namespace.
        if (other.pid_namespace_.has_value()) {
            pid_namespace_.emplace(std::move(*other.pid_namespace_));
            other.pid_namespace_.reset();
        }
    }
    ChildBirth& operator=(ChildBirth&&) = delete;
    ~ChildBirth() {
        if (blocked_) ::pthread_sigmask(SIG_SETMASK, &ours_, nullptr);
    }

  private:
    ChildBirth() = default;
    std::optional<PidNamespaceForChildren> pid_namespace_;
    sigset_t ours_{};
    bool blocked_ = false;
};

/// Starts the child. With clone3 it is born in the cgroup; the fallback (kernels without
/// CLONE_INTO_CGROUP) holds it on a pipe until the parent has written it into cgroup.procs.
Result<PidRef> start_child(const LaunchSpec& spec, ChildPlan& plan, int report_fd) {
    int pidfd = -1;
    const uint64_t parent = spec.clone_parent ? CLONE_PARENT : 0;
    pid_t pid = clone3_fork(CLONE_PIDFD | parent, spec.cgroup_fd, &pidfd);
    if (pid == 0) child_main(spec, plan, report_fd, -1, nullptr);
    if (pid > 0) return PidRef(pid, UniqueFd(pidfd));
    if ((errno != ENOSYS && errno != E2BIG && errno != EINVAL) || spec.clone_parent)
        return sys_error(spec.clone_parent ? "clone3 into cgroup, as our parent's child"
                                           : "clone3 into cgroup");

    auto release = make_pipe();
    if (!release) return std::move(release.error());
    plan.keep = planned_descriptors(spec, {report_fd, release->read_end.get()});
    pid = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (pid < 0) return sys_error("clone");
    if (pid == 0) child_main(spec, plan, report_fd, release->read_end.get(), nullptr);
    release->read_end.reset();
    auto fd = pidfd_open(pid);
    PidRef child(pid, fd ? std::move(*fd) : UniqueFd());
    auto attached = write_file(spec.cgroup_fd, "cgroup.procs", std::to_string(pid));
    if (!attached) {
        (void)child.send_signal(SIGKILL);
        reap(child);
        return std::move(attached.error().context("move the new process into its cgroup"));
    }
    if (::write(release->write_end.get(), "1", 1) != 1) {
        (void)child.send_signal(SIGKILL);
        reap(child);
        return sys_error("release the new process");
    }
    return child;
}

/// Whether the cgroup is frozen (cgroup.events): a child born there would not run until thawed,
/// and one sharing our memory would hold us until then. corrald freezes a session's cgroup only
/// in its freeze-and-kill fallback (no cgroup.kill), never for long; the watchdog covers a
/// freeze that comes after this look.
bool cgroup_frozen(int cgroup_fd) {
    auto events = read_file(cgroup_fd, "cgroup.events");
    return events && events->find("frozen 1") != std::string::npos;
}

/// Starts the child sharing our memory (launcher.hpp: only where launch_may_share_memory()). The
/// calling thread is suspended until the child has exec'd or exited. nullopt: this kernel cannot
/// (no clone3 or CLONE_INTO_CGROUP), fork instead.
std::optional<Result<PidRef>> start_child_sharing_memory(const LaunchSpec& spec,
                                                         const ChildPlan& plan,
                                                         const Pipe& channel) {
    auto stack = thread_child_stack();
    if (!stack) return Result<PidRef>(std::move(stack.error()));
    SharedMemoryChild child;
    child.spec = &spec;
    child.plan = &plan;
    child.report_fd = channel.write_end.get();
    // The kernel writes the pid and pidfd here before the child runs: the watchdog, which
    // applies spec.setup_limit while we are suspended, reads them from another thread.
    WatchedLaunch watched;
    clone_args args{};
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_PARENT_SETTID | CLONE_INTO_CGROUP;
    args.pidfd = reinterpret_cast<uintptr_t>(&watched.pidfd);
    args.parent_tid = reinterpret_cast<uintptr_t>(&watched.pid);
    args.cgroup = static_cast<uint64_t>(spec.cgroup_fd);
    args.exit_signal = SIGCHLD;
    args.stack = reinterpret_cast<uintptr_t>(stack->base);
    args.stack_size = stack->size;
    if (spec.setup_limit) {
        watched.limit = *spec.setup_limit;
        arm_setup_watchdog(watched);
    }
    // Every signal blocked across the clone (clone3_on_stack does it), as for a fork.
    const pid_t pid = clone3_on_stack(args, shared_memory_child, &child);
    const int clone_errno = errno;
    std::optional<SetupDeadline> expired;
    if (spec.setup_limit) expired = disarm_setup_watchdog(watched);
    if (pid < 0) {
        if (clone_errno == ENOSYS || clone_errno == E2BIG || clone_errno == EINVAL)
            return std::nullopt;
        return Result<PidRef>(sys_error(clone_errno, "clone3 into cgroup, sharing memory"));
    }
    PidRef started(pid, UniqueFd(watched.pidfd));
    if (expired) {  // killed by the watchdog before execve: as launch() after its limit
        reap(started);
        return Result<PidRef>(launch_deadline_error(*expired));
    }
    if (child.reached_execve != 0) return Result<PidRef>(std::move(started));
    // Gone before execve. With a report (a setup step failed), the caller reads it as usual;
    // without one it was killed (SIGKILL from another thread or a same-credentials process):
    // it never ran the command, so that is the launch's failure, not the command's.
    pollfd report{channel.read_end.get(), POLLIN, 0};
    if (::poll(&report, 1, 0) == 1 && (report.revents & POLLIN))
        return Result<PidRef>(std::move(started));
    auto status = started.wait();
    std::string how = "exited";
    if (status && !status->exited)
        how = "killed by signal " + std::to_string(status->code);
    else if (status)
        how = "exited with " + std::to_string(status->code);
    return Result<PidRef>(
        sys_error(ECANCELED, "the process " + how + " before execve, without a report"));
}

}  // namespace

bool launch_may_share_memory(const LaunchSpec& spec, int suid_dumpable) {
    if (!spec.may_share_memory || spec.clone_parent) return false;
    // corrald's pid and user namespace: no namespace to join (child_main joins the holder's
    // namespace_flags; a holder without any, a `none` session's output keeper, is joined to
    // nothing, and the pid namespace of our children is ours).
    if (spec.namespace_flags != 0) return false;
    if (hands_over_listener(spec)) return false;
    // corrald's credentials: no uid/gid change, no capability dropped.
    if (spec.confinement != nullptr &&
        (spec.confinement->change_ids || spec.confinement->drop_capabilities))
        return false;
    // 0 (never dumpable after a credential change) and 2 (only root may dump) keep a shared mm
    // as closed as corrald's; 1, or a value we could not read, would not.
    return suid_dumpable == 0 || suid_dumpable == 2;
}

bool launch_may_share_memory(const LaunchSpec& spec) {
    static const int suid_dumpable = [] {
        auto text = read_file("/proc/sys/fs/suid_dumpable");
        if (!text || text->empty() || (*text)[0] < '0' || (*text)[0] > '2') return -1;
        return (*text)[0] - '0';
    }();
    return launch_may_share_memory(spec, suid_dumpable);
}

void reset_signal_dispositions_for_good() noexcept {
    reset_dispositions();
    dispositions_are_default = true;
}

Result<PendingLaunch> launch_begin(const LaunchSpec& spec) {
    if (spec.argv.empty() || spec.argv[0].empty()) return plain_error("launch: empty argv");
    if (spec.cgroup_fd < 0) return plain_error("launch: no cgroup given");
    ChildPlan plan = plan_child(spec);

    auto pipe = launcher_internal::make_report_channel(plan.hand_over_listener);
    if (!pipe) return std::move(pipe.error());
    plan.keep = planned_descriptors(spec, {pipe->write_end.get()});
    if (clone_on_stack_available() && launch_may_share_memory(spec) &&
        (!spec.setup_limit || start_setup_watchdog()) && !cgroup_frozen(spec.cgroup_fd)) {
        if (auto shared = start_child_sharing_memory(spec, plan, *pipe)) {
            pipe->write_end.reset();  // EOF: it has exec'd or exited
            if (!*shared) return std::move(shared->error());
            PendingLaunch pending;
            pending.child = std::move(**shared);
            pending.report = std::move(pipe->read_end);
            // We resumed because it exec'd or exited, and a child that exits before execve
            // writes its report first: no report is an exec (its copy of the write end may close
            // a moment later, at the exec's close-on-exec; nothing writes to it).
            pollfd report{pending.report.get(), POLLIN, 0};
            pending.exec_reached = ::poll(&report, 1, 0) == 0 || !(report.revents & POLLIN);
            return pending;
        }
    }
    auto started = [&]() -> Result<PidRef> {
        auto birth = ChildBirth::begin(spec);
        if (!birth) return std::move(birth.error());
        return start_child(spec, plan, pipe->write_end.get());
    }();
    pipe->write_end.reset();  // EOF once the child has exec'd or exited
    if (!started) return std::move(started.error());
    PendingLaunch pending;
    pending.child = std::move(*started);
    pending.report = std::move(pipe->read_end);
    pending.listener_expected = plan.hand_over_listener;
    return pending;
}

Result<bool> read_launch_report(PendingLaunch& pending, SeccompRefusals* refusals) {
    if (!pending.listener_expected) {
        auto report = read_report(pending.report.get());
        if (!report) return std::move(report.error());
        if (*report) return failure_error(**report);
        return true;
    }
    UniqueFd received;
    auto report = read_report_with_fd(pending.report.get(), received);
    if (!report) return std::move(report.error());
    if (!*report) return true;
    if ((*report)->kind != ChildReport::listener) return failure_error(**report);
    if (!received) return plain_error("the seccomp listener report came without it");
    // One listener per launch: a later report is a failure or the end.
    pending.listener_expected = false;
    if (refusals != nullptr) refusals->attach(std::move(received));
    return false;
}

namespace {

/// The blocking wait of launch(): reads the child's reports until it has exec'd (end of file) or
/// failed. With refusals counted, the listener report comes first; from then on the calls the
/// child refuses before execve (a policy may refuse execve or write itself) are answered here,
/// or it would wait forever.
Status await_exec(PendingLaunch& pending, SeccompRefusals* refusals, SetupDeadline& deadline) {
    for (;;) {
        pollfd fds[2] = {{pending.report.get(), POLLIN, 0},
                         {refusals ? refusals->fd() : -1, POLLIN, 0}};
        const nfds_t count =
            refusals != nullptr && refusals->attached() && !refusals->hung_up() ? 2 : 1;
        const int ready = ::poll(fds, count, deadline.poll_timeout());
        if (ready < 0) {
            if (errno == EINTR) continue;
            return sys_error("poll the child's report");
        }
        if (ready == 0) {
            if (!deadline.expired()) continue;  // slow but running: another limit
            return launch_deadline_error(deadline);
        }
        if (count == 2 && fds[1].revents != 0) refusals->serve(64);
        if (fds[0].revents == 0) continue;
        auto executed = read_launch_report(pending, refusals);
        if (!executed) return std::move(executed.error());
        if (*executed) return {};
    }
}

}  // namespace

Error launch_deadline_error(const SetupDeadline& deadline) {
    // Issue 12 item 1: a child stopped (SIGSTOP) or frozen before execve never reports; corrald
    // must not wait for it for ever. The caller kills it.
    return sys_error(ETIMEDOUT, "the process did not reach execve " + deadline.describe() +
                                    " (stopped or frozen before it?); it was killed");
}

Result<PidRef> launch(const LaunchSpec& spec) {
    auto pending = launch_begin(spec);
    if (!pending) return std::move(pending.error());
    if (pending->exec_reached) return std::move(pending->child);
    SetupDeadline deadline;
    if (spec.setup_limit) deadline = SetupDeadline(*spec.setup_limit, pending->child.pid());
    const bool counting = pending->listener_expected;
    if (Status done = await_exec(*pending, counting ? spec.refusals : nullptr, deadline); !done) {
        (void)pending->child.send_signal(SIGKILL);
        reap(pending->child);
        return std::move(done.error());
    }
    return std::move(pending->child);
}

std::optional<int> exec_failure_exit_code(const Error& launch_error) {
    if (!launch_error.message.starts_with(kExecStep)) return std::nullopt;
    return shell_exec_failure_code(launch_error.code);
}

bool clone_into_cgroup_supported() {
    // An fd number that cannot be open: a kernel that knows CLONE_INTO_CGROUP fails with EBADF
    // before creating anything; an older one with ENOSYS, E2BIG or EINVAL.
    static const bool supported = [] {
        int pidfd = -1;
        pid_t pid = clone3_fork(0, INT_MAX, &pidfd);
        if (pid == 0) ::_exit(0);
        if (pid > 0) {
            ::waitpid(pid, nullptr, 0);
            return true;
        }
        return errno == EBADF;
    }();
    return supported;
}

namespace launcher_internal {

Result<PidRef> start_session_child(const LaunchSpec& spec, int own_fd, AfterEntering then) {
    if (spec.cgroup_fd < 0) return plain_error("launch ahead: no cgroup given");
    const std::vector<int> keep = planned_descriptors(spec, {own_fd});
    int pidfd = -1;
    pid_t pid = -1;
    int clone_errno = 0;
    {
        auto birth = ChildBirth::begin(spec);  // as every launch's child (launch_begin)
        if (!birth) return std::move(birth.error());
        const uint64_t parent = spec.clone_parent ? CLONE_PARENT : 0;
        pid = clone3_fork(CLONE_PIDFD | parent, spec.cgroup_fd, &pidfd);
        if (pid == 0) {
            enter_session(spec, keep, own_fd, -1, nullptr);
            then(spec, own_fd);
        }
        clone_errno = errno;
    }
    if (pid < 0) return sys_error(clone_errno, "clone3 into cgroup (a launch ahead)");
    return PidRef(pid, UniqueFd(pidfd));
}

[[noreturn]] void become_command(const LaunchSpec& spec, int report_fd) noexcept {
    if (spec.argv.empty() || spec.argv[0].empty())
        child_fail(report_fd, "launch: empty argv", EINVAL);
    ChildPlan plan = plan_child(spec);
    plan.keep = planned_descriptors(spec, {report_fd});
    keep_only_planned(plan.keep);
    exec_child(spec, plan, report_fd, nullptr);
}

bool hands_over_listener(const LaunchSpec& spec) {
    return corral::hands_over_listener(spec);
}

Result<Pipe> make_report_channel(bool hands_over_listener) {
    return hands_over_listener ? make_report_socket() : make_pipe();
}

}  // namespace launcher_internal

}  // namespace corral
