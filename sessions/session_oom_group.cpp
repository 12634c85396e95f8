// limits.oom_group: an OOM kill ends the session. cgroup v2 kills every process of the session in
// the kernel (memory.oom.group); the v1 memory controller of hybrid hosts cannot, so there we
// kill them. On both layouts the session watches its limit event fds (v2 memory.events, the v1
// OOM eventfd) and, on the first OOM kill, ends itself with reason `oom`: the processes being
// gone is not the end of a session, only the supervisor ending it is.

#include <fcntl.h>

#include "sessions/session.hpp"

namespace corral {
namespace {

/// Whether an OOM kill ends the session: the policy asks for it and limits were applied.
bool oom_group_asked(const std::unique_ptr<SessionLimits>& limits, const Policy& policy) {
    return limits && policy.limits.oom_group;
}

}  // namespace

void Session::watch_oom_group() {
    if (!oom_group_asked(limits_, policy_)) return;
    for (int fd : limits_->event_fds()) {
        // The descriptor owns a duplicate: the limits object keeps (and closes) its own.
        int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0) continue;
        auto watcher = std::make_shared<boost::asio::posix::stream_descriptor>(context_.io, copy);
        oom_watchers_.push_back(watcher);
        arm_oom_watcher(std::move(watcher));
    }
}

void Session::arm_oom_watcher(std::shared_ptr<boost::asio::posix::stream_descriptor> watcher) {
    std::weak_ptr<Session> weak = weak_from_this();
    watcher->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                        [weak, watcher](const boost::system::error_code& error) {
                            auto self = weak.lock();
                            if (error || !self || self->state_ != SessionState::active) return;
                            self->end_if_oom_group_hit();
                            if (self->state_ != SessionState::active) return;
                            self->arm_oom_watcher(watcher);
                            self->recheck_oom_group(50);
                        });
}

// Also called when a process finishes: reading the counters drains the event fds, so whoever
// reads first must act. The counters themselves are cumulative and never lost.
void Session::end_if_oom_group_hit() {
    if (!oom_group_asked(limits_, policy_)) return;
    if (limits_->read_events().oom_kills == 0) return;
    // v1: together, as memory.oom.group would, no grace period. v2: the kernel has done it.
    if (limits_->supervisor_must_end_session_on_oom()) (void)cgroup_.kill_all();
    end("oom", nullptr);
}

// The v1 OOM notification comes when the cgroup hits OOM, just before the kill is counted, and
// reading the counters drained it: look again a few times shortly after.
void Session::recheck_oom_group(int attempts) {
    if (attempts <= 0) return;
    auto timer =
        std::make_shared<boost::asio::steady_timer>(context_.io, std::chrono::milliseconds(20));
    std::weak_ptr<Session> weak = weak_from_this();
    timer->async_wait([weak, timer, attempts](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (error || !self || self->state_ != SessionState::active) return;
        self->end_if_oom_group_hit();
        if (self->state_ == SessionState::active) self->recheck_oom_group(attempts - 1);
    });
}

void Session::stop_oom_watch() {
    for (auto& watcher : oom_watchers_) {
        boost::system::error_code ignored;
        watcher->cancel(ignored);
        watcher->close(ignored);
    }
    oom_watchers_.clear();
}

}  // namespace corral
