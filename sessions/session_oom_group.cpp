// limits.oom_group: an OOM kill ends every process of the session. cgroup v2 does this in the
// kernel (memory.oom.group); the v1 memory controller of hybrid hosts cannot, so there the
// session watches its limit event fds (the OOM eventfd) and ends itself on the first OOM kill.

#include <fcntl.h>

#include "sessions/session.hpp"

namespace corral {

void Session::watch_oom_group() {
    if (!limits_ || !limits_->supervisor_must_end_session_on_oom()) return;
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
    if (!limits_ || !limits_->supervisor_must_end_session_on_oom()) return;
    if (limits_->read_events().oom_kills == 0) return;
    (void)cgroup_.kill_all();  // together, as memory.oom.group would: no grace period
    end("oom", nullptr);
}

// The v1 OOM notification comes when the cgroup hits OOM, just before the kill is counted, and
// reading the counters drained it: look again a few times shortly after.
void Session::recheck_oom_group(int attempts) {
    if (attempts <= 0) return;
    auto timer = std::make_shared<boost::asio::steady_timer>(context_.io, std::chrono::milliseconds(20));
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
