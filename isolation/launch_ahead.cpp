// A session's first process started ahead (launch_ahead.hpp): the waiting child's side and
// corrald's hand-over.
#include "isolation/launch_ahead.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "base/pipe.hpp"
#include "isolation/child_report.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launcher_internal.hpp"

namespace corral {
namespace {

constexpr const char* kWaiting = "waiting launch";

/// The waiting child, once in its session: keeps nothing but `go` (the session's descriptors were
/// for entering it), waits for its command, and becomes it. corrald's end closing is the end.
[[noreturn]] void wait_for_command(int go) noexcept {
    if (go > 3) ::close_range(3, static_cast<unsigned>(go) - 1, 0);
    ::close_range(static_cast<unsigned>(go) + 1, ~0U, 0);
    auto message = receive_passing(go, kWaiting);
    if (!message) ::_exit(0);  // corrald gave it up, or is gone
    // The report channel's write end comes last, after the spec's descriptors.
    if (message->fds.empty()) ::_exit(127);
    UniqueFd report = std::move(message->fds.back());
    message->fds.pop_back();
    auto decoded = decode_launch(message->bytes, std::move(message->fds));
    if (!decoded) {
        write_failure_report(report.get(), "read the launch (started ahead)", EPROTO);
        ::_exit(127);
    }
    ::close(go);
    launcher_internal::become_command((*decoded)->spec, report.release());
}

/// A report channel as launch_begin() makes it: a pipe, or a socket pair when the listener
/// crosses it.
Result<Pipe> report_channel(bool socket) {
    if (!socket) return make_pipe();
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        return sys_error("socketpair for the child's report");
    return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace

Result<WaitingLaunch> start_waiting_launch(const LaunchSpec& spec) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return sys_error("socketpair for a launch ahead");
    UniqueFd ours(pair[0]), theirs(pair[1]);
    auto child = launcher_internal::start_session_child(spec, theirs.get(), wait_for_command);
    if (!child) return std::move(child.error());
    return WaitingLaunch{std::move(*child), std::move(ours)};
}

std::optional<Result<PendingLaunch>> launch_waiting(WaitingLaunch& waiting,
                                                    const LaunchSpec& spec) {
    if (!waiting.go.valid() || !waiting.child.valid()) return std::nullopt;
    // Gone already (its pidfd is readable once it exited): nothing to hand over.
    pollfd exited{waiting.child.pidfd(), POLLIN, 0};
    if (exited.fd >= 0 && ::poll(&exited, 1, 0) == 1) return std::nullopt;
    // The session's part is the child's already.
    LaunchSpec rest = spec;
    rest.cgroup_fd = -1;
    rest.v1_join_fds.clear();
    rest.namespace_holder_pidfd = -1;
    rest.namespace_flags = 0;
    const bool listener = launcher_internal::hands_over_listener(rest);
    auto channel = report_channel(listener);
    if (!channel) return Result<PendingLaunch>(std::move(channel.error()));
    std::vector<int> fds = launch_descriptors(rest);
    auto bytes = encode_launch(rest, fds);
    if (!bytes) return Result<PendingLaunch>(std::move(bytes.error()));
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
    return Result<PendingLaunch>(std::move(pending));
}

}  // namespace corral
