// pidfd-based signalling and waiting.
#include "isolation/pid_ref.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace corral
