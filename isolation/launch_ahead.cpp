// A session's first process started ahead (launch_ahead.hpp): the waiting child's side and
// corrald's hand-over.
#include "isolation/launch_ahead.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/pipe.hpp"
#include "isolation/capabilities.hpp"
#include "isolation/child_report.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launcher_internal.hpp"

namespace corral {
namespace {

constexpr const char* kWaiting = "waiting launch";
/// What the waiting child sends once it has entered its session.
constexpr char kEntered = 'E';

/// What the waiting child makes its own while it is prepared: heap and stack it would otherwise
/// share copy-on-write with the zygote until its command comes, when decoding the launch would
/// fault and copy each page on the client's path (its execve was the slowest step of a first run
/// after a pause: docs/BENCHMARKS.md, stop 34).
constexpr size_t kWarmHeapBytes = 64 * 1024;
constexpr size_t kWarmStackBytes = 32 * 1024;

[[gnu::noinline]] void warm_stack() noexcept {
    volatile char stack[kWarmStackBytes];
    for (size_t i = 0; i < sizeof stack; i += 4096) stack[i] = 0;
}

void warm_memory() noexcept {
    warm_stack();
    // Freed at once: below glibc's trim threshold, the pages stay in the heap for the decode.
    if (void* heap = std::malloc(kWarmHeapBytes)) {
        std::memset(heap, 0, kWarmHeapBytes);
        std::free(heap);
    }
}

/// The bounding set a waiting child dropped for its session (ahead_part), to be compared with its
/// command's confinement.
struct DroppedBoundingSet {
    bool dropped = false;
    uint64_t kept = 0;
    int last = 0;

    /// Whether `c` asks for exactly this set: then its apply_confinement need not drop it again.
    bool same_as(const Confinement& c) const {
        return dropped && c.drop_capabilities && c.keep_capabilities == kept &&
               c.last_capability == last;
    }
};

/// Drops the bounding set `spec`'s confinement (ahead_part's) asks for; a failure is reported on
/// `go` as a failure to enter, and the child is not used.
DroppedBoundingSet drop_bounding_set_ahead(const LaunchSpec& spec, int go) noexcept {
    const Confinement* c = spec.confinement;
    if (c == nullptr || !c->drop_capabilities) return {};
    if (const char* step = drop_bounding_capabilities(c->keep_capabilities, c->last_capability)) {
        write_failure_report(go, step, errno);
        ::_exit(127);
    }
    return {true, c->keep_capabilities, c->last_capability};
}

/// The waiting child, once in its session: keeps nothing but `go` (the session's descriptors were
/// for entering it), waits for its command, and becomes it. corrald's end closing is the end.
[[noreturn]] void wait_for_command(const LaunchSpec& spec, int go) noexcept {
    const DroppedBoundingSet bounding = drop_bounding_set_ahead(spec, go);
    if (go > 3) ::close_range(3, static_cast<unsigned>(go) - 1, 0);
    ::close_range(static_cast<unsigned>(go) + 1, ~0U, 0);
    // Every signal blocked while it waits: it is still in corrald's session and process group,
    // where a terminal's ^Z or ^C would stop or end every waiting child. The command gets the
    // empty mask back (what enter_session left) before anything of it runs.
    const uint64_t all = ~uint64_t{0}, none = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, nullptr, sizeof all);
    warm_memory();
    if (::send(go, &kEntered, 1, MSG_NOSIGNAL) != 1) ::_exit(0);
    // Not the zygote (`ps`, and whoever counts corrald's zygotes by name): a session's first
    // process, until its command replaces the name. Only once it said it entered: the name means
    // "ready for a command" (a command that came while it still warmed its memory, before kEntered,
    // was launched another way, and tests that waited for the name saw that on a loaded host).
    ::prctl(PR_SET_NAME, "corrald-first", 0, 0, 0);
    auto message = receive_passing(go, kWaiting);
    // corrald's end closed (it gave this child up, or is gone): nothing was asked of it.
    // Anything else is a launch that went wrong: never an exit status of 0 for it.
    if (!message) ::_exit(message.error().code == EPIPE ? 0 : 127);
    // The report channel's write end comes last, after the spec's descriptors.
    if (message->fds.empty()) ::_exit(127);
    UniqueFd report = std::move(message->fds.back());
    message->fds.pop_back();
    auto decoded = decode_launch(message->bytes, std::move(message->fds));
    if (!decoded) {
        write_failure_report(report.get(), "read the launch (started ahead)", EPROTO);
        ::_exit(127);
    }
    // The decoded confinement is this child's own copy; the flag is never sent (confinement.hpp).
    if ((*decoded)->spec.confinement == &(*decoded)->confinement &&
        bounding.same_as((*decoded)->confinement))
        (*decoded)->confinement.bounding_set_dropped = true;
    ::close(go);
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof none);
    launcher_internal::become_command((*decoded)->spec, report.release());
}

/// Whether the child said it entered its session (and nothing else came first: a failure report
/// is longer than one byte). Never waits.
bool entered(int go) {
    char bytes[2];
    ssize_t n;
    do {
        n = ::recv(go, bytes, sizeof bytes, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n == 1 && bytes[0] == kEntered;
}

}  // namespace

LaunchSpec ahead_part(const LaunchSpec& spec, Confinement& bounding) {
    LaunchSpec part;
    part.cgroup_fd = spec.cgroup_fd;
    part.v1_join_fds = spec.v1_join_fds;
    part.namespace_holder_pidfd = spec.namespace_holder_pidfd;
    part.namespace_flags = spec.namespace_flags;
    part.stdout_fd = -1;
    part.stderr_fd = -1;
    if (spec.confinement != nullptr && spec.confinement->drop_capabilities) {
        bounding = Confinement{};
        bounding.drop_capabilities = true;
        bounding.keep_capabilities = spec.confinement->keep_capabilities;
        bounding.last_capability = spec.confinement->last_capability;
        bounding.no_new_privs = false;  // not applied ahead: only the bounding set is
        part.confinement = &bounding;
    }
    return part;
}

LaunchSpec command_part(const LaunchSpec& spec) {
    LaunchSpec rest = spec;
    rest.cgroup_fd = -1;
    rest.v1_join_fds.clear();
    rest.namespace_holder_pidfd = -1;
    rest.namespace_flags = 0;
    return rest;
}

Result<WaitingLaunch> start_waiting_launch(const LaunchSpec& spec) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return sys_error("socketpair for a launch ahead");
    UniqueFd ours(pair[0]), theirs(pair[1]);
    auto child = launcher_internal::start_session_child(spec, theirs.get(), wait_for_command);
    if (!child) return std::move(child.error());
    return WaitingLaunch{std::move(*child), std::move(ours)};
}

std::optional<PendingLaunch> launch_waiting(WaitingLaunch& waiting, const LaunchSpec& spec) {
    if (!waiting.go.valid() || !waiting.child.valid()) return std::nullopt;
    // Gone already (its pidfd is readable once it exited), or not (yet) in its session.
    pollfd exited{waiting.child.pidfd(), POLLIN, 0};
    if (exited.fd < 0 || ::poll(&exited, 1, 0) != 0) return std::nullopt;
    if (!entered(waiting.go.get())) return std::nullopt;
    const LaunchSpec rest = command_part(spec);  // the session's part is the child's already
    const bool listener = launcher_internal::hands_over_listener(rest);
    // A failure here (no descriptors left) is the caller's to retry another way.
    auto channel = launcher_internal::make_report_channel(listener);
    if (!channel) return std::nullopt;
    std::vector<int> fds = launch_descriptors(rest);
    auto bytes = encode_launch(rest, fds);
    if (!bytes) return std::nullopt;
    fds.push_back(channel->write_end.get());
    if (fds.size() > kMaxPassedDescriptors) return std::nullopt;
    if (Status sent = send_passing(waiting.go.get(), *bytes, fds, kWaiting); !sent)
        return std::nullopt;  // gone meanwhile, or too large: another way
    channel->write_end.reset();  // EOF once the child has exec'd or exited
    waiting.go.reset();
    PendingLaunch pending;
    pending.child = std::move(waiting.child);
    pending.report = std::move(channel->read_end);
    pending.listener_expected = listener;
    return pending;
}

bool end_waiting_launch(WaitingLaunch& waiting) {
    waiting.go.reset();
    if (!waiting.child.valid()) return true;
    (void)waiting.child.send_signal(SIGKILL);
    pollfd gone{waiting.child.pidfd(), POLLIN, 0};
    if (gone.fd < 0 || ::poll(&gone, 1, 100) != 1) return false;
    auto reaped = waiting.child.try_wait();
    if (!reaped || !*reaped) return false;
    waiting.child = PidRef();
    return true;
}

}  // namespace corral
