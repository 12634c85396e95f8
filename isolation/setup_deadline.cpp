#include "isolation/setup_deadline.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "base/file_io.hpp"

namespace corral {

SetupDeadline::SetupDeadline(std::chrono::milliseconds limit, pid_t pid,
                             std::chrono::milliseconds ceiling)
    : SetupDeadline(limit, pid, ceiling, process_cpu_ns(pid)) {}

SetupDeadline::SetupDeadline(std::chrono::milliseconds limit, pid_t pid,
                             std::chrono::milliseconds ceiling, std::optional<uint64_t> cpu_ns)
    : limit_(limit),
      ceiling_(std::max(ceiling, limit)),
      pid_(pid),
      began_(std::chrono::steady_clock::now()),
      deadline_(began_ + limit),
      cpu_ns_(cpu_ns) {}

SetupDeadline SetupDeadline::from_cpu(std::chrono::milliseconds limit, pid_t pid, uint64_t cpu_ns) {
    return SetupDeadline(limit, pid, kSetupReportCeiling, cpu_ns);
}

int SetupDeadline::poll_timeout() const {
    if (!limit_) return -1;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT32_MAX));
}

bool SetupDeadline::expired() {
    if (!limit_) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now < deadline_) return false;  // poll woke early (ceil above makes this rare)
    const std::optional<uint64_t> cpu = process_cpu_ns(pid_);
    const bool progressed = cpu && cpu_ns_ && *cpu > *cpu_ns_;
    if (!progressed || now - began_ >= ceiling_) return true;
    cpu_ns_ = cpu;
    deadline_ = std::min(now + *limit_, began_ + ceiling_);
    return false;
}

std::string SetupDeadline::describe() const {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - began_);
    return "within " + std::to_string(limit_->count()) + " ms in which it used no CPU (waited " +
           std::to_string(waited.count()) + " ms; at most " + std::to_string(ceiling_.count()) +
           " ms in all)";
}

std::optional<uint64_t> process_cpu_ns(pid_t pid) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/schedstat");
    if (!text) return std::nullopt;
    try {
        return std::stoull(*text);
    } catch (...) {
        return std::nullopt;
    }
}

Status await_report(int fd, SetupDeadline& deadline, const char* what) {
    for (;;) {
        pollfd ready{fd, POLLIN, 0};
        const int n = ::poll(&ready, 1, deadline.poll_timeout());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error(std::string("poll ") + what);
        if (n > 0) return {};
        if (deadline.expired())
            return sys_error(ETIMEDOUT, std::string(what) + " did not come " + deadline.describe());
    }
}

}  // namespace corral
