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

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/pipe.hpp"
#include "isolation/capabilities.hpp"
#include "isolation/child_report.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launcher_internal.hpp"
#include "isolation/seccomp.hpp"
#include "isolation/seccomp_listing.hpp"

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

/// Installs the seccomp filter `spec`'s confinement (ahead_part's) carries, if any: no_new_privs
/// first (as apply_confinement), then the notifying filter with a new listener where there is
/// one (-1 where the kernel refuses a listener: the filter without one, as apply_confinement
/// does), else the plain filter. A failure is reported on `go` as a failure to enter, and the child
/// is not used. Returns the listener, -1 when there is none.
int install_filter_ahead(const LaunchSpec& spec, int go, bool& installed) noexcept {
    installed = false;
    const Confinement* c = spec.confinement;
    if (c == nullptr || c->seccomp_filter.empty()) return -1;
    auto fail = [go](const char* step) {
        write_failure_report(go, step, errno);
        ::_exit(127);
    };
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs (ahead)");
    installed = true;
    if (!c->seccomp_notifying_filter.empty()) {
        const int listener = install_seccomp_filter(c->seccomp_notifying_filter.data(),
                                                    c->seccomp_notifying_filter.size(), true);
        if (listener >= 0) return listener;
        if (errno != EBUSY && errno != EINVAL && errno != ENOSYS) fail("seccomp (ahead)");
    }
    if (install_seccomp_filter(c->seccomp_filter.data(), c->seccomp_filter.size()) != 0)
        fail("seccomp (ahead)");
    return -1;
}

/// Says it entered its session: kEntered, with the filter's listener when it has one.
bool say_entered(int go, int listener) noexcept {
    char byte = kEntered;
    iovec iov{&byte, 1};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (listener >= 0) {
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr* header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(header), &listener, sizeof(int));
    }
    return ::sendmsg(go, &message, MSG_NOSIGNAL) == 1;
}

bool same_program(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(sock_filter)) == 0);
}

/// Whether the command's confinement asks for exactly the filter `ahead` (the waiting child's
/// spec's) installed.
bool same_filter(const Confinement* ahead, const Confinement& command) {
    return ahead != nullptr && same_program(ahead->seccomp_filter, command.seccomp_filter) &&
           same_program(ahead->seccomp_notifying_filter, command.seccomp_notifying_filter);
}

/// The waiting child, once in its session: keeps nothing but `go` (the session's descriptors were
/// for entering it), waits for its command, and becomes it. corrald's end closing is the end.
[[noreturn]] void wait_for_command(const LaunchSpec& spec, int go) noexcept {
    const DroppedBoundingSet bounding = drop_bounding_set_ahead(spec, go);
    if (go > 3) ::close_range(3, static_cast<unsigned>(go) - 1, 0);
    ::close_range(static_cast<unsigned>(go) + 1, ~0U, 0);
    // Every signal blocked while it waits: nothing but corrald's end closing or its command may
    // end it (it leads a session of its own, out of any terminal's reach, but a stray signal of
    // the session's root user would do). The command gets the empty mask back (what
    // enter_session left) before anything of it runs.
    const uint64_t all = ~uint64_t{0}, none = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, nullptr, sizeof all);
    warm_memory();
    // Last before it says so: from here on, only the calls of calls_after_filter_ahead().
    bool filter_installed = false;
    const int listener = install_filter_ahead(spec, go, filter_installed);
    if (!say_entered(go, listener)) ::_exit(0);
    if (listener >= 0) ::close(listener);  // corrald's now
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
    // The decoded confinement is this child's own copy; the flags are never sent (confinement.hpp).
    if ((*decoded)->spec.confinement == &(*decoded)->confinement &&
        bounding.same_as((*decoded)->confinement))
        (*decoded)->confinement.bounding_set_dropped = true;
    if (filter_installed) {
        // corrald hands it only a command confined by the same filter (launch_waiting): another
        // one would be stacked on it, and the command refused what its own policy allows.
        if ((*decoded)->spec.confinement != &(*decoded)->confinement ||
            !same_filter(spec.confinement, (*decoded)->confinement)) {
            write_failure_report(report.get(), "seccomp: not the filter installed ahead", EPROTO);
            ::_exit(127);
        }
        (*decoded)->confinement.seccomp_installed = true;
    }
    ::close(go);
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof none);
    launcher_internal::become_command((*decoded)->spec, report.release());
}

/// Whether the child said it entered its session (and nothing else came first: a failure report
/// is longer than one byte); the listener of the filter it installed ahead, if one came along, in
/// `listener`. Never waits.
bool entered(int go, UniqueFd& listener) {
    char bytes[2];
    iovec iov{bytes, sizeof bytes};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    // Room for more than the one it may send: every descriptor that came is ours to close.
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = ::recvmsg(go, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return false;
    std::vector<UniqueFd> came;
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
         header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int fd = -1;
            std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
            came.emplace_back(fd);
        }
    }
    // The word and at most one descriptor, whole: anything else is not a child that entered.
    if (n != 1 || bytes[0] != kEntered || (message.msg_flags & MSG_CTRUNC) != 0 || came.size() > 1)
        return false;
    if (!came.empty()) listener = std::move(came.front());
    return true;
}

/// A call the waiting child may make once its filter is installed, with the arguments it is known
/// to make it with (the rest may be anything).
struct CallAfterFilter {
    const char* name;
    std::array<std::optional<uint64_t>, 6> args{};
};

/// The calls the waiting child may make once its filter is installed (wait_for_command's rest and
/// become_command, until execve): receiving its command and its allocations, the descriptors' and
/// the terminal's set-up (/dev/null for a stdin it was not given: openat(AT_FDCWD, path, O_RDONLY |
/// O_CLOEXEC | O_NOCTTY), which is how glibc's open() calls it; AT_FDCWD's upper half is glibc's to
/// choose, so the directory is not taken as known), the rest of its confinement, its reports and
/// its exit. A filter goes ahead only where it allows each of them whatever the unknown arguments;
/// a policy that refuses or conditions any (a `deny: [chdir]`) has its filter installed at the
/// command, as before. No setsid: the child is in a session of its own from its birth
/// (launcher.cpp, enter_session).
const CallAfterFilter kCallsAfterFilterAhead[] = {
    {"sendmsg"}, {"sendto"}, {"recvmsg"}, {"recvfrom"}, {"poll"}, {"ppoll"},
    {"clock_gettime"}, {"read"}, {"write"}, {"close"}, {"close_range"}, {"fcntl"}, {"dup"},
    {"dup2"}, {"dup3"}, {"brk"}, {"mmap"}, {"munmap"}, {"mremap"}, {"mprotect"}, {"madvise"},
    {"prctl"}, {"rt_sigprocmask"}, {"ioctl"}, {"chdir"}, {"prlimit64"}, {"capget"},
    {"capset"}, {"setgroups"}, {"setresgid"}, {"setresuid"}, {"landlock_restrict_self"},
    {"execve"}, {"exit_group"}, {"exit"},
    {"openat",
     {std::nullopt, std::nullopt, uint64_t{O_RDONLY | O_CLOEXEC | O_NOCTTY}, uint64_t{0}}}};

}  // namespace

std::vector<std::string> calls_after_filter_ahead() {
    std::vector<std::string> names;
    for (const auto& call : kCallsAfterFilterAhead) names.emplace_back(call.name);
    return names;
}

bool filter_may_go_ahead(const Confinement& c) {
    if (c.seccomp_filter.empty()) return false;
    for (const auto& after : kCallsAfterFilterAhead) {
        const KnownCall call{resolve_syscall(after.name), after.args};
        if (call.nr < 0) return false;
        for (const auto* program : {&c.seccomp_filter, &c.seccomp_notifying_filter})
            if (!program->empty() && !allows_call(*program, call)) return false;
    }
    return true;
}

LaunchSpec ahead_part(const LaunchSpec& spec, Confinement& ahead) {
    LaunchSpec part;
    part.cgroup_fd = spec.cgroup_fd;
    part.v1_join_fds = spec.v1_join_fds;
    part.namespace_holder_pidfd = spec.namespace_holder_pidfd;
    part.namespace_flags = spec.namespace_flags;
    part.new_session = true;  // made as it enters: launch_waiting() takes no command without one
    part.stdout_fd = -1;
    part.stderr_fd = -1;
    const Confinement* c = spec.confinement;
    if (c == nullptr) return part;
    ahead = Confinement{};
    ahead.drop_capabilities = c->drop_capabilities;  // the bounding set, if it drops one
    ahead.keep_capabilities = c->keep_capabilities;
    ahead.last_capability = c->last_capability;
    ahead.no_new_privs = false;  // set by the waiting child only with a filter
    if (filter_may_go_ahead(*c)) {
        ahead.seccomp_filter = c->seccomp_filter;
        ahead.seccomp_notifying_filter = c->seccomp_notifying_filter;
    }
    if (ahead.drop_capabilities || !ahead.seccomp_filter.empty()) part.confinement = &ahead;
    return part;
}

uint64_t seccomp_fingerprint(const Confinement* c) {
    if (c == nullptr || c->seccomp_filter.empty()) return 0;
    uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over both programs' bytes
    auto add = [&hash](const std::vector<sock_filter>& program) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(program.data());
        for (size_t i = 0; i < program.size() * sizeof(sock_filter); ++i)
            hash = (hash ^ bytes[i]) * 0x100000001b3ull;
        hash = (hash ^ 0xff) * 0x100000001b3ull;  // where one ends
    };
    add(c->seccomp_filter);
    add(c->seccomp_notifying_filter);
    return hash == 0 ? 1 : hash;
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
    // It made its session when it entered (enter_session, as ahead_part() asks): a command that
    // must stay in its caller's cannot be it.
    if (!spec.new_session) return std::nullopt;
    // Gone already (its pidfd is readable once it exited), or not (yet) in its session.
    pollfd exited{waiting.child.pidfd(), POLLIN, 0};
    if (exited.fd < 0 || ::poll(&exited, 1, 0) != 0) return std::nullopt;
    // Its filter, installed while it waited, must be the command's: the child could not take
    // another one off (and would refuse it).
    if (waiting.filter_ahead != 0 && waiting.filter_ahead != seccomp_fingerprint(spec.confinement))
        return std::nullopt;
    // Its notifying filter's refusals wait for an answer from the listener it sent: a command
    // nobody counts refusals for would have them answered ENOSYS, not its policy's errno.
    if (waiting.filter_ahead != 0 && !spec.confinement->seccomp_notifying_filter.empty() &&
        !launcher_internal::hands_over_listener(spec))
        return std::nullopt;
    if (!entered(waiting.go.get(), waiting.listener)) return std::nullopt;
    const LaunchSpec rest = command_part(spec);  // the session's part is the child's already
    // With its filter installed ahead, its listener (if any) came with kEntered: none will come
    // on the report channel.
    const bool listener =
        waiting.filter_ahead == 0 && launcher_internal::hands_over_listener(rest);
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
    pending.listener = std::move(waiting.listener);
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
