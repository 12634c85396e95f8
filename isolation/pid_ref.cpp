// pidfd-based signalling and waiting.
#include "isolation/pid_ref.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <string_view>

namespace corral {
namespace {

WaitStatus to_wait_status(const siginfo_t& info) {
    WaitStatus status;
    status.exited = info.si_code == CLD_EXITED;
    status.code = info.si_status;
    status.core_dumped = info.si_code == CLD_DUMPED;
    return status;
}

/// waitid on the pidfd (or the pid when we hold no pidfd); retries EINTR.
Result<siginfo_t> wait_child(pid_t pid, int pidfd, int options) {
    siginfo_t info{};
    idtype_t type = pidfd >= 0 ? P_PIDFD : P_PID;
    id_t id = pidfd >= 0 ? static_cast<id_t>(pidfd) : static_cast<id_t>(pid);
    while (::waitid(type, id, &info, options) != 0) {
        if (errno != EINTR) return sys_error("waitid pid " + std::to_string(pid));
    }
    return info;
}

}  // namespace

Status PidRef::send_signal(int signal) const {
    if (pidfd_.valid()) {
        if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), signal, nullptr, 0) != 0)
            return sys_error("pidfd_send_signal pid " + std::to_string(pid_));
        return {};
    }
    if (pid_ <= 0) return plain_error("signal: empty process reference");
    if (::kill(pid_, signal) != 0) return sys_error("kill pid " + std::to_string(pid_));
    return {};
}

Result<WaitStatus> PidRef::wait() const {
    auto info = wait_child(pid_, pidfd_.get(), WEXITED);
    if (!info) return std::move(info.error());
    return to_wait_status(*info);
}

Result<std::optional<WaitStatus>> PidRef::try_wait() const {
    auto info = wait_child(pid_, pidfd_.get(), WEXITED | WNOHANG);
    if (!info) return std::move(info.error());
    if (info->si_pid == 0) return std::optional<WaitStatus>{};
    return std::optional<WaitStatus>{to_wait_status(*info)};
}

Result<uint64_t> process_start_ticks(pid_t pid) {
    return process_stat_field(pid, 22);
}

// Read on every launch (the start ticks a journalled process is recognised by after a restart), so
// with one read into a stack buffer and no stream: an ifstream, a getline and an istringstream
// were 8 % of corrald's CPU in a profile of back-to-back `default` runs (issue 18).
Result<uint64_t> process_stat_field(pid_t pid, int wanted) {
    if (pid <= 0) return sys_error(ESRCH, "no pid");
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sys_error(ESRCH, "pid " + std::to_string(pid));
    // 52 fields of at most 20 digits and a comm of at most 64 bytes: well under 2 KiB.
    char line[2048];
    ssize_t n;
    do {
        n = ::read(fd, line, sizeof line - 1);
    } while (n < 0 && errno == EINTR);
    ::close(fd);
    if (n <= 0) return sys_error(ESRCH, "pid " + std::to_string(pid));
    const std::string_view text(line, static_cast<size_t>(n));
    // comm (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    const size_t close = text.rfind(')');
    if (wanted < 3 || close == std::string_view::npos || close + 2 > text.size())
        return sys_error(EINVAL, path);
    size_t at = close + 2;  // field 3, the first after comm
    for (int field = 3; field < wanted; ++field) {
        at = text.find(' ', at);
        if (at == std::string_view::npos) return sys_error(EINVAL, path);
        ++at;
    }
    uint64_t value = 0;
    const char* end = text.data() + text.size();
    auto [stop, error] = std::from_chars(text.data() + at, end, value);
    if (error != std::errc() || (stop != end && *stop != ' ' && *stop != '\n'))
        return sys_error(EINVAL, path);
    return value;
}

bool pidfd_exited(int pidfd) {
    pollfd ready{pidfd, POLLIN, 0};
    return ::poll(&ready, 1, 0) > 0 && (ready.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

Result<PidRef> open_verified_process(pid_t pid, uint64_t start_ticks,
                                     const std::string& cgroup_dir) {
    const std::string who = "pid " + std::to_string(pid);
    if (pid <= 1) return sys_error(EINVAL, who + " is not one a daemon starts");
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return sys_error("pidfd_open " + who);
    UniqueFd pidfd(fd);
    auto started = process_start_ticks(pid);
    if (!started) return std::move(started.error());
    if (*started != start_ticks)
        return sys_error(ESRCH, who + " started at tick " + std::to_string(*started) +
                                    ", not " + std::to_string(start_ticks) +
                                    ": the pid was reused by another process");
    std::ifstream procs(cgroup_dir + "/cgroup.procs");
    bool member = false;
    for (pid_t listed; procs >> listed;) member = member || listed == pid;
    if (!member) return sys_error(EPERM, who + " is not in `" + cgroup_dir + "`");
    if (pidfd_exited(pidfd.get())) return sys_error(ESRCH, who + " exited meanwhile");
    return PidRef(pid, std::move(pidfd));
}

}  // namespace corral
