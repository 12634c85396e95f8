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
#include "isolation/launch_zygote_protocol.hpp"

namespace corral {
namespace {

using zygote_protocol::Answer;
using zygote_protocol::kCaller;
using zygote_protocol::kMessageBytes;
using zygote_protocol::Ready;

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

/// The image set_image() registered (process-wide, as the launch worker is).
UniqueFd& registered_image_fd() {
    static UniqueFd image;
    return image;
}

/// In the forked child: becomes the zygote's own program (`image`, corrald-launch), given our
/// end of the socket, our pid and the holders' name; nothing of our environment goes with it.
/// If the image cannot be executed, the child exits (127) and start() reads no Ready from it.
[[noreturn]] void exec_zygote(int image, int socket, pid_t parent, const char* holder_name) {
    const int flags = ::fcntl(socket, F_GETFD);
    if (flags < 0 || ::fcntl(socket, F_SETFD, flags & ~FD_CLOEXEC) != 0) ::_exit(127);
    char socket_text[16], parent_text[16], name[16] = {};
    std::snprintf(socket_text, sizeof socket_text, "%d", socket);
    std::snprintf(parent_text, sizeof parent_text, "%d", static_cast<int>(parent));
    std::memcpy(name, holder_name, ::strnlen(holder_name, sizeof name - 1));
    char program[] = "corrald-launch";
    char* argv[] = {program, socket_text, parent_text, name, nullptr};
    char* envp[] = {nullptr};
    ::syscall(SYS_execveat, image, "", argv, envp, AT_EMPTY_PATH);
    ::_exit(127);
}

/// When the zygote is given up: an executed one is restarted by the next request (restart(),
/// which says so), else launches fork from the worker from then on.
void complain(const std::string& why) {
    std::fprintf(stderr, "corral: launch zygote given up (%s)\n", why.c_str());
}

}

void LaunchZygote::set_image(UniqueFd image) {
    registered_image_fd() = std::move(image);
}

int LaunchZygote::registered_image() {
    return registered_image_fd().get();
}

Result<std::unique_ptr<LaunchZygote>> LaunchZygote::start(LaunchWorker& worker,
                                                          std::chrono::milliseconds answer_limit,
                                                          int image) {
    if (image >= 0) {
        auto executed = start_one(worker, answer_limit, image);
        if (executed) return executed;
        std::fprintf(stderr, "corral: launch zygote: %s; a fork of corrald serves instead\n",
                     executed.error().describe().c_str());
    }
    return start_one(worker, answer_limit, -1);
}

Result<std::unique_ptr<LaunchZygote>> LaunchZygote::start_one(
    LaunchWorker& worker, std::chrono::milliseconds answer_limit, int image) {
    // Forked by the worker's thread: the zygote's CLONE_PARENT children are then that thread's,
    // like the worker's own launches. glibc's fork (not a raw clone), because a zygote that is
    // not executed allocates: fork takes malloc's locks across the fork, so none is held by a
    // thread that does not exist in the child.
    pid_t pid = -1;
    const std::vector<int> passed = image >= 0 ? std::vector<int>{image} : std::vector<int>{};
    auto back = worker.run_in_small_table(passed, [&pid](std::span<const int> received)
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
        if (pid == 0) {
            // A session and process group of its own, and so its children's (holders, waiting
            // children, commands until their own setsid): none of them is in corrald's group, which
            // a terminal's ^C, ^Z or hang-up reaches, and which the kernel hangs up (corrald
            // included) when it is orphaned while one of them is stopped.
            ::setsid();
            // Holders are named as one cloned by corrald is: this thread's name (16 bytes).
            char holder_name[16] = "corrald";
            ::prctl(PR_GET_NAME, holder_name, 0, 0, 0);
            if (!received.empty()) exec_zygote(received[0], theirs.get(), parent, holder_name);
            launch_zygote_main(theirs.get(), parent, holder_name);
        }
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
    // Our own copy of the image, for restarts (restart()); without one it is not restarted.
    UniqueFd restart_image(image >= 0 ? ::fcntl(image, F_DUPFD_CLOEXEC, 3) : -1);
    std::unique_ptr<LaunchZygote> zygote(
        new LaunchZygote(std::move((*back)[0]), PidRef(pid, std::move((*back)[1])), answer_limit,
                         worker, image >= 0, std::move(restart_image)));
    const char* kind = image >= 0 ? "launch zygote (executed)" : "launch zygote";
    auto ready = receive_passing(zygote->socket_.get(), kCaller,
                                 std::chrono::steady_clock::now() + answer_limit);
    std::optional<Error> refused;
    if (!ready)
        refused = std::move(ready.error().context(std::string(kind) + ": wait until it is ready"));
    else if (ready->bytes != Ready::of_this_thread().bytes())
        refused = ready->bytes.size() == sizeof(Ready) && ready->bytes.starts_with("ready")
                      ? sys_error(EPERM, std::string(kind) + ": it lacks some of our capabilities")
                      : sys_error(EPROTO, std::string(kind) + ": not ready");
    if (refused) {
        std::lock_guard lock(zygote->mutex_);
        zygote->bury();
        return std::move(*refused);
    }
    return zygote;
}

LaunchZygote::LaunchZygote(UniqueFd socket, PidRef process,
                           std::chrono::milliseconds answer_limit, LaunchWorker& worker,
                           bool executed, UniqueFd image)
    : socket_(std::move(socket)),
      process_(std::move(process)),
      answer_limit_(answer_limit),
      worker_(worker),
      image_(std::move(image)),
      executed_(executed) {}

void LaunchZygote::give_up() {
    std::lock_guard lock(mutex_);
    restartable_ = false;  // the caller cannot use it: nor a new one (e.g. outside its cgroup)
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

uint64_t LaunchZygote::launches_ahead() const {
    std::lock_guard lock(mutex_);
    return launches_ahead_;
}

uint64_t LaunchZygote::holders() const {
    std::lock_guard lock(mutex_);
    return holders_;
}

uint64_t LaunchZygote::restarts() const {
    std::lock_guard lock(mutex_);
    return restarts_;
}

pid_t LaunchZygote::pid() const {
    std::lock_guard lock(mutex_);
    return process_.pid();
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

bool LaunchZygote::restart() {
    // Only the carried program: a fork of corrald now would hold every session's token (see the
    // header), so a forked zygote stays dead, and start() (which falls back to such a fork when
    // the image does not serve) is not what restarts an executed one.
    if (!executed_ || !image_.valid() || !restartable_) return false;
    const auto now = std::chrono::steady_clock::now();
    if (last_restart_ && now - *last_restart_ < kRestartInterval) return false;
    last_restart_ = now;
    auto fresh = start_one(worker_, answer_limit_, image_.get());
    if (!fresh) {
        // It could run at start but not now (vm.memfd_noexec raised, an LSM, fewer capabilities,
        // no memory for the fork): not tried again, launches fork from the worker.
        restartable_ = false;
        std::fprintf(stderr,
                     "corral: launch zygote not restarted (%s); launching from the worker\n",
                     fresh.error().describe().c_str());
        return false;
    }
    // Its process and socket become ours; `fresh` is then an empty shell (its bury does nothing).
    socket_ = std::move((*fresh)->socket_);
    process_ = std::move((*fresh)->process_);
    ++restarts_;
    std::fprintf(stderr, "corral: launch zygote restarted (pid %d)\n",
                 static_cast<int>(process_.pid()));
    return true;
}

std::optional<Result<PassedMessage>> LaunchZygote::exchange(std::string_view bytes,
                                                            std::span<const int> fds, int cgroup_fd,
                                                            size_t channels) {
    // Found dead by an earlier request: that is when a restart is tried (no check of its own).
    if (!socket_.valid() && !restart()) return std::nullopt;
    auto reply = exchange_once(bytes, fds, cgroup_fd, channels);
    // Lost now, and nothing of this request started (nullopt with the zygote buried; a spec too
    // large keeps it): a new zygote may take it. Never after ECANCELED: something had started.
    if (!reply && !socket_.valid() && restart())
        return exchange_once(bytes, fds, cgroup_fd, channels);
    return reply;
}

std::optional<Result<PassedMessage>> LaunchZygote::exchange_once(std::string_view bytes,
                                                                 std::span<const int> fds,
                                                                 int cgroup_fd, size_t channels) {
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

std::optional<Result<WaitingLaunch>> LaunchZygote::launch_ahead(const LaunchSpec& spec) {
    // Only what a waiting child is started with crosses: the request makes no command, and
    // carries no secret.
    Confinement ahead;
    const LaunchSpec part = ahead_part(spec, ahead);
    const std::vector<int> fds = launch_descriptors(part);
    auto bytes = encode_launch(part, fds, ZygoteRequest::ahead);
    if (!bytes) return Result<WaitingLaunch>(std::move(bytes.error()));
    std::lock_guard lock(mutex_);
    auto reply = exchange(*bytes, fds, spec.cgroup_fd, 1);  // the `go` socket, then the pidfd
    if (!reply) return std::nullopt;
    if (!*reply) return Result<WaitingLaunch>(std::move(reply->error().context("launch ahead")));
    Answer answer;
    std::memcpy(&answer, (*reply)->bytes.data(), sizeof answer);
    if (!answer.has_pidfd) {  // never sent so: it is cloned with CLONE_PIDFD
        (void)::kill(answer.pid, SIGKILL);
        (void)::waitpid(answer.pid, nullptr, __WALL);
        return Result<WaitingLaunch>(sys_error(EPROTO, "launch ahead: no pidfd from the zygote"));
    }
    ++launches_ahead_;
    WaitingLaunch waiting{PidRef(answer.pid, std::move((*reply)->fds[1])),
                          std::move((*reply)->fds[0])};
    waiting.filter_ahead = seccomp_fingerprint(part.confinement);
    return Result<WaitingLaunch>(std::move(waiting));
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
