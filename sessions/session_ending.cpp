// Ending a session without blocking the event loop:
//   SIGTERM to every process leaf -> grace (a timer, cut short when every leaf is empty, watched
//   with POLLPRI on cgroup.events) -> cgroup.kill on the whole session (holder included) -> wait
//   for populated 0 (POLLPRI again) -> stop the holder -> every process record final -> remove
//   cgroups, release ports, remove the state directory -> report.
// The holder is not sent SIGTERM: as PID 1 of a pid namespace its death would SIGKILL everything
// at once and skip the grace period.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>

#include <csignal>

#include "sessions/child_reaper.hpp"
#include "sessions/network/session_network.hpp"
#include "sessions/session.hpp"
#include "sessions/recovery/session_journal.hpp"

namespace corral {
namespace {

// Upper bound for "populated 0" after cgroup.kill and for records to become final; reaching it
// means something is stuck in the kernel (D state), and the session is torn down anyway.
constexpr std::chrono::seconds kKillBound{10};

/// A session's limit cgroups that could not all be removed at once (hybrid v1: a killed task
/// still exiting, which v1 does not announce): tried again on a timer, every 10 ms for 2 s and
/// then every second for as long as the daemon runs, never waited for on the loop. Should the
/// loop stop first, destroying the limits removes the rest with a bounded wait (no loop then).
class LimitsRetirement : public std::enable_shared_from_this<LimitsRetirement> {
  public:
    LimitsRetirement(boost::asio::io_context& io, std::unique_ptr<SessionLimits> limits)
        : timer_(io), limits_(std::move(limits)) {}

    void try_again_later() {
        constexpr int kQuickAttempts = 200;
        timer_.expires_after(attempts_ < kQuickAttempts ? std::chrono::milliseconds(10)
                                                        : std::chrono::milliseconds(1000));
        timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
            if (error) return;
            ++self->attempts_;
            if (!self->limits_->try_remove_cgroups()) self->try_again_later();
        });
    }

  private:
    boost::asio::steady_timer timer_;
    std::unique_ptr<SessionLimits> limits_;
    int attempts_ = 0;
};

void retire_limits(boost::asio::io_context& io, std::unique_ptr<SessionLimits> limits) {
    if (!limits || limits->try_remove_cgroups()) return;
    std::make_shared<LimitsRetirement>(io, std::move(limits))->try_again_later();
}

}  // namespace

void Session::end(std::string reason, EndHandler handler) {
    if (state_ == SessionState::ended) {
        EndSessionReport report = report_;
        report.already_ended = true;
        if (handler) {
            boost::asio::post(context_.io,
                              [handler = std::move(handler), report] { handler(report); });
        }
        return;
    }
    if (state_ == SessionState::ending) {
        if (handler) end_handlers_.emplace_back(std::move(handler), true);
        return;
    }
    state_ = SessionState::ending;
    end_reason_ = std::move(reason);
    end_started_ = std::chrono::steady_clock::now();
    // A session that never started (its holder failed) was never journalled: nothing to record.
    if (context_.journal && journalled_) (void)context_.journal->session_ending(id_, end_reason_);
    if (handler) end_handlers_.emplace_back(std::move(handler), false);
    session_timer_.cancel();
    idle_timer_.cancel();
    stop_oom_watch();

    report_ = EndSessionReport{};
    report_.id = id_;
    report_.end_reason = end_reason_;
    for (const auto& process : processes()) {
        if (process->main_running()) report_.killed_process_ids.push_back(process->id());
        if (process->leaf().valid()) {
            if (auto pids = process->leaf().pids()) report_.processes_killed += pids->size();
        }
        process->terminate();
    }
    begin_grace();
}

void Session::begin_grace() {
    end_timer_.expires_after(policy_.timeouts.grace);
    std::weak_ptr<Session> weak = weak_from_this();
    end_timer_.async_wait([weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (!error && self) self->after_grace();
    });
    watch_leaves_during_grace();
}

// One cgroup.events watch per populated process leaf; any change re-checks all of them, and the
// grace period ends early once none is populated.
void Session::watch_leaves_during_grace() {
    if (grace_over_) return;
    end_watches_.clear();
    for (const auto& process : processes()) {
        if (!process->leaf_populated()) continue;
        auto fd = process->leaf().watch_events();
        if (!fd) continue;
        end_watches_.push_back(
            std::make_unique<boost::asio::posix::stream_descriptor>(context_.io, fd->release()));
    }
    // Re-check after arming, so an exit between the check and the watch is not missed.
    bool any_populated = false;
    for (const auto& process : processes())
        any_populated = any_populated || process->leaf_populated();
    std::weak_ptr<Session> weak = weak_from_this();
    if (!any_populated) {
        end_watches_.clear();
        boost::asio::post(context_.io, [weak] {
            if (auto self = weak.lock()) self->after_grace();
        });
        return;
    }
    for (auto& watch : end_watches_) {
        watch->async_wait(boost::asio::posix::descriptor_base::wait_error,
                          [weak](const boost::system::error_code& error) {
                              auto self = weak.lock();
                              if (error || !self || self->state_ != SessionState::ending) return;
                              self->watch_leaves_during_grace();  // fresh watches, no draining
                          });
    }
}

void Session::after_grace() {
    if (grace_over_) return;
    grace_over_ = true;
    end_watches_.clear();
    end_timer_.cancel();
    // Before the holder is asked to go: as PID 1 its exit waits until every process of its pid
    // namespace is reaped, and a p1 that waited for nothing is ours to reap (launch_ahead.hpp).
    end_first_launch();
    if (cgroup_.valid()) (void)cgroup_.kill_all();
    end_timer_.expires_after(kKillBound);
    std::weak_ptr<Session> weak = weak_from_this();
    end_timer_.async_wait([weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (!error && self && !self->empty_reached_) self->after_empty();
    });
    watch_until_empty();
}

void Session::watch_until_empty() {
    if (!cgroup_.valid()) {
        after_empty();
        return;
    }
    auto fd = cgroup_.watch_events();
    auto populated = cgroup_.populated();
    if (!fd || !populated || !*populated) {
        after_empty();
        return;
    }
    end_watches_.clear();
    end_watches_.push_back(
        std::make_unique<boost::asio::posix::stream_descriptor>(context_.io, fd->release()));
    std::weak_ptr<Session> weak = weak_from_this();
    auto recheck = [weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (error || !self || self->empty_reached_) return;
        self->watch_until_empty();
    };
    end_watches_.back()->async_wait(boost::asio::posix::descriptor_base::wait_error, recheck);
    // The kernel sends cgroup.events notifications at most every ~10 ms per file, so the one for
    // "populated 0" often comes that much late. The holder's exit is seen at once through its
    // pidfd, and as PID 1 it goes last: with a pid namespace that is the session emptying.
    if (sandbox_.active()) {
        int holder = ::fcntl(sandbox_.holder_pidfd(), F_DUPFD_CLOEXEC, 0);
        if (holder >= 0) {
            end_watches_.push_back(
                std::make_unique<boost::asio::posix::stream_descriptor>(context_.io, holder));
            end_watches_.back()->async_wait(boost::asio::posix::descriptor_base::wait_read,
                                            recheck);
        }
    }
}

void Session::after_empty() {
    if (empty_reached_) return;
    empty_reached_ = true;
    end_watches_.clear();
    stop_network();
    paths_ = PathSpace{};  // its fd of the sandbox's root would pin the namespace's mounts
    await_holder_exit();
}

// The holder goes last, and never with a blocking wait (issue 12, the deadlock): as PID 1 of a
// pid namespace its exit waits in the kernel (zap_pid_ns_processes) until every process of the
// namespace is reaped, and the session's main processes are children of the daemon, reaped by
// their pidfd handlers on this very loop. So: SIGKILL, then wait for its pidfd on the loop and
// reap it with WNOHANG. finalize_if_done bounds the wait.
void Session::await_holder_exit() {
    if (sandbox_.active()) {
        const pid_t holder = sandbox_.holder_pid();
        sandbox_.begin_stop();
        if (!sandbox_.try_reap()) {
            const int watch = ::fcntl(sandbox_.holder_pidfd(), F_DUPFD_CLOEXEC, 0);
            if (watch >= 0) {
                end_watches_.push_back(
                    std::make_unique<boost::asio::posix::stream_descriptor>(context_.io, watch));
                std::weak_ptr<Session> weak = weak_from_this();
                end_watches_.back()->async_wait(
                    boost::asio::posix::descriptor_base::wait_read,
                    [weak](const boost::system::error_code& error) {
                        auto self = weak.lock();
                        if (error || !self || self->state_ != SessionState::ending) return;
                        self->await_holder_exit();
                    });
                finalize_if_done();  // arms the bound
                return;
            }
            context_.reaper.hand_over(sandbox_.release());
        } else {
            context_.reaper.remove_owned(holder);
        }
    }
    finalize_if_done();
}

// Records become final as their pidfd and pipe events arrive, and the holder exits once they are
// reaped; the report waits for all of that (bounded by kKillBound) so it tells the truth about
// every process.
void Session::finalize_if_done() {
    if (state_ != SessionState::ending || !empty_reached_) return;
    const auto listed = processes();
    const bool records_final = std::all_of(listed.begin(), listed.end(),
                                           [](const auto& process) { return process->finished(); });
    if (records_final && !sandbox_.active()) {
        finalize();
        return;
    }
    if (final_bound_armed_) return;
    final_bound_armed_ = true;
    end_timer_.expires_after(kKillBound);
    std::weak_ptr<Session> weak = weak_from_this();
    end_timer_.async_wait([weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (!error && self && self->state_ == SessionState::ending) self->finalize();
    });
}

void Session::finalize() {
    if (state_ == SessionState::ended) return;
    end_timer_.cancel();
    if (limits_) {
        final_usage_ = limits_->usage();
    } else if (cgroup_.valid()) {
        if (auto usage = cgroup_.usage()) final_usage_ = *usage;
    }
    release_resources();
    state_ = SessionState::ended;
    if (context_.journal && journalled_) (void)context_.journal->session_ended(id_);
    ended_at_ = std::chrono::system_clock::now();
    report_.duration_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - end_started_)
                                  .count());
    auto handlers = std::move(end_handlers_);
    end_handlers_.clear();
    for (auto& [handler, already_ended] : handlers) {
        EndSessionReport report = report_;
        report.already_ended = already_ended;
        boost::asio::post(context_.io, [handler = std::move(handler), report] { handler(report); });
    }
    if (on_ended_) on_ended_(*this);
}

void Session::end_first_launch() {
    // Killed, and reaped on the loop once its pidfd says it is gone (no wait here).
    if (first_launch_ && first_launch_->child.valid()) {  // p1 never came: it waited for nothing
        (void)first_launch_->child.send_signal(SIGKILL);
        context_.reaper.hand_over(std::move(first_launch_->child));
    }
    first_launch_.reset();
}

// Everything but the records: leaves, holder, cgroups, limit cgroups, ports, the directory.
// Never blocks: once the session cgroup is empty each removal is one rmdir. A subtree still
// populated here (the kill bound passed: a task stuck in the kernel) is left in place rather
// than waited for; the next start's clean-up removes it.
void Session::release_resources() {
    session_timer_.cancel();
    idle_timer_.cancel();
    end_watches_.clear();
    stop_network();
    if (sandbox_.active()) context_.reaper.hand_over(sandbox_.release());
    end_first_launch();
    auto populated = cgroup_.valid() ? cgroup_.populated() : Result<bool>(false);
    const bool stuck = !populated || *populated;
    for (const auto& process : processes()) {
        if (stuck) {
            process->leave_leaf();
        } else {
            (void)process->remove_leaf();
        }
    }
    if (stuck) {
        holder_cgroup_.leave();
        cgroup_.leave();
    }
    constexpr std::chrono::milliseconds kNoWait{0};
    if (first_leaf_ && !first_leaf_->remove(kNoWait)) first_leaf_->leave();
    first_leaf_.reset();
    if (!holder_cgroup_.remove(kNoWait)) holder_cgroup_.leave();
    holder_cgroup_ = Cgroup{};
    if (!cgroup_.remove(kNoWait)) cgroup_.leave();
    cgroup_ = Cgroup{};
    retire_limits(context_.io, std::move(limits_));
    // An ended session's record stays readable for the retention window (and a tombstone
    // longer); it must not hold descriptors meanwhile (issue 12: ~1.5 per ended session, held
    // 60 s, took a daemon ending hundreds a minute towards its descriptor limit). The file
    // service's root, the bound workdir and the sandbox's id-range lease go now; a request
    // still holding the file service keeps its own reference.
    files_.reset();
    bound_workdir_.reset();
    workdir_.host_fd = -1;
    context_.ports.release_all(id_);
    leased_.clear();
    // Before its "end" record: from then on only a missing marker tells a restart that a client
    // had this session (recovery).
    if (marker_left_) (void)remove_marker();
    (void)directory_.remove();
}

// Daemon teardown, with no event loop running: blocking waits are all there is, each bounded.
void Session::end_now() {
    if (state_ == SessionState::ended) return;
    if (state_ == SessionState::active) {
        end_reason_ = "shutdown";
        end_started_ = std::chrono::steady_clock::now();
        report_.id = id_;
        report_.end_reason = end_reason_;
    }
    state_ = SessionState::ending;
    on_ended_ = nullptr;  // the manager is tearing down its registry: no callbacks into it
    // Without the event loop nobody reaps: collect our children here. Zombies that are our
    // children keep a pid namespace's holder from exiting (it waits until its namespace is
    // reaped), and orphans reparented to us keep the cgroup populated. A p1 that waited for
    // nothing is such a child, of the launch worker's thread, which the walk does not see.
    end_waiting_child(first_launch_, context_.reaper);
    if (cgroup_.valid()) (void)cgroup_.kill_all();
    for (const auto& process : processes()) process->collect_exit_blocking();
    const auto deadline = std::chrono::steady_clock::now() + kKillBound;
    while (cgroup_.valid() && std::chrono::steady_clock::now() < deadline) {
        context_.reaper.reap_orphans();
        context_.reaper.reap_handed_over();  // p1 that waited, if the loop's end handed it over
        auto populated = cgroup_.populated();
        if (!populated || !*populated) break;
        (void)cgroup_.wait_until_empty(std::chrono::milliseconds(50));
    }
    if (sandbox_.active()) {
        sandbox_.begin_stop();
        while (!sandbox_.try_reap() && std::chrono::steady_clock::now() < deadline) {
            context_.reaper.reap_handed_over();
            pollfd holder{sandbox_.holder_pidfd(), POLLIN, 0};
            (void)::poll(&holder, 1, 50);
        }
    }
    for (const auto& process : processes()) process->shut_down();
    empty_reached_ = true;
    finalize();
}

void Session::forget_processes() {
    for (const auto& process : processes()) process->shut_down();
    processes_.clear();
    process_order_.clear();
}

}  // namespace corral
