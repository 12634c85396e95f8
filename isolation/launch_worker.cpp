#include "isolation/launch_worker.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <future>
#include <optional>
#include <vector>

#include "base/thread_without_signals.hpp"
#include "isolation/clone_vm.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/setup_watchdog.hpp"

namespace corral {
namespace {

constexpr const char* kCaller = "launch worker";

struct Message {
    uintptr_t job = 0;  ///< the caller's Job (same address space; the caller waits for the answer)
};

std::string_view message_bytes(const Message& message) {
    return {reinterpret_cast<const char*>(&message), sizeof message};
}

int count_open_descriptors() {
    DIR* dir = ::opendir("/proc/thread-self/fd");
    if (dir == nullptr) return -1;
    int count = 0;
    while (const dirent* entry = ::readdir(dir))
        if (entry->d_name[0] != '.') ++count;
    ::closedir(dir);
    return count - 1;  // the directory's own descriptor
}

}  // namespace

/// One request: the caller's descriptors (in the order it attached them) and its work; the
/// worker fills `error` when the work could not run or failed.
struct LaunchWorker::Job {
    size_t expected = 0;
    const SmallTableWork* work = nullptr;
    std::optional<Error> error;
};

LaunchWorker* LaunchWorker::shared() {
    // Leaked on purpose: the thread outlives every static destructor (it waits in recvmsg), and
    // launches may happen until the process exits.
    // The thread lives in the process that started it: a fork of that process (which has only
    // the forking thread) launches directly.
    static const pid_t owner = ::getpid();
    static LaunchWorker* worker = [] {
        auto* created = new LaunchWorker();
        if (Status started = created->start(); !started) {
            std::fprintf(stderr, "corral: launching without a worker thread: %s\n",
                         started.error().describe().c_str());
            return static_cast<LaunchWorker*>(nullptr);
        }
        return created;
    }();
    return ::getpid() == owner ? worker : nullptr;
}

Status LaunchWorker::start() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return sys_error("launch worker: socketpair");
    socket_ = UniqueFd(pair[0]);
    const int theirs = pair[1];
    std::promise<int> unshared;
    auto ready = unshared.get_future();
    thread_ = start_thread_without_signals([this, theirs, &unshared] {
        // A table of our own, then nothing of corrald's in it but stdio and our end.
        if (::unshare(CLONE_FILES) != 0) {
            unshared.set_value(errno);
            return;
        }
        if (::close_range(3, static_cast<unsigned>(theirs) - 1, 0) != 0 ||
            ::close_range(static_cast<unsigned>(theirs) + 1, ~0U, 0) != 0) {
            unshared.set_value(errno);
            return;
        }
        unshared.set_value(0);
        serve(theirs);
    });
    const int error = ready.get();  // the thread's first steps: no wait on anything else
    ::close(theirs);                // ours only in the worker's table from now on
    if (error != 0) {
        thread_.join();
        return sys_error(error, "launch worker: a descriptor table of its own");
    }
    thread_.detach();
    // The thread that bounds the setups of the worker's children that share our memory
    // (setup_watchdog.hpp), started now rather than at a session's first launch, where a new
    // thread would look like one the session left behind.
    if (Status watchdog = start_setup_watchdog(); !watchdog)
        std::fprintf(stderr, "corral: %s; launches with a setup limit fork\n",
                     watchdog.error().describe().c_str());
    return {};
}

void LaunchWorker::start_zygote() {
    std::call_once(zygote_started_, [this] {
        if (!clone_into_cgroup_supported()) return;  // CLONE_PARENT needs clone3 into a cgroup
        auto zygote = LaunchZygote::start(*this);
        if (!zygote) {
            std::fprintf(stderr, "corral: launching without a zygote: %s\n",
                         zygote.error().describe().c_str());
            return;
        }
        zygote_ = std::move(*zygote);
        started_zygote_.store(zygote_.get(), std::memory_order_release);
    });
}

const char* LaunchWorker::zygote_kind() const {
    const LaunchZygote* zygote = started_zygote();
    if (zygote == nullptr || !zygote->alive()) return "none";
    return zygote->executed() ? "executed" : "forked";
}

LaunchZygote* LaunchWorker::zygote() {
    start_zygote();
    return zygote_.get();
}

void LaunchWorker::serve(int socket) noexcept {
    for (;;) {
        auto request = receive_passing(socket, kCaller);
        if (!request) {
            if (request.error().code == EPROTO) continue;
            return;  // corrald's end is gone
        }
        Message message;
        if (request->bytes.size() != sizeof message) continue;  // not from run_in_small_table
        std::memcpy(&message, request->bytes.data(), sizeof message);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        auto* job = reinterpret_cast<Job*>(message.job);
        std::vector<int> received;
        for (const auto& fd : request->fds) received.push_back(fd.get());
        std::vector<UniqueFd> back;  // in our table: closed once on their way
        if (received.size() != job->expected) {
            job->error = sys_error(EPROTO, "launch worker: " + std::to_string(received.size()) +
                                               " of " + std::to_string(job->expected) +
                                               " descriptors arrived");
        } else if (auto done = (*job->work)(received); done) {
            back = std::move(*done);
        } else {
            job->error = std::move(done.error());
        }
        request->fds.clear();
        std::vector<int> fds;
        for (size_t i = 0; i < back.size() && i < kMaxDescriptors; ++i)
            fds.push_back(back[i].get());
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (!send_passing(socket, message_bytes(message), fds, kCaller)) return;
    }
}

Result<std::vector<UniqueFd>> LaunchWorker::run_in_small_table(std::span<const int> fds,
                                                               const SmallTableWork& work) {
    if (fds.size() > kMaxDescriptors)
        return sys_error(EMSGSIZE, "launch worker: " + std::to_string(fds.size()) +
                                       " descriptors, more than " +
                                       std::to_string(kMaxDescriptors));
    Job job;
    job.expected = fds.size();
    job.work = &work;
    std::lock_guard lock(mutex_);
    const Message message{reinterpret_cast<uintptr_t>(&job)};
    std::atomic_thread_fence(std::memory_order_seq_cst);
    CORRAL_TRY(send_passing(socket_.get(), message_bytes(message), fds, kCaller),
               "hand the work to the launch worker");
    auto answer = receive_passing(socket_.get(), kCaller);
    if (!answer) return std::move(answer.error());
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (job.error) return std::move(*job.error);
    return std::move(answer->fds);
}

int LaunchWorker::renumbered(int fd, std::span<const int> originals,
                             std::span<const int> received) {
    for (size_t i = 0; fd >= 0 && i < originals.size() && i < received.size(); ++i)
        if (originals[i] == fd) return received[i];
    return -1;
}

Result<PendingLaunch> LaunchWorker::launch_begin(const LaunchSpec& spec) {
    const bool shares_memory = clone_on_stack_available() && launch_may_share_memory(spec);
    // Never started here: a zygote forked now would be a copy of corrald with its sessions (an
    // executed one found dead is restarted inside launch_begin: its own program, no copy).
    LaunchZygote* forks = shares_memory ? nullptr : started_zygote();
    if (forks != nullptr) {
        if (auto launched = forks->launch_begin(spec)) return std::move(*launched);
        // Not launched there (the zygote is gone, or the spec too large for it): from here.
    }
    const std::vector<int> originals = launch_descriptors(spec);
    if (originals.size() > kMaxDescriptors) return corral::launch_begin(spec);
    PendingLaunch pending;  // filled on the worker's thread; we wait for it
    pid_t pid = -1;
    bool has_pidfd = false;
    auto back = run_in_small_table(
        originals, [&](std::span<const int> received) -> Result<std::vector<UniqueFd>> {
            // launch_descriptors names every descriptor of the spec: none maps to -1 but -1.
            auto ours = [&](int fd) { return renumbered(fd, originals, received); };
            LaunchSpec rewritten = spec;
            rewritten.cgroup_fd = ours(spec.cgroup_fd);
            rewritten.namespace_holder_pidfd = ours(spec.namespace_holder_pidfd);
            rewritten.stdin_fd = ours(spec.stdin_fd);
            rewritten.stdout_fd = ours(spec.stdout_fd);
            rewritten.stderr_fd = ours(spec.stderr_fd);
            rewritten.extra_fd = ours(spec.extra_fd);
            for (int& fd : rewritten.v1_join_fds) fd = ours(fd);
            if (spec.landlock_ruleset_fd >= 0)
                rewritten.landlock_ruleset_fd = ours(spec.landlock_ruleset_fd);
            else if (spec.confinement != nullptr && spec.confinement->landlock_ruleset.valid())
                rewritten.landlock_ruleset_fd = ours(spec.confinement->landlock_ruleset.get());
            if (!rewritten.setup_limit) rewritten.setup_limit = kSetupReportLimit;  // see .hpp
            auto started = corral::launch_begin(rewritten);
            if (!started) return std::move(started.error());
            std::vector<UniqueFd> ours_back;  // the child's report channel, then its pidfd
            ours_back.push_back(std::move(started->report));
            if (started->child.pidfd() >= 0) {
                const int pidfd = ::fcntl(started->child.pidfd(), F_DUPFD_CLOEXEC, 3);
                if (pidfd < 0) {
                    // Without its pidfd the caller could not tell when the child ends: stop it.
                    (void)started->child.send_signal(SIGKILL);
                    (void)started->child.wait();
                    return sys_error("launch worker: dup the child's pidfd");
                }
                has_pidfd = true;
                ours_back.emplace_back(pidfd);
            }
            pid = started->child.pid();
            pending.listener_expected = started->listener_expected;
            pending.exec_reached = started->exec_reached;
            return ours_back;
        });
    if (!back) return std::move(back.error());
    if (back->size() != (has_pidfd ? 2u : 1u))
        return sys_error(EPROTO, "launch worker: the child's descriptors did not arrive");
    pending.report = std::move((*back)[0]);
    pending.child = PidRef(pid, has_pidfd ? std::move((*back)[1]) : UniqueFd());
    return pending;
}

Result<int> LaunchWorker::open_descriptors() {
    int descriptors = -1;
    auto back = run_in_small_table({}, [&](std::span<const int>) {
        descriptors = count_open_descriptors();
        return Result<std::vector<UniqueFd>>(std::vector<UniqueFd>{});
    });
    if (!back) return std::move(back.error());
    return descriptors;
}

}  // namespace corral
