// A process's way from clone to execve, watched on the event loop (issue 12 item 1).
//
// The child reports over a channel that ends (EOF) when it exec's: a setup failure (step and
// errno) or, with refusals counted, its seccomp listener comes first. corrald's loop must not
// wait for that: a same-session process can stop the child before execve (it is in the session's
// pid and user namespaces by then), and a loop that waited would hold every session's API for as
// long as the stop lasts. So the channel is watched like any pipe, the deadline of a child that
// makes no progress (setup_deadline.hpp) is a timer, and whoever needs the outcome (a spawn's
// answer) waits for it through wait_launched(). Meanwhile the record is an ordinary running one:
// its pipes, its exit watch and its command timeout are armed from the start, so a stop, a
// timeout or the session's end during the launch works as for any process.
#include <fcntl.h>

#include <cerrno>
#include <csignal>

#include "sessions/process.hpp"

namespace corral {

void Process::watch_launch() {
    if (!launching()) return;  // settled, final, or known to have exec'd at launch
    if (!launch_watch_.is_open()) {
        const int duplicate = ::fcntl(pending_launch_->report.get(), F_DUPFD_CLOEXEC, 0);
        if (duplicate < 0) {
            launch_failed(sys_error("watch the child's report"));
            return;
        }
        // Never a wait, whoever else might hold the channel: nothing there yet reads EAGAIN.
        const int flags = ::fcntl(duplicate, F_GETFL);
        if (flags >= 0) (void)::fcntl(duplicate, F_SETFL, flags | O_NONBLOCK);
        launch_watch_.assign(duplicate);
        arm_launch_deadline();
    }
    launch_watch_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                             [self = shared_from_this()](const boost::system::error_code& error) {
                                 if (error) return;  // settled, or shut down
                                 self->on_launch_report();
                             });
}

void Process::on_launch_report() {
    if (!pending_launch_ || !launch_watch_.is_open()) return;
    auto executed = read_launch_report(*pending_launch_, refusals_.get());
    if (!executed && executed.error().code == EAGAIN) {
        watch_launch();  // woken with nothing there: wait again
        return;
    }
    if (!executed) {
        launch_failed(executed.error());
        return;
    }
    if (!*executed) {
        // Its listener came: the calls it refuses from now on, before execve too, are answered
        // by the loop (or it would wait for ever).
        watch_refusals();
        watch_launch();
        return;
    }
    launch_settled();
}

// The child has exited, so every writer of the channel is gone and reading never waits: a
// failure it reported just before it exited is read before its exit status is recorded, which
// would otherwise say "exited 127" where the record should name the step.
void Process::settle_launch_at_exit() {
    if (!pending_launch_ || !launch_watch_.is_open()) return;
    for (int report = 0; report < 2 && launch_watch_.is_open(); ++report) {
        auto executed = read_launch_report(*pending_launch_, refusals_.get());
        if (!executed && executed.error().code == EAGAIN) {
            launch_settled();  // nothing it reported: its exit status is the record
        } else if (!executed) {
            launch_failed(executed.error());
        } else if (*executed) {
            launch_settled();
        }
    }
}

// SetupDeadline's rule on a timer: a child that used no CPU during a whole limit (stopped,
// frozen) is killed; one that ran gets another limit, up to the ceiling.
void Process::arm_launch_deadline() {
    launch_deadline_ = waiting_cpu_ns_
                           ? SetupDeadline::from_cpu(kSetupReportLimit, main_.pid(), *waiting_cpu_ns_)
                           : SetupDeadline(kSetupReportLimit, main_.pid());
    arm_launch_timer();
}

void Process::arm_launch_timer() {
    launch_timer_.expires_after(std::chrono::milliseconds(launch_deadline_.poll_timeout()));
    launch_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
        if (error || !self->launching()) return;
        if (!self->launch_deadline_.expired()) {
            self->arm_launch_timer();  // slow but running
            return;
        }
        self->launch_failed(launch_deadline_error(self->launch_deadline_));
    });
}

// The child is exiting with 127 after a failure report, or must be killed (its channel failed,
// or it missed its deadline): SIGKILL through the pidfd either way. The record becomes final on
// the usual path (its exit, its pipes' end), with the failure as its reason; the exit is
// collected through the pidfd, never waited for here.
void Process::launch_failed(const Error& error) {
    boost::system::error_code ignored;
    launch_watch_.close(ignored);
    launch_timer_.cancel();
    if (setup_error_.empty()) {
        setup_error_ = error.describe();
        setup_exit_code_ = exec_failure_exit_code(error);
    }
    if (main_running()) (void)main_.send_signal(SIGKILL);
}

void Process::launch_settled() {
    boost::system::error_code ignored;
    launch_watch_.close(ignored);
    launch_timer_.cancel();
    if (pending_launch_) pending_launch_->report.reset();
    auto waiting = std::move(launch_waiters_);
    launch_waiters_.clear();
    for (auto& [alive, handler] : waiting) post(alive, std::move(handler));
}

std::shared_ptr<bool> Process::wait_launched(std::function<void()> handler) {
    auto alive = std::make_shared<bool>(true);
    if (!launching()) {
        post(alive, std::move(handler));
        return alive;
    }
    launch_waiters_.emplace_back(alive, std::move(handler));
    return alive;
}

}  // namespace corral
