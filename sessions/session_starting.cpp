// A session's way from its holder's clone to its first request, watched on the event loop
// (issue 12 item 1).
//
// The namespace holder mounts, pivots and brings `lo` up before it reports ready over a channel
// (isolation/sandbox.hpp). corrald's loop must not wait for that report: a holder that is stopped,
// frozen (its cgroup's ancestor frozen) or stuck in a mount would hold every session's API for as
// long as the setup limit (setup_deadline.hpp). So the channel is watched like any pipe, the
// deadline of a holder that makes no progress is a timer, and the creation's answer waits through
// await_ready(). Meanwhile the session is `starting`: not in the registry (its id is reserved
// there), not journalled, taking no work. A failure of any later step is undone on the loop too,
// through the session's own ending (session_ending.cpp: cgroup.kill, populated 0 and the holder's
// exit seen through their descriptors, never a blocking reap), and only then answered, so a failed
// creation has left nothing behind when its error reaches the client.
#include <fcntl.h>

#include <cerrno>

#include "sessions/session.hpp"

namespace corral {

void Session::await_ready(ReadyHandler ready) {
    ready_handler_ = std::move(ready);
    std::weak_ptr<Session> weak = weak_from_this();
    const int report = sandbox_.setup_report_fd();
    if (report < 0) {  // no holder (no namespaces asked for): nothing to wait for
        boost::asio::post(context_.io, [weak] {
            auto self = weak.lock();
            if (self && self->state_ == SessionState::starting) self->complete_start();
        });
        return;
    }
    // A duplicate for asio, made non-blocking (for the original too: they share the open file),
    // so a wake-up with nothing there reads EAGAIN instead of waiting.
    const int duplicate = ::fcntl(report, F_DUPFD_CLOEXEC, 0);
    if (duplicate < 0) {
        Error failed = sys_error("watch the namespace holder's setup report");
        boost::asio::post(context_.io, [weak, failed] {
            if (auto self = weak.lock()) self->fail_start(failed);
        });
        return;
    }
    const int flags = ::fcntl(duplicate, F_GETFL);
    if (flags >= 0) (void)::fcntl(duplicate, F_SETFL, flags | O_NONBLOCK);
    holder_report_watch_.assign(duplicate);
    holder_deadline_ = SetupDeadline(kSetupReportLimit, sandbox_.holder_pid());
    arm_holder_deadline();
    watch_holder_report();
}

void Session::abort_start(Error why) {
    fail_start(std::move(why));
}

void Session::watch_holder_report() {
    std::weak_ptr<Session> weak = weak_from_this();
    holder_report_watch_.async_wait(
        boost::asio::posix::descriptor_base::wait_read,
        [weak](const boost::system::error_code& error) {
            auto self = weak.lock();
            if (error || !self || self->state_ != SessionState::starting)
                return;  // settled, or gone
            self->on_holder_report();
        });
}

void Session::on_holder_report() {
    Status ready = sandbox_.read_setup_report();
    if (!ready && ready.error().code == EAGAIN) {
        watch_holder_report();  // woken with nothing there: wait again
        return;
    }
    if (!ready) {
        fail_start(std::move(ready.error().context("namespaces").context("set up")));
        return;
    }
    complete_start();
}

// SetupDeadline's rule on a timer: a holder that used no CPU during a whole limit (stopped,
// frozen) is killed; one that ran gets another limit, up to the ceiling.
void Session::arm_holder_deadline() {
    holder_timer_.expires_after(std::chrono::milliseconds(holder_deadline_.poll_timeout()));
    std::weak_ptr<Session> weak = weak_from_this();
    holder_timer_.async_wait([weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (error || !self || self->state_ != SessionState::starting ||
            self->sandbox_.setup_report_fd() < 0)
            return;
        if (!self->holder_deadline_.expired()) {
            self->arm_holder_deadline();  // slow but running
            return;
        }
        self->fail_start(std::move(Sandbox::setup_deadline_error(self->holder_deadline_)
                                       .context("namespaces")
                                       .context("set up")));
    });
}

void Session::stop_holder_watch() {
    boost::system::error_code ignored;
    holder_report_watch_.close(ignored);
    holder_timer_.cancel();
}

// The holder is ready: the rest is quick (no process is waited for), then the session is
// journalled before its id and tokens reach anyone, as create() does.
void Session::complete_start() {
    if (state_ != SessionState::starting || !start_request_) return;
    stop_holder_watch();
    if (prepared_) {
        complete_preparation();
        return;
    }
    Status built = build_after_holder(*start_request_);
    if (built) {
        journalled_ = true;  // even a failed append may have left part of a record
        built = journal_session();
    }
    if (!built) {
        fail_start(std::move(built.error()));
        return;
    }
    start_request_.reset();
    state_ = SessionState::active;
    arm_session_timer();
    arm_idle_timer();
    auto ready = std::move(ready_handler_);
    ready_handler_ = nullptr;
    if (ready) ready(Status{});
}

// Everything made so far is ended as any session is, on the loop: the holder (killed through its
// pidfd at once, its exit collected through it), the cgroups, limits, network, ports and the
// directory. The creator hears of the failure once that is done.
void Session::fail_start(Error error) {
    if (state_ != SessionState::starting) return;
    stop_holder_watch();
    start_request_.reset();
    sandbox_.begin_stop();
    on_ended_ = nullptr;  // never a session to the registry: no retention, no tombstone
    auto ready = std::make_shared<ReadyHandler>(std::move(ready_handler_));
    ready_handler_ = nullptr;
    error.context("create session " + id_);
    end("setup-failed", [ready, error](Result<EndSessionReport>) {
        if (*ready) (*ready)(error);
    });
}

}  // namespace corral
