#include "isolation/launch_zygote.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "isolation/cgroup.hpp"
#include "isolation/child_report.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/holder_plan.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launch_worker.hpp"

namespace corral {
namespace {

constexpr const char* kCaller = "launch zygote";
/// The zygote's first message, once it has set itself up.
constexpr std::string_view kReady = "ready";

/// Kills what a launch the zygote never answered started in its (fresh) cgroup, and reaps the
/// one that is ours: the zygote's clone made it a child of the worker's thread, which no orphan
/// walk meets (child_reaper.hpp); waitpid fails (ECHILD) for any other. Call it once the zygote
/// is reaped: a clone it made is then in the cgroup (CLONE_INTO_CGROUP), or was never made.
/// Returns how many there were; nullopt when the cgroup could not be read.
std::optional<size_t> end_unanswered_launch(int cgroup_fd) {
    auto pids = pids_in_subtree(cgroup_fd);
    if (!pids) return std::nullopt;
    for (pid_t pid : *pids) ::kill(pid, SIGKILL);
    for (pid_t pid : *pids) ::waitpid(pid, nullptr, __WALL);
    return pids->size();
}

/// Once, when the zygote is given up: launches fork from the worker from then on.
void complain(const std::string& why) {
    std::fprintf(stderr, "corral: launch zygote given up (%s); launching from the worker\n",
                 why.c_str());
}

/// The zygote's answer: a launch started (its report channel and pidfd attached, in that order)
/// or the Error launch_begin() gave.
struct Answer {
    int32_t code = 0;  ///< failed: the Error's code (its message follows this struct)
    int32_t pid = -1;
    uint8_t failed = 0;
    uint8_t listener_expected = 0;
    uint8_t has_pidfd = 0;
    uint8_t unused = 0;
};
static_assert(sizeof(Answer) == 12, "no padding: every byte of it is sent");

/// How much one launch may weigh (argv, env, filters). Raised from the socket's default
/// (~200 KiB) where we may: a larger spec is launched from the worker instead (EMSGSIZE).
constexpr int kMessageBytes = 4 << 20;

/// Wipes a request once served: every child the zygote starts later is a copy of its memory,
/// freed memory included, and must not carry another launch's environment (secrets) with it.
void scrub(std::string& bytes) {
    ::explicit_bzero(bytes.data(), bytes.size());
}

void scrub(DecodedLaunch& launch) {
    for (auto* strings : {&launch.spec.argv, &launch.spec.env})
        for (auto& text : *strings) scrub(text);
    scrub(launch.spec.cwd);
}

/// A holder's plan names the session's paths (its directory, so its id): gone with the request.
void scrub(DecodedHolder& holder) {
    scrub(holder.plan.hostname);
    for (MountOp& op : holder.plan.mounts.ops)
        for (auto* text : {&op.source, &op.target, &op.data, &op.step}) scrub(*text);
}

/// What the zygote answers to one request: the Answer, an error's message after it, and the
/// descriptors attached (owned here until sent; the child is corrald's, which has them then).
struct Served {
    Answer answer;
    std::string text;
    std::vector<UniqueFd> attached;
};

Served failed(Error error) {
    Served served;
    served.answer.failed = 1;
    served.answer.code = error.code;
    served.text = std::move(error.message);
    return served;
}

/// launch_begin() of a command, as corrald's child (CLONE_PARENT): its report channel and pidfd.
Served serve_launch(std::string_view bytes, std::vector<UniqueFd> fds) {
    auto decoded = decode_launch(bytes, std::move(fds));
    if (!decoded) return failed(std::move(decoded.error()));
    (*decoded)->spec.clone_parent = true;
    auto started = corral::launch_begin((*decoded)->spec);
    scrub(**decoded);
    if (!started) return failed(std::move(started.error()));
    Served served;
    served.answer.pid = started->child.pid();
    served.answer.listener_expected = started->listener_expected;
    served.answer.has_pidfd = started->child.pidfd() >= 0;
    served.attached.push_back(std::move(started->report));
    if (served.answer.has_pidfd) served.attached.push_back(started->child.take_pidfd());
    return served;
}

/// Where the heap a holder cloned here may drop once set up starts (HolderPlan::heap_start), 0
/// for none. It runs on our main stack's copy, the plan in our heap (read before the drop:
/// holder_main), so the heap is droppable unless this thread's own TLS lies in it, as glibc puts
/// a static binary's main-thread TLS (__libc_setup_tls uses sbrk); then it is kept, a copy of
/// this small process's heap, not of corrald's.
uintptr_t droppable_heap() {
    static thread_local char in_tls = 0;
    const uintptr_t start = heap_start();
    const auto tls = reinterpret_cast<uintptr_t>(&in_tls);
    const auto end = reinterpret_cast<uintptr_t>(::sbrk(0));
    return tls >= start && tls < end ? 0 : start;
}

/// A session's namespace holder, as corrald's child (CLONE_PARENT): the same clone as corrald's
/// (Sandbox::start), born in its cgroup with the plan's namespaces, from a copy of this small
/// process. Its pidfd goes back.
Served serve_holder(int socket, const char* holder_name, std::string_view bytes,
                    std::vector<UniqueFd> fds) {
    auto decoded = decode_holder(bytes, std::move(fds));
    if (!decoded) return failed(std::move(decoded.error()));
    HolderPlan& plan = (*decoded)->plan;
    plan.heap_start = droppable_heap();
    int pidfd = -1;
    const pid_t pid = clone3_fork(CLONE_PARENT | CLONE_PIDFD | static_cast<uint64_t>(plan.flags),
                                  (*decoded)->cgroup_fd, &pidfd);
    if (pid == 0) {
        // Before anything of the session: our socket to corrald is not the holder's
        // (release_descriptors would close it only after its setup, and a session's process
        // could take it meanwhile once the holder is briefly dumpable; CVE-2024-21626).
        ::close(socket);
        // Named as a holder cloned from corrald is (`ps`, and tests that count our zygotes).
        ::prctl(PR_SET_NAME, holder_name, 0, 0, 0);
        holder_main(plan);
    }
    const int error = errno;
    scrub(**decoded);
    if (pid < 0) return failed(sys_error(error, "clone3 namespace holder (in the launch zygote)"));
    Served served;
    served.answer.pid = pid;
    served.answer.has_pidfd = 1;
    served.attached.emplace_back(pidfd);
    return served;
}

/// Answers one request; `holder_name` is corrald's name, which a holder keeps.
void serve_one(int socket, const char* holder_name, PassedMessage& request,
               std::vector<UniqueFd> fds) {
    auto kind = request_kind(request.bytes);
    Served served = !kind ? failed(std::move(kind.error()))
                    : *kind == ZygoteRequest::holder
                        ? serve_holder(socket, holder_name, request.bytes, std::move(fds))
                        : serve_launch(request.bytes, std::move(fds));
    std::string bytes(reinterpret_cast<const char*>(&served.answer), sizeof served.answer);
    bytes += served.text;
    std::vector<int> attached;
    for (const auto& fd : served.attached) attached.push_back(fd.get());
    scrub(request.bytes);
    // Our copies of what is attached close when `served` goes: the child is corrald's
    // (CLONE_PARENT), and corrald has them now. If corrald is gone, so are we.
    if (!send_passing(socket, bytes, attached, kCaller)) ::_exit(0);
}

}  // namespace

[[noreturn]] void launch_zygote_main(int socket, pid_t parent) noexcept {
    // Dies with corrald: the signal comes when the worker's thread ends (the whole process, as it
    // never returns), and a parent gone before the prctl is caught by the look after it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(0);
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    char holder_name[16] = "corrald";  // corrald's own (PR_GET_NAME: 16 bytes with its NUL)
    ::prctl(PR_GET_NAME, holder_name, 0, 0, 0);
    ::prctl(PR_SET_NAME, "corrald-launch", 0, 0, 0);
    // corrald's handlers and ignored signals (SIGPIPE) go, once: the zygote needs none (every
    // signal stays blocked, as on the worker's thread; its sends use MSG_NOSIGNAL), so the
    // children it launches find every disposition at the default and skip resetting them.
    reset_signal_dispositions_for_good();
    // The worker's table is stdio, its socket and ours; keep stdio (diagnostics) and ours.
    ::close_range(3, static_cast<unsigned>(socket) - 1, 0);
    ::close_range(static_cast<unsigned>(socket) + 1, ~0U, 0);
    // Freed memory of corrald's goes back to the kernel: every launch copies what is left.
    ::malloc_trim(0);
    // Ready: start() returns once this arrives, so the zygote it returns is this one, named and
    // bound to corrald's life.
    if (!send_passing(socket, kReady, {}, kCaller)) ::_exit(0);
    for (;;) {
        auto request = receive_passing(socket, kCaller);
        if (!request) {
            if (request.error().code == EPROTO) continue;  // its descriptors are closed
            ::_exit(0);                                      // corrald's end is gone
        }
        std::vector<UniqueFd> fds = std::move(request->fds);
        serve_one(socket, holder_name, *request, std::move(fds));
        ::malloc_trim(0);  // what the launch allocated and freed goes, not into the next copy
    }
}

Result<std::unique_ptr<LaunchZygote>> LaunchZygote::start(LaunchWorker& worker,
                                                          std::chrono::milliseconds answer_limit) {
    // Forked by the worker's thread: the zygote's CLONE_PARENT children are then that thread's,
    // like the worker's own launches. glibc's fork (not a raw clone), because the zygote
    // allocates: fork takes malloc's locks across the fork, so none is held by a thread that
    // does not exist in the child.
    pid_t pid = -1;
    auto back = worker.run_in_small_table({}, [&pid](std::span<const int>)
                                                  -> Result<std::vector<UniqueFd>> {
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
            return sys_error("launch zygote: socketpair");
        UniqueFd ours(pair[0]), theirs(pair[1]);
        for (int fd : pair) {
            // Best effort: without it a large spec goes through the worker (EMSGSIZE).
            ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &kMessageBytes, sizeof kMessageBytes);
            ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &kMessageBytes, sizeof kMessageBytes);
        }
        const pid_t parent = ::getpid();
        pid = ::fork();
        if (pid < 0) return sys_error("launch zygote: fork");
        if (pid == 0) launch_zygote_main(theirs.get(), parent);
        const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
        if (pidfd < 0) {
            const int error = errno;
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, __WALL);
            return sys_error(error, "launch zygote: pidfd_open");
        }
        std::vector<UniqueFd> out;
        out.push_back(std::move(ours));
        out.emplace_back(pidfd);
        return out;
    });
    if (!back) return std::move(back.error());
    if (back->size() != 2) {  // forked, but we have no hold on it: end it
        if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, __WALL);
        return sys_error(EPROTO, "launch zygote: its descriptors did not arrive");
    }
    std::unique_ptr<LaunchZygote> zygote(new LaunchZygote(
        std::move((*back)[0]), PidRef(pid, std::move((*back)[1])), answer_limit));
    auto ready = receive_passing(zygote->socket_.get(), kCaller,
                                 std::chrono::steady_clock::now() + answer_limit);
    if (!ready || ready->bytes != kReady) {
        std::lock_guard lock(zygote->mutex_);
        zygote->bury();
        return ready ? sys_error(EPROTO, "launch zygote: not ready")
                     : std::move(ready.error().context("launch zygote: wait until it is ready"));
    }
    return zygote;
}

LaunchZygote::LaunchZygote(UniqueFd socket, PidRef process,
                           std::chrono::milliseconds answer_limit)
    : socket_(std::move(socket)), process_(std::move(process)), answer_limit_(answer_limit) {}

void LaunchZygote::give_up() {
    std::lock_guard lock(mutex_);
    bury();
}

LaunchZygote::~LaunchZygote() {
    std::lock_guard lock(mutex_);
    bury();
}

uint64_t LaunchZygote::launches() const {
    std::lock_guard lock(mutex_);
    return launches_;
}

uint64_t LaunchZygote::holders() const {
    std::lock_guard lock(mutex_);
    return holders_;
}

bool LaunchZygote::alive() const {
    std::lock_guard lock(mutex_);
    return socket_.valid();
}

void LaunchZygote::bury() {
    if (!socket_.valid()) return;
    socket_.reset();
    (void)process_.send_signal(SIGKILL);
    (void)process_.wait();
}

std::optional<Result<PassedMessage>> LaunchZygote::exchange(std::string_view bytes,
                                                            std::span<const int> fds, int cgroup_fd,
                                                            size_t channels) {
    if (!socket_.valid()) return std::nullopt;
    if (Status sent = send_passing(socket_.get(), bytes, fds, kCaller); !sent) {
        if (sent.error().code == EMSGSIZE) return std::nullopt;
        complain(sent.error().describe());
        bury();
        return std::nullopt;
    }
    // A zygote that stops answering (stopped by hand, stuck) must not hold launches for ever:
    // after its limit it is taken for dead.
    auto reply = receive_passing(socket_.get(), kCaller,
                                 std::chrono::steady_clock::now() + answer_limit_);
    if (!reply || reply->bytes.size() < sizeof(Answer)) {
        // Gone, silent past its limit, or talking nonsense, after it took the request: it may
        // have started the child, which would be ours (CLONE_PARENT) and unknown. Once it is
        // reaped, the child's cgroup (a fresh leaf) says: empty, nothing started, so another
        // way may; else that is ended and this request fails (never two of one child).
        const std::string why = reply ? "a short answer" : reply.error().describe();
        complain(why);
        bury();
        if (end_unanswered_launch(cgroup_fd) == std::optional<size_t>(0)) return std::nullopt;
        return Result<PassedMessage>(
            sys_error(ECANCELED, "launch zygote: no answer (" + why + "); it was stopped"));
    }
    Answer answer;
    std::memcpy(&answer, reply->bytes.data(), sizeof answer);
    if (answer.failed != 0)
        return Result<PassedMessage>(Error{answer.code, reply->bytes.substr(sizeof answer)});
    if (answer.pid <= 0 || reply->fds.size() != channels + (answer.has_pidfd ? 1u : 0u)) {
        complain("the child's descriptors did not arrive");
        bury();
        // Started but unwatchable: our child (CLONE_PARENT), so its pid is ours until reaped.
        if (answer.pid > 0 && ::kill(answer.pid, SIGKILL) == 0)
            ::waitpid(answer.pid, nullptr, __WALL);
        return Result<PassedMessage>(
            sys_error(EPROTO, "launch zygote: the child's descriptors did not arrive"));
    }
    return Result<PassedMessage>(std::move(*reply));
}

std::optional<Result<PendingLaunch>> LaunchZygote::launch_begin(const LaunchSpec& spec) {
    const std::vector<int> fds = launch_descriptors(spec);
    auto bytes = encode_launch(spec, fds);
    if (!bytes) return Result<PendingLaunch>(std::move(bytes.error()));
    std::lock_guard lock(mutex_);
    auto reply = exchange(*bytes, fds, spec.cgroup_fd, 1);  // the report channel, then the pidfd
    if (!reply) return std::nullopt;
    if (!*reply) return Result<PendingLaunch>(std::move(reply->error()));
    Answer answer;
    std::memcpy(&answer, (*reply)->bytes.data(), sizeof answer);
    PendingLaunch pending;
    pending.report = std::move((*reply)->fds[0]);
    pending.child = PidRef(answer.pid, answer.has_pidfd ? std::move((*reply)->fds[1]) : UniqueFd());
    pending.listener_expected = answer.listener_expected != 0;
    ++launches_;
    return Result<PendingLaunch>(std::move(pending));
}

std::optional<Result<PidRef>> LaunchZygote::clone_holder(const HolderPlan& plan, int cgroup_fd) {
    const std::vector<int> fds = descriptors_of(plan, cgroup_fd);
    if (fds.size() > kMaxPassedDescriptors) return std::nullopt;
    auto bytes = encode_holder(plan, cgroup_fd, fds);
    if (!bytes) return Result<PidRef>(std::move(bytes.error()));
    std::lock_guard lock(mutex_);
    auto reply = exchange(*bytes, fds, cgroup_fd, 0);
    if (!reply) return std::nullopt;
    if (!*reply) return Result<PidRef>(std::move(reply->error().context("namespace holder")));
    Answer answer;
    std::memcpy(&answer, (*reply)->bytes.data(), sizeof answer);
    if (!answer.has_pidfd) {  // never sent so: a holder is cloned with CLONE_PIDFD
        (void)::kill(answer.pid, SIGKILL);
        (void)::waitpid(answer.pid, nullptr, __WALL);
        return Result<PidRef>(sys_error(EPROTO, "namespace holder: no pidfd from the zygote"));
    }
    ++holders_;
    return Result<PidRef>(PidRef(answer.pid, std::move((*reply)->fds[0])));
}

}  // namespace corral
