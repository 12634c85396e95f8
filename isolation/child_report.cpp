#include "isolation/child_report.hpp"

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace

void write_failure_report(int fd, const char* step, int error) noexcept {
    ChildReport report;
    report.kind = ChildReport::failure;
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
