#include "isolation/sandbox.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>

#include "base/mount_setattr.hpp"
#include "base/pipe.hpp"
#include "base/unique_fd.hpp"
#include "isolation/child_report.hpp"
#include "isolation/confinement.hpp"
#include "isolation/holder_plan.hpp"
#include "isolation/launch_worker.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/mounts.hpp"
#include "isolation/namespaces.hpp"
#include "isolation/setup_deadline.hpp"

namespace corral {
namespace {

/// How long a restart waits for a holder to serve what the previous run queued in its store.
constexpr std::chrono::milliseconds kStoreTakeOverBound{2000};

[[noreturn]] void holder_fail(const HolderPlan& plan, const char* step, int error,
                             ChildReport::Kind kind = ChildReport::failure) noexcept {
    write_failure_report(plan.report_fd, step, error, kind);
    ::_exit(127);
}

/// Drops every inherited descriptor (the daemon's sockets, other sessions' pipes) and points
/// stdio at /dev/null: the holder lives as long as the session and must not keep them open. What
/// stays: the uid range's lock as fd 3 (while the holder lives, its namespaces do, and no other
/// session may be given the same host ids: id_range.hpp), and the descriptor store's two ends at
/// kStoreHolderFd and kStoreDaemonFd (descriptor_store.hpp).
void release_descriptors(const HolderPlan& plan) noexcept {
    const int kept[3] = {plan.lease_fd, plan.store_holder_fd, plan.store_daemon_fd};
    const int fixed[3] = {3, kStoreHolderFd, kStoreDaemonFd};
    static_assert(kStoreHolderFd == 4 && kStoreDaemonFd == 5 && kFirstStoreSlot > 5);
    // Out of the way first: with a closed stdin a kept one may itself be fd 0..5.
    int moved[3];
    for (int i = 0; i < 3; ++i) moved[i] = kept[i] >= 0 ? ::fcntl(kept[i], F_DUPFD, 64) : -1;
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);  // a session leader's open
    if (null >= 0) {
        for (int i = 0; i < 3; ++i) ::dup2(null, i);
    }
    for (int i = 0; i < 3; ++i) {
        if (moved[i] < 0 || ::dup2(moved[i], fixed[i]) != fixed[i]) ::close(fixed[i]);
    }
    ::close_range(kStoreDaemonFd + 1, ~0U, 0);
}

// A credential change (setresuid & co.) makes the kernel reset the dumpable flag to
// fs.suid_dumpable, which is 1 on some hosts: a dumpable holder could be ptraced, and its
// /proc/1/fd and pidfd_getfd opened, by any process of the session with CAP_SYS_PTRACE in its
// user namespace — every held pipe and the store's channel with them. So stay_non_dumpable()
// (confinement.hpp) runs after every credential change, and before the holder says it is ready
// and before it serves the store.

/// Reaps every exited child (PID 1 of a pid namespace inherits the session's orphans).
void reap_children() noexcept {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
}

/// The holder's life after setup. As PID 1 of a pid namespace it reaps every orphan of the
/// session; it ends only by SIGKILL (Sandbox::stop) or cgroup.kill. All signals stay blocked:
/// a session-wide SIGTERM must not take the namespaces away from the processes still running.
/// With a descriptor store it also serves the store's requests; SIGCHLD then comes through a
/// signalfd, so one poll() waits for both.
[[noreturn]] void hold_forever(bool pid_namespace, bool store) noexcept {
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    const int children =
        store && pid_namespace ? ::signalfd(-1, &child, SFD_NONBLOCK | SFD_CLOEXEC) : -1;
    // Without a signalfd (EMFILE) the store is not served: its slots stay empty, and a restart
    // adopts the session's processes without their output (take() answers EBADF). Its channel is
    // closed then, so the daemon's holds fail at once instead of queueing pipes nobody takes.
    if (store && pid_namespace && children < 0) {
        ::close(kStoreHolderFd);
        ::close(kStoreDaemonFd);
    }
    if (store && (!pid_namespace || children >= 0)) {
        for (;;) {
            reap_children();
            pollfd ready[2] = {{kStoreHolderFd, POLLIN, 0}, {children, POLLIN, 0}};
            if (::poll(ready, children >= 0 ? 2 : 1, -1) < 0) continue;
            if (ready[1].revents != 0) {
                signalfd_siginfo info;
                while (::read(children, &info, sizeof info) > 0) {
                }
            }
            // No channel after all, or one hung up for good (the copy of the daemon's end could
            // not be kept and the daemon is gone): hold on without, rather than spin on POLLHUP.
            if (ready[0].revents & (POLLNVAL | POLLERR)) break;
            if ((ready[0].revents & POLLHUP) && !(ready[0].revents & POLLIN)) break;
            if (ready[0].revents != 0) serve_store_requests();
        }
    }
    for (;;) {
        siginfo_t info;
        ::sigwaitinfo(pid_namespace ? &child : &all, &info);
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
    }
}

/// The holder is a copy of corrald, and its copy of corrald's brk heap (~25 MB beside 800
/// sessions: every session's records and tokens) stayed shared with corrald page by page for the
/// session's life: each page corrald wrote afterwards was copied (copy-on-write, up to a thousand
/// holders sharing it), and the kernel's reverse maps of those pages grew with every session
/// (issue 18). Once set up the holder needs none of it: hold_forever() and the store's service
/// use the stack and system calls only, and a holder cloned on the launch worker runs on that
/// thread's stack copy, its thread-local storage there too. Defense in depth as well: no holder
/// keeps a copy of other sessions' secrets (it is non-dumpable, so none could be read anyway).
/// A holder cloned in the launch zygote is a copy of the zygote, whose small heap holds its own
/// plan (the zygote's main thread: launch_zygote.cpp, droppable_heap); dropping it costs little
/// and leaves nothing shared with the zygote.
void drop_heap_copy(uintptr_t start) noexcept {
    if (start == 0) return;
    const auto end = reinterpret_cast<uintptr_t>(::sbrk(0));
    if (end > start) (void)::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

}  // namespace

[[noreturn]] void holder_main(const HolderPlan& plan) noexcept {
    // The holder never execs: it stays a copy of the caller's memory for the session's life, as
    // its PID 1. Non-dumpable (inherited from corrald/corral; repeated for other callers), so no
    // process of the session can read or write it through /proc/1/mem (issue 10.1).
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // A session of its own, out of its caller's (corrald's or corral's, a terminal's): a
    // terminal's ^C, ^Z and hang-up are not the session's PID 1's to receive, and it outlives
    // corrald. A fresh child is never a group's leader, so setsid succeeds.
    ::setsid();
    // Our copy of the parent's end would keep the read below from ever seeing EOF: a daemon
    // killed before it wrote the id maps would leave this holder blocked forever, holding copies
    // of every descriptor the daemon had (its listening socket, its clients' connections).
    if (plan.go_write_fd >= 0) ::close(plan.go_write_fd);
    if (plan.go_fd >= 0) {
        char go;
        ssize_t n;
        do {
            n = ::read(plan.go_fd, &go, 1);
        } while (n < 0 && errno == EINTR);
        if (n != 1) ::_exit(127);  // the parent gave up
        if (!become_namespace_root(plan.drop_groups))
            holder_fail(plan, "become root of the user namespace", errno);
        if (plan.rehearse_suid_dumpable) ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        if (!stay_non_dumpable()) holder_fail(plan, "stay non-dumpable", EPERM);
    }
    ::umask(022);
    if (plan.flags & CLONE_NEWNS) {
        if (const MountOp* failed = execute_mounts(plan.mounts))
            holder_fail(plan, failed->step.c_str(), errno,
                        failed->policy_path ? ChildReport::policy_path_failure
                                            : ChildReport::failure);
    }
    if ((plan.flags & CLONE_NEWUTS) && !set_hostname(plan.hostname.data(), plan.hostname.size()))
        holder_fail(plan, "sethostname", errno);
    if ((plan.flags & CLONE_NEWNET) && !bring_loopback_up())
        holder_fail(plan, "bring up lo", errno);
    if (!stay_non_dumpable()) holder_fail(plan, "stay non-dumpable", EPERM);
    write_report(plan.report_fd, ChildReport::ready, ::getpid());
    release_descriptors(plan);
    // Read before the heap copy goes: the zygote's plan lives in its heap (launch_zygote.cpp).
    const bool pid_namespace = plan.flags & CLONE_NEWPID;
    const bool store = plan.store_holder_fd >= 0;
    drop_heap_copy(plan.heap_start);  // after the report: off the session's creation path
    hold_forever(pid_namespace, store);
}

std::vector<int> descriptors_of(const HolderPlan& plan, int cgroup_fd) {
    std::vector<int> fds{cgroup_fd};
    for (int fd :
         {plan.report_fd, plan.go_fd, plan.lease_fd, plan.store_holder_fd, plan.store_daemon_fd})
        if (fd >= 0 && std::find(fds.begin(), fds.end(), fd) == fds.end()) fds.push_back(fd);
    for (const MountOp& op : plan.mounts.ops)
        if (op.fd >= 0 && std::find(fds.begin(), fds.end(), op.fd) == fds.end())
            fds.push_back(op.fd);
    return fds;
}

uintptr_t heap_start() {
    static const uintptr_t start = [] {
        auto field = process_stat_field(::getpid(), 47);
        return field ? static_cast<uintptr_t>(*field) : uintptr_t{0};
    }();
    return start;
}

namespace {

Result<HolderPlan> plan_holder(const Policy& policy, const WorkdirBinding& workdir, int flags,
                               const std::optional<SocketReach>& reach,
                               const std::string& resolv_conf) {
    HolderPlan plan;
    plan.flags = flags;
    plan.drop_groups = ::geteuid() == 0;  // choose_ids: root leases a range, never denies setgroups
    plan.hostname = policy.filesystem.hostname;
    if (flags & CLONE_NEWNS) {
        auto steps = compile_mount_plan(policy, workdir, resolv_conf);
        if (!steps) return std::move(steps.error().context("mount plan"));
        auto prepared = prepare_mounts(*steps, reach);
        if (!prepared) return std::move(prepared.error().context("mount plan"));
        plan.mounts = std::move(*prepared);
    }
    return plan;
}

/// The id maps of a session's user namespace and who its user is on the host.
struct UserNamespaceIds {
    IdMapping uid_map;
    IdMapping gid_map;
    bool deny_setgroups = false;
    HostIdentity identity;
};

/// With root: inside 0..65535 -> a range leased for this session, so the sandbox's root (or
/// strict's nobody, 65534 inside) is an unprivileged stranger to the host (CVE-2019-5736 and
/// CVE-2022-0492 were both root-in-container acting on the host as root). Without root: inside 0
/// -> the caller's own uid, the only mapping an unprivileged process may write.
Result<UserNamespaceIds> choose_ids(const Policy& policy, IdRangeLease& lease) {
    UserNamespaceIds ids;
    uid_t inside_uid = policy.user.inherit ? 0 : policy.user.uid;
    gid_t inside_gid = policy.user.inherit ? 0 : policy.user.gid;
    if (::geteuid() != 0) {
        ids.uid_map = {0, static_cast<uint32_t>(::geteuid()), 1};
        ids.gid_map = {0, static_cast<uint32_t>(::getegid()), 1};
        ids.deny_setgroups = true;
        ids.identity = {::geteuid(), ::getegid()};
        return ids;
    }
    if (inside_uid >= kIdRangeSize || inside_gid >= kIdRangeSize)
        return plain_error("user: uid/gid " + std::to_string(inside_uid) + "/" +
                           std::to_string(inside_gid) +
                           " does not fit a session's user namespace (0.." +
                           std::to_string(kIdRangeSize - 1) + " inside)");
    auto leased = IdRangeLease::acquire();
    if (!leased) return std::move(leased.error().context("user namespace"));
    lease = std::move(*leased);
    ids.uid_map = {0, lease.base(), lease.count()};
    ids.gid_map = {0, lease.base(), lease.count()};
    ids.identity = {lease.outside(inside_uid), lease.outside(inside_gid)};
    return ids;
}

/// Sets an idmap from `mapping` (a user namespace fd) on the detached tree `tree`.
bool set_idmap(int tree, int mapping) {
    return set_tree_attributes(tree, true, MOUNT_ATTR_IDMAP, mapping);
}

/// A host directory bound as the workdir (`corral run`'s cwd) keeps its owner: the detached
/// tree is idmapped so that the sandbox's user writes on disk as the directory's owner and sees
/// the owner's files as its own (CVE-2021-21284, Docker's userns-remap, is what the opposite
/// looks like: a remapped root that may write where the host's root owns things). Ids other than
/// the owner's show as nobody and cannot be written. Where the file system or kernel cannot idmap
/// (9p, NFS, kernels before 5.12), the tree stays as it is and the reason is returned.
std::string idmap_workdir(const PreparedMounts& mounts, HostIdentity identity, bool inherit_user) {
    if (mounts.workdir_tree < 0) return {};
    struct stat st;
    if (::fstat(mounts.workdir_tree, &st) != 0) return {};  // the tree itself: no path race
    if (st.st_uid == identity.uid && st.st_gid == identity.gid) return {};
    // A policy that names its own user (strict's nobody) never gains the host root's write power:
    // a root-owned directory stays as it was before user namespaces, writable only where its
    // modes let anyone write. Only `user: inherit` (the caller's own rights) is mapped to root.
    if (st.st_uid == 0 && !inherit_user) return {};
    auto mapping =
        make_mapping_namespace({st.st_uid, identity.uid, 1}, {st.st_gid, identity.gid, 1});
    std::string failure;
    if (mapping) {
        if (set_idmap(mounts.workdir_tree, mapping->get())) return {};
        failure = std::string("idmapped mount: ") + std::strerror(errno);
    } else {
        failure = mapping.error().describe();
    }
    return "cannot idmap the workdir `" + mounts.workdir_source + "` to its owner (uid " +
           std::to_string(st.st_uid) + ") (" + failure + "): the sandbox sees it as uid " +
           std::to_string(identity.uid) + " on the host, and writes to files it does not own fail";
}

/// Kills and reaps a holder that did not come up.
void discard(PidRef& holder) {
    (void)holder.send_signal(SIGKILL);
    (void)holder.wait();
}

/// Clones the holder on the launch worker's thread (SandboxOptions::clone_from_small_table):
/// the child copies the worker's table of a few descriptors, renumbered in its copy of the plan.
/// The holder is then a child of the worker's thread (waitid from any of our threads reaps it).
/// nullopt: the worker cannot take it, clone directly.
std::optional<Result<PidRef>> clone_holder_on_worker(const HolderPlan& plan, int cgroup_fd) {
    LaunchWorker* worker = LaunchWorker::shared();
    const std::vector<int> originals = descriptors_of(plan, cgroup_fd);
    if (worker == nullptr || originals.size() > LaunchWorker::kMaxDescriptors) return std::nullopt;
    pid_t pid = -1;  // set on the worker's thread; we wait for it
    auto back = worker->run_in_small_table(
        originals, [&](std::span<const int> received) -> Result<std::vector<UniqueFd>> {
            auto ours = [&](int fd) { return LaunchWorker::renumbered(fd, originals, received); };
            // The copy the child runs: numbers in this table, no descriptor of its own (the
            // received ones close after this work; the child keeps its copies).
            HolderPlan copy = plan.without_trees();
            for (MountOp& op : copy.mounts.ops) op.fd = ours(op.fd);
            copy.report_fd = ours(plan.report_fd);
            copy.go_fd = ours(plan.go_fd);
            copy.go_write_fd = -1;  // not sent (descriptors_of): the child never has it
            copy.lease_fd = ours(plan.lease_fd);
            copy.store_holder_fd = ours(plan.store_holder_fd);
            copy.store_daemon_fd = ours(plan.store_daemon_fd);
            copy.heap_start = heap_start();  // the holder runs on this thread's stack copy
            int pidfd = -1;
            const pid_t child = clone3_fork(static_cast<uint64_t>(copy.flags) | CLONE_PIDFD,
                                            received[0], &pidfd);
            if (child < 0) return sys_error("clone3 namespace holder");
            if (child == 0) holder_main(copy);
            pid = child;
            std::vector<UniqueFd> ours_back;
            ours_back.emplace_back(pidfd);
            return ours_back;
        });
    if (!back) return Result<PidRef>(std::move(back.error()));
    if (back->size() != 1)
        return Result<PidRef>(sys_error(EPROTO, "namespace holder: its pidfd did not arrive"));
    return Result<PidRef>(PidRef(pid, std::move((*back)[0])));
}

/// Clones the holder in corrald's launch zygote (launch_zygote.hpp) when it has one: the
/// holder is then a copy of the zygote's small memory, not of corrald's (no copy of corrald's
/// page tables, no copy-on-write faults in corrald afterwards, no other session's token in it),
/// and still a child of the worker's thread (CLONE_PARENT). nullopt: nothing was cloned there.
std::optional<Result<PidRef>> clone_holder_in_zygote(const HolderPlan& plan, int cgroup_fd) {
    LaunchWorker* worker = LaunchWorker::shared();
    LaunchZygote* zygote = worker != nullptr ? worker->started_zygote() : nullptr;
    if (zygote == nullptr) return std::nullopt;
    return zygote->clone_holder(plan, cgroup_fd);
}

/// Clones the holder from a small process (SandboxOptions::clone_from_small_table): the zygote
/// where corrald has one (a copy of a small process, not of corrald: issue 18), else the launch
/// worker's table. nullopt: neither can take it, clone directly.
std::optional<Result<PidRef>> clone_holder_from_small_process(const HolderPlan& plan,
                                                              int cgroup_fd) {
    if (auto from_zygote = clone_holder_in_zygote(plan, cgroup_fd)) return from_zygote;
    return clone_holder_on_worker(plan, cgroup_fd);
}

}  // namespace

Sandbox::Sandbox(Sandbox&& other) noexcept
    : holder_(std::exchange(other.holder_, PidRef{})),
      adopted_(std::exchange(other.adopted_, false)),
      flags_(std::exchange(other.flags_, 0)),
      pending_report_(std::move(other.pending_report_)),
      store_(std::move(other.store_)),
      lease_(std::move(other.lease_)),
      identity_(std::exchange(other.identity_, std::nullopt)),
      workdir_warning_(std::move(other.workdir_warning_)) {}

Sandbox& Sandbox::operator=(Sandbox&& other) noexcept {
    if (this != &other) {
        stop();
        holder_ = std::exchange(other.holder_, PidRef{});
        adopted_ = std::exchange(other.adopted_, false);
        flags_ = std::exchange(other.flags_, 0);
        pending_report_ = std::move(other.pending_report_);
        store_ = std::move(other.store_);
        lease_ = std::move(other.lease_);
        identity_ = std::exchange(other.identity_, std::nullopt);
        workdir_warning_ = std::move(other.workdir_warning_);
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
    if (!adopted_) (void)holder_.wait();  // an adopted one is not ours to reap
    holder_ = PidRef{};
    store_ = DescriptorStore{};
    lease_ = IdRangeLease{};
}

Status Sandbox::hold_output(int slot, std::span<const int> fds) {
    if (!keeps_output()) return sys_error(ENOTSUP, "the session's holder keeps no descriptors");
    return store_.hold(slot, fds);
}

void Sandbox::release_output(int slot, int count) {
    if (keeps_output()) store_.release(slot, count);
}

Result<UniqueFd> Sandbox::take_output(int slot) const {
    if (!holder_.valid()) return sys_error(ESRCH, "no holder");
    return DescriptorStore::take(holder_.pidfd(), slot);
}

bool Sandbox::try_reap() {
    if (!holder_.valid()) return true;
    if (adopted_) {
        // waitid would say ECHILD while it still runs: its pidfd is readable once it exited.
        if (!pidfd_exited(holder_.pidfd())) return false;
        holder_ = PidRef{};
        store_ = DescriptorStore{};
        lease_ = IdRangeLease{};
        return true;
    }
    auto status = holder_.try_wait();
    if (status && !*status) return false;  // still running
    // Reaped now, or an error (ECHILD: reaped elsewhere): either way nothing is left to wait for.
    // The namespaces are gone with it, so the id range is free again: a Sandbox object that
    // outlives its holder (an ended session's record, kept for the retention window) must not
    // keep a slot of the 4094 and a descriptor.
    holder_ = PidRef{};
    pending_report_.reset();
    store_ = DescriptorStore{};
    lease_ = IdRangeLease{};
    return true;
}

PidRef Sandbox::release() {
    if (!holder_.valid()) return {};
    (void)holder_.send_signal(SIGKILL);
    PidRef released = std::exchange(holder_, PidRef{});
    pending_report_.reset();
    store_ = DescriptorStore{};
    // The holder keeps its own copy of the lease's lock until it has exited, so the slot stays
    // taken exactly as long as the namespaces live; ours can go now.
    lease_ = IdRangeLease{};
    return released;
}

bool Sandbox::needed(const Policy& policy) {
    return namespace_clone_flags(policy.namespaces) != 0;
}

Result<Sandbox> Sandbox::create(const Policy& policy, const Cgroup& holder_cgroup,
                                const WorkdirBinding& workdir, const std::string& resolv_conf,
                                const SandboxOptions& options) {
    auto sandbox = start(policy, holder_cgroup, workdir, resolv_conf, options);
    if (!sandbox) return sandbox;
    CORRAL_TRY(sandbox->wait_until_ready(kSetupReportLimit), "");
    return sandbox;
}

Result<Sandbox> Sandbox::start(const Policy& policy, const Cgroup& holder_cgroup,
                               const WorkdirBinding& workdir, const std::string& resolv_conf,
                               const SandboxOptions& options) {
    int flags = namespace_clone_flags(policy.namespaces);
    if (flags == 0 && !options.keep_output) return Sandbox{};
    if (!holder_cgroup.valid()) return plain_error("namespace holder: no cgroup given");
    Sandbox sandbox;
    std::optional<UserNamespaceIds> ids;
    if (flags & CLONE_NEWUSER) {
        auto chosen = choose_ids(policy, sandbox.lease_);
        if (!chosen) return std::move(chosen.error());
        ids = *chosen;
    }
    // In a user namespace of its own the sandbox is, on the host, an identity no capability
    // helps: only the host sockets that identity may write need masking.
    std::optional<SocketReach> reach;
    if (ids) {
        reach = SocketReach{
            ids->uid_map.outside, ids->uid_map.count, ids->gid_map.outside, ids->gid_map.count, {}};
        if (::geteuid() != 0) {  // an unprivileged caller's mapping keeps its groups
            int count = ::getgroups(0, nullptr);
            if (count > 0) {
                reach->groups.resize(static_cast<size_t>(count));
                count = ::getgroups(count, reach->groups.data());
                reach->groups.resize(count > 0 ? static_cast<size_t>(count) : 0);
            }
        }
    }
    auto plan = plan_holder(policy, workdir, flags, reach, resolv_conf);
    if (!plan) return std::move(plan.error());
    plan->lease_fd = sandbox.lease_.valid() ? sandbox.lease_.lock_fd() : -1;
    plan->rehearse_suid_dumpable = options.rehearse_suid_dumpable;
    UniqueFd store_holder_end;  // the holder's copy only: ours is closed after the clone
    if (options.keep_output) {
        auto store = DescriptorStore::create(store_holder_end);
        if (!store) return std::move(store.error().context("namespace holder"));
        sandbox.store_ = std::move(*store);
        plan->store_holder_fd = store_holder_end.get();
        plan->store_daemon_fd = sandbox.store_.channel_fd();
    }

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
    plan->go_write_fd = go.write_end.get();

    PidRef holder;
    auto from_small = options.clone_from_small_table
                          ? clone_holder_from_small_process(*plan, holder_cgroup.dir_fd())
                          : std::nullopt;
    if (from_small) {
        if (!*from_small) return std::move(from_small->error());
        holder = std::move(**from_small);
    } else {
        int pidfd = -1;
        const pid_t pid = clone3_fork(static_cast<uint64_t>(flags) | CLONE_PIDFD,
                                      holder_cgroup.dir_fd(), &pidfd);
        if (pid < 0) return sys_error("clone3 namespace holder");
        if (pid == 0) holder_main(*plan);
        holder = PidRef(pid, UniqueFd(pidfd));
    }
    const pid_t pid = holder.pid();
    report->write_end.reset();
    store_holder_end.reset();
    go.read_end.reset();

    if (ids) {
        auto mapped = write_id_maps(pid, ids->uid_map, ids->gid_map, ids->deny_setgroups);
        if (mapped && workdir.idmap_to_owner)
            sandbox.workdir_warning_ =
                idmap_workdir(plan->mounts, ids->identity, policy.user.inherit);
        if (!mapped || ::write(go.write_end.get(), "1", 1) != 1) {
            // The holder has run none of its setup (it waits for `go`) and SIGKILL ends it at
            // once, frozen or not (cgroup v2 lets fatal signals through). corrald's reaper
            // collects it when its pidfd says so; a caller without one reaps it here, a short
            // blocking wait.
            if (options.reap_given_up) {
                (void)holder.send_signal(SIGKILL);
                options.reap_given_up(std::move(holder));
            } else {
                discard(holder);
            }
            if (!mapped) return std::move(mapped.error().context("namespace holder"));
            return sys_error("namespace holder: release");
        }
        sandbox.identity_ = ids->identity;
    }
    sandbox.holder_ = std::move(holder);
    sandbox.flags_ = flags;
    sandbox.pending_report_ = std::move(report->read_end);
    return sandbox;
}

namespace {

/// Whether host id `id` lies in one of the outside ranges of /proc/<pid>/{uid,gid}_map.
bool mapped_outside(pid_t pid, const char* map, unsigned id) {
    std::ifstream lines("/proc/" + std::to_string(pid) + "/" + map);
    for (unsigned inside, outside, count; lines >> inside >> outside >> count;)
        if (id >= outside && id - outside < count) return true;
    return false;
}

/// The first namespace kind in `flags` that `pid` shares with this process ("mnt", "net", ...),
/// or nullptr when it has its own of every kind asked for. A holder found on restart must really
/// be in the namespaces the policy asks for: a keeper (no namespaces) adopted for a policy that
/// now asks for some would have every new process setns into corrald's own mount, pid and network
/// namespaces (review of issue 12's keepers).
const char* shared_namespace(pid_t pid, int flags) {
    static constexpr std::pair<int, const char*> kinds[] = {
        {CLONE_NEWNS, "mnt"},       {CLONE_NEWPID, "pid"}, {CLONE_NEWNET, "net"},
        {CLONE_NEWIPC, "ipc"},      {CLONE_NEWUTS, "uts"}, {CLONE_NEWUSER, "user"},
        {CLONE_NEWCGROUP, "cgroup"}};
    for (const auto& [flag, name] : kinds) {
        if (!(flags & flag)) continue;
        struct stat theirs {
        }, ours{};
        const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + name;
        if (::stat(path.c_str(), &theirs) != 0) return name;  // cannot tell: not its own
        if (::stat((std::string("/proc/self/ns/") + name).c_str(), &ours) != 0) return name;
        if (theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino) return name;
    }
    return nullptr;
}

}  // namespace

Result<Sandbox> Sandbox::adopt(pid_t pid, uint64_t start_ticks, const Policy& policy,
                               const Cgroup& holder_cgroup, std::optional<HostIdentity> identity,
                               std::vector<std::string>* notes) {
    const int flags = namespace_clone_flags(policy.namespaces);
    if (flags == 0 && pid <= 0) return Sandbox{};  // no namespaces, no keeper
    if (!holder_cgroup.valid()) return plain_error("namespace holder: no cgroup given");
    auto holder = open_verified_process(pid, start_ticks, holder_cgroup.path());
    if (!holder) return std::move(holder.error().context("namespace holder"));
    if (const char* shared = shared_namespace(pid, flags))
        return plain_error(std::string("namespace holder: its ") + shared +
                           " namespace is not its own, but the policy asks for one (the policy "
                           "changed across the restart?)");
    Sandbox sandbox;
    if (flags & CLONE_NEWUSER) {
        if (!identity || !mapped_outside(pid, "uid_map", identity->uid) ||
            !mapped_outside(pid, "gid_map", identity->gid))
            return plain_error("namespace holder: the recorded identity is not in its id maps");
        sandbox.identity_ = identity;
    }
    sandbox.holder_ = std::move(*holder);
    sandbox.adopted_ = true;
    sandbox.flags_ = flags;
    // A holder started without a store (--keep-output=off, or an older daemon) has nothing at
    // kStoreDaemonFd: pidfd_getfd says EBADF, and the session is adopted without its output.
    if (auto store = DescriptorStore::take_over(sandbox.holder_.pidfd(), kStoreTakeOverBound)) {
        sandbox.store_ = std::move(*store);
    } else if (notes != nullptr && store.error().code != EBADF) {
        notes->push_back(store.error().describe());
    }
    return sandbox;
}

Status Sandbox::wait_until_ready(std::optional<std::chrono::milliseconds> limit) {
    if (!pending_report_) return {};
    SetupDeadline deadline;
    if (limit) deadline = SetupDeadline(*limit, holder_.pid());
    Status came =
        await_report(pending_report_.get(), deadline, "the namespace holder's setup report");
    Status ready = came ? read_setup_report()
                        : Status(std::move(came.error().context("namespace holder (killed)")));
    if (!ready) {
        pending_report_.reset();
        discard(holder_);  // no loop here: the reap may wait
        holder_ = PidRef{};
    }
    return ready;
}

Status Sandbox::read_setup_report() {
    if (!pending_report_) return {};
    auto message = read_report(pending_report_.get());
    if (!message && message.error().code == EAGAIN) return std::move(message.error());
    pending_report_.reset();
    if (message && *message && (*message)->kind == ChildReport::ready) return {};
    begin_stop();  // exiting with 127 after a failure report, or the channel failed
    if (!message) return std::move(message.error().context("namespace holder"));
    if (!*message) return plain_error("namespace holder died during setup");
    Error failed = sys_error((*message)->error, (*message)->step);
    // A path the policy named that the session's own /proc or /sys, looked at only now, does not
    // have as the policy needs it (missing, not a directory, a link) is the policy's to change:
    // HTTP 422, not a 404 that reads as "no such session". Any other failure is the host's.
    const int error = (*message)->error;
    if ((*message)->kind == ChildReport::policy_path_failure &&
        (error == ENOENT || error == ENOTDIR || error == ELOOP))
        failed.invalid_policy = true;
    return failed;
}

Error Sandbox::setup_deadline_error(const SetupDeadline& deadline) {
    return std::move(sys_error(ETIMEDOUT, "the namespace holder's setup report did not come " +
                                              deadline.describe())
                         .context("namespace holder (killed)"));
}

Status probe_idmapped_mount(const std::string& dir) {
    UniqueFd tree(static_cast<int>(
        ::syscall(SYS_open_tree, AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (!tree) return sys_error("open_tree `" + dir + "`");
    auto mapping = make_mapping_namespace({0, kIdRangeFirst, 1}, {0, kIdRangeFirst, 1});
    if (!mapping) return std::move(mapping.error());
    if (!set_idmap(tree.get(), mapping->get())) return sys_error("idmap `" + dir + "`");
    return {};
}

}  // namespace corral
