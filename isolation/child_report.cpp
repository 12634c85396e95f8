#include "isolation/child_report.hpp"

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace corral {
namespace {

void write_all(int fd, const ChildReport& report) noexcept {
    const char* data = reinterpret_cast<const char*>(&report);
    size_t left = sizeof report;
    while (left > 0) {
        ssize_t n = ::write(fd, data, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        data += n;
        left -= static_cast<size_t>(n);
    }
}

/// One report and room for one descriptor, as a msghdr (no allocation: the child sends it).
struct ReportMessage {
    explicit ReportMessage(ChildReport& report) : data{&report, sizeof report} {
        message.msg_iov = &data;
        message.msg_iovlen = 1;
        message.msg_control = control;
        message.msg_controllen = sizeof control;
    }
    ReportMessage(const ReportMessage&) = delete;
    ReportMessage& operator=(const ReportMessage&) = delete;
    iovec data;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr message{};
};

}  // namespace

void write_failure_report(int fd, const char* step, int error, ChildReport::Kind kind) noexcept {
    ChildReport report;
    report.kind = kind;
    report.error = error;
    size_t i = 0;
    for (; step != nullptr && step[i] != '\0' && i + 1 < sizeof report.step; ++i)
        report.step[i] = step[i];
    report.step[i] = '\0';
    write_all(fd, report);
}

void write_report(int fd, ChildReport::Kind kind, pid_t pid) noexcept {
    ChildReport report;
    report.kind = kind;
    report.pid = pid;
    write_all(fd, report);
}

Result<std::optional<ChildReport>> read_report(int fd) {
    ChildReport report;
    char* data = reinterpret_cast<char*>(&report);
    size_t got = 0;
    while (got < sizeof report) {
        ssize_t n = ::read(fd, data + got, sizeof report - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("read child report");
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    if (got == 0) return std::optional<ChildReport>{};
    if (got != sizeof report) return plain_error("truncated child report");
    report.step[sizeof report.step - 1] = '\0';
    return std::optional<ChildReport>{report};
}

bool write_listener_report(int socket, int listener) noexcept {
    ChildReport report;
    report.kind = ChildReport::listener;
    ReportMessage envelope(report);
    msghdr& message = envelope.message;
    cmsghdr* rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(rights), &listener, sizeof(int));
    ssize_t n;
    do {
        n = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(sizeof report);
}

Result<std::optional<ChildReport>> read_report_with_fd(int socket, UniqueFd& received) {
    ChildReport report;
    ReportMessage envelope(report);
    msghdr& message = envelope.message;
    ssize_t n;
    do {
        n = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return sys_error("read child report");
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int))) {
            int fd = -1;
            std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
            received.reset(fd);
        }
    }
    if (n == 0) return std::optional<ChildReport>{};
    if (n != static_cast<ssize_t>(sizeof report) || (message.msg_flags & MSG_CTRUNC))
        return plain_error("truncated child report");
    report.step[sizeof report.step - 1] = '\0';
    return std::optional<ChildReport>{report};
}

pid_t clone3_fork(uint64_t flags, int cgroup_fd, int* pidfd) noexcept {
    clone_args args{};
    args.flags = flags;
    args.exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD;
    if (flags & CLONE_PIDFD) args.pidfd = reinterpret_cast<uintptr_t>(pidfd);
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<uint64_t>(cgroup_fd);
    }
    return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

}  // namespace corral
