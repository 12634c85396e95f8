// Watching a running process on the event loop: output pipes, the pidfd (exit status), the
// command timeout, and turning all of that into one final record.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <memory>

#include "base/loop_scratch.hpp"
#include "sessions/child_reaper.hpp"
#include "sessions/process.hpp"

namespace corral {
namespace {

constexpr size_t kBytesPerTurn = 1 << 20;  // from one pipe, then other handlers get a turn
// How long a record waits for EOF after the main process exited, for descendants that hold the
// pipes (`cmd &`). A `run` of such a command returns after this; later output is still kept.
constexpr std::chrono::milliseconds kSettleWindow{500};
// Refused calls answered per turn of the loop: a sandbox flooding them waits in the kernel
// while other handlers run, instead of holding the loop.
constexpr size_t kRefusalsPerTurn = 64;

}  // namespace

void Process::start_watching() {
    // The first reads wait for the loop's next turn, so whoever started the process (an exec
    // stream) can attach its follower first: read at once, a fast writer's first bytes beyond
    // the output cap were read, and dropped, before the stream could hold the writer back.
    for (OutputStream stream : {OutputStream::out, OutputStream::err})
        boost::asio::post(io_, [self = shared_from_this(), stream] { self->read_more(stream); });
    watch_exit();
    watch_refusals();
    arm_timeout();
    if (setup_.stdin_data) {
        write_stdin(std::move(*setup_.stdin_data), !setup_.stdin_open, [](Status) {});
        setup_.stdin_data.reset();
    }
}

// The daemon reads even when nobody listens: the OutputBuffer keeps the latest bytes within the
// cap and counts what it dropped, so the process never blocks on a full pipe (unless a live
// stream follows it: room_to_read). Reads until the pipe is empty before waiting for it again —
// asio's epoll is edge-triggered — and yields to other work after kBytesPerTurn. Once the ring
// has grown to its cap, the pipe is read straight into it (OutputBuffer::room): one copy, the
// kernel's, instead of a read into scratch and a copy into the ring (issue 18).
void Process::read_more(OutputStream stream) {
    StreamReader& source = reader(stream);
    for (size_t taken = 0; source.pipe.is_open();) {
        const size_t room = room_to_read(stream);
        if (room == 0) {
            source.paused = true;  // resume_reading() goes on once the follower caught up
            return;
        }
        if (taken >= kBytesPerTurn) {
            boost::asio::post(io_,
                              [self = shared_from_this(), stream] { self->read_more(stream); });
            return;
        }
        const size_t want = std::min(room, kBytesPerTurn - taken);
        const OutputBuffer::Room in_place = source.buffer.room(want);
        const std::span<std::byte> scratch = loop_scratch();
        const ssize_t n = in_place.count > 0
                              ? ::readv(source.pipe.native_handle(), in_place.parts, in_place.count)
                              : ::read(source.pipe.native_handle(), scratch.data(),
                                       std::min(scratch.size(), want));
        if (n > 0) {
            if (in_place.count > 0) {
                source.buffer.commit(static_cast<size_t>(n));
            } else {
                source.buffer.append(std::string_view(reinterpret_cast<const char*>(scratch.data()),
                                                      static_cast<size_t>(n)));
            }
            taken += static_cast<size_t>(n);
            notify_output();
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            source.pipe.async_wait(
                boost::asio::posix::descriptor_base::wait_read,
                [self = shared_from_this(), stream](const boost::system::error_code& error) {
                    if (error == boost::asio::error::operation_aborted) return;  // shut down
                    self->read_more(stream);
                });
            return;
        }
        // End of file (every writer is gone) or a read error: the stream is complete.
        boost::system::error_code ignored;
        source.pipe.close(ignored);
        source.eof = true;
        notify_output();
        maybe_finish();
        return;
    }
}

// The listener is readable while refused calls wait for an answer, and hangs up once no process
// uses the filter any more. Like the pipes (edge-triggered epoll), it is served until nothing is
// queued before waiting again; after kRefusalsPerTurn answers the rest waits for a later turn.
void Process::watch_refusals() {
    if (!refusals_ || !refusals_->attached()) return;
    const int duplicate = ::fcntl(refusals_->fd(), F_DUPFD_CLOEXEC, 0);
    if (duplicate < 0) return;  // not watched: its calls wait until the record goes (ENOSYS)
    refusal_watch_.assign(duplicate);
    serve_refusals();
}

void Process::serve_refusals() {
    if (!refusals_ || !refusal_watch_.is_open()) return;
    const size_t answered = refusals_->serve(kRefusalsPerTurn);
    if (refusals_->hung_up()) {
        boost::system::error_code ignored;
        refusal_watch_.close(ignored);
        refusals_->close();
        return;
    }
    if (answered == kRefusalsPerTurn) {
        boost::asio::post(io_, [self = shared_from_this()] { self->serve_refusals(); });
        return;
    }
    refusal_watch_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                              [self = shared_from_this()](const boost::system::error_code& error) {
                                  if (error) return;  // shut down
                                  self->serve_refusals();
                              });
}

// A pidfd becomes readable when the process exits; waitid(P_PIDFD) then reaps it with its status.
// Asio owns (and closes) the descriptor it is given, so it gets a duplicate.
void Process::watch_exit() {
    if (!exit_watch_.is_open()) {
        const int duplicate = ::fcntl(main_.pidfd(), F_DUPFD_CLOEXEC, 0);
        if (duplicate < 0) {
            on_main_exit(std::nullopt);
            return;
        }
        exit_watch_.assign(duplicate);
    }
    exit_watch_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                           [self = shared_from_this()](const boost::system::error_code& error) {
                               if (error) return;  // shut down
                               auto status = self->main_.try_wait();
                               if (!status) {
                                   self->on_main_exit(std::nullopt);
                               } else if (!*status) {
                                   self->watch_exit();  // spurious wake-up
                               } else {
                                   self->on_main_exit(**status);
                               }
                           });
}

void Process::on_main_exit(std::optional<WaitStatus> status) {
    if (main_status_ || main_status_lost_) return;
    settle_launch_at_exit();  // a failure it reported just before it exited is its record
    if (status) {
        main_status_ = *status;
    } else {
        main_status_lost_ = true;
    }
    ended_ = std::chrono::steady_clock::now();
    boost::system::error_code ignored;
    exit_watch_.close(ignored);
    reaper_.remove_owned(main_.pid());
    main_.close_pidfd();  // reaped (or lost): nothing can be waited for or signalled any more
    if (terminating_ && leaf_populated()) (void)terminate_leaf();  // forked during the SIGTERM
    if (!(out_.eof && err_.eof)) arm_settle();
    maybe_finish();
}

// Output still open after the main process exited: descendants hold the pipes, or a follower's
// backpressure left bytes in them. Only the first may cut the record short.
void Process::arm_settle() {
    settle_timer_.expires_after(kSettleWindow);
    settle_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
        if (error || self->finished_) return;
        if (self->reading_paused()) {
            self->arm_settle();
            return;
        }
        self->finish();
    });
}

void Process::collect_exit_blocking() {
    if (!main_running()) return;
    auto status = main_.wait();
    on_main_exit(status ? std::optional<WaitStatus>(*status) : std::nullopt);
}

void Process::arm_timeout() {
    if (!setup_.timeout || setup_.timeout->count() <= 0) return;
    timeout_timer_.expires_after(*setup_.timeout);
    timeout_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
        if (!error) self->on_timeout();
    });
}

// Timeout: SIGTERM to the whole leaf, the grace period, then cgroup.kill.
void Process::on_timeout() {
    if (finished_ || !main_running()) return;
    timed_out_ = true;
    (void)begin_graceful_end();
}

// SIGTERM to the whole leaf, then cgroup.kill when the grace period runs out. Shared by the
// timeout and a graceful stop (DELETE without force) so both mark the leaf as terminating: a
// `sh -c` that forks just as the SIGTERM comes dies and its newcomer gets its SIGTERM too
// (on_main_exit), instead of running unsignalled for the whole grace period (issue 12.6).
size_t Process::begin_graceful_end() {
    const size_t signalled = terminate_leaf();
    grace_timer_.expires_after(setup_.grace);
    grace_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
        if (error || !self->leaf_.valid()) return;
        self->leaf_killed_ = true;
        (void)self->leaf_.kill_all();
    });
    return signalled;
}

void Process::maybe_finish() {
    if (finished_ || !(main_status_ || main_status_lost_)) return;
    if (out_.eof && err_.eof) finish();
}

// The evidence of a limit hit is the leaf's own counters where its cgroup has them (v2 with
// controllers); otherwise (the v1 backend on hybrid hosts, whose counters are session-wide) an
// increase of the session's counters while this process ran is the best evidence available. The
// counts go into the record's usage, so `status` and `usage` tell the same story.
void Process::attribute_limit_events() {
    if (setup_.read_limit_events && final_usage_.oom_kills == 0 &&
        final_usage_.pids_limit_hits == 0) {
        const LimitEvents now = setup_.read_limit_events();
        if (now.oom_kills > events_at_start_.oom_kills)
            final_usage_.oom_kills = now.oom_kills - events_at_start_.oom_kills;
        if (now.pids_limit_hits > events_at_start_.pids_limit_hits)
            final_usage_.pids_limit_hits = now.pids_limit_hits - events_at_start_.pids_limit_hits;
    }
}

ExitReason Process::classify() const {
    // Not our child: how it ended is unknowable, unless this run ended it.
    if (adopted_) {
        if (timed_out_) return ExitReason::timeout;
        return killed_by_request_ ? ExitReason::killed : ExitReason::unknown;
    }
    // It never reached execve (process_launch.cpp): how its setup ended is the record.
    if (!setup_error_.empty()) return ExitReason::setup_failed;
    if (main_status_lost_) return killed_by_request_ ? ExitReason::killed : ExitReason::signaled;
    EndingContext context;
    context.timed_out = timed_out_;
    context.killed_by_request = killed_by_request_;
    context.oom_event = final_usage_.oom_kills > 0;
    context.pids_limit_hit = final_usage_.pids_limit_hits > 0;
    return classify_exit(*main_status_, context);
}

// Usage is read from the leaf before it is removed. A leaf that still holds descendants stays
// until they are gone (watch_lingering_leaf) or the session ends, unless the whole leaf was
// killed: then its last processes are already dying and remove() waits the moment it takes.
void Process::finish() {
    if (finished_) return;
    finished_ = true;
    settle_timer_.cancel();
    timeout_timer_.cancel();
    launch_timer_.cancel();
    if (leaf_.valid()) {
        if (auto usage = leaf_.usage()) final_usage_ = *usage;
    }
    attribute_limit_events();
    reason_ = classify();
    if (leaf_killed_) grace_timer_.cancel();  // nothing in the leaf survives cgroup.kill
    if (remove_empty_leaf()) {
        grace_timer_.cancel();
    } else if (!leaf_populated()) {
        grace_timer_.cancel();
        (void)remove_leaf();
    } else {
        watch_lingering_leaf();  // removed the moment it is empty, never waited for here
    }
    if (stdin_queue_.empty()) close_stdin();
    launch_settled();  // died before execve: the spawn answers with the final record
    notify_exit();
    notify_output();
    if (on_finish_) on_finish_(*this);
}

// Descendants that outlive the main process (`cmd &`, or a child still dying of the same
// SIGTERM) keep its leaf populated; the leaf goes as soon as it is empty. asio's epoll is
// edge-triggered, so each change of cgroup.events wakes the wait once without re-reading it.
void Process::watch_lingering_leaf() {
    if (!leaf_.valid()) return;
    if (!leaf_watch_.is_open()) {
        auto fd = leaf_.watch_events();
        if (!fd) return;  // the session's end removes it
        boost::system::error_code error;
        leaf_watch_.assign(fd->get(), error);
        if (error) return;
        (void)fd->release();
    }
    leaf_watch_.async_wait(boost::asio::posix::descriptor_base::wait_error,
                           [self = shared_from_this()](const boost::system::error_code& error) {
                               if (error) return;  // closed: removed or shut down
                               self->watch_lingering_leaf();
                           });
    // Checked after arming, so an emptying between the two still wakes the wait; the check
    // reads through a fresh descriptor, so the watched one keeps its pending notification.
    if (!leaf_populated()) (void)remove_leaf();
}

void Process::post(std::shared_ptr<bool> alive, std::function<void()> fn) {
    boost::asio::post(io_, [alive = std::move(alive), fn = std::move(fn)] {
        if (*alive) fn();
    });
}

void Process::notify_output() {
    std::vector<OutputWaiter> waiting;
    waiting.swap(output_waiters_);
    for (auto& waiter : waiting) {
        if (!*waiter.alive) continue;
        const bool ready = finished_ || out_.buffer.total_written() > waiter.stdout_offset ||
                           err_.buffer.total_written() > waiter.stderr_offset;
        if (ready) {
            post(waiter.alive, std::move(waiter.handler));
        } else {
            output_waiters_.push_back(std::move(waiter));
        }
    }
}

void Process::notify_exit() {
    auto waiting = std::move(exit_waiters_);
    exit_waiters_.clear();
    for (auto& waiter : waiting) {
        if (waiter->timer) waiter->timer->cancel();
        if (waiter->fired || !*waiter->alive) continue;
        waiter->fired = true;
        post(waiter->alive, [handler = std::move(waiter->handler)] { handler(true); });
    }
}

std::shared_ptr<bool> Process::wait_output(uint64_t stdout_offset, uint64_t stderr_offset,
                                           std::function<void()> handler) {
    auto alive = std::make_shared<bool>(true);
    output_waiters_.push_back(
        OutputWaiter{alive, stdout_offset, stderr_offset, std::move(handler)});
    notify_output();
    return alive;
}

std::shared_ptr<bool> Process::wait_exit(std::optional<Millis> timeout,
                                         std::function<void(bool)> handler) {
    auto alive = std::make_shared<bool>(true);
    if (finished_) {
        post(alive, [handler = std::move(handler)] { handler(true); });
        return alive;
    }
    auto waiter = std::make_shared<ExitWaiter>();
    waiter->alive = alive;
    waiter->handler = std::move(handler);
    if (timeout) {
        waiter->timer = std::make_unique<boost::asio::steady_timer>(io_, *timeout);
        waiter->timer->async_wait([waiter](const boost::system::error_code& error) {
            if (error || waiter->fired || !*waiter->alive) return;
            waiter->fired = true;
            waiter->handler(false);
        });
    }
    exit_waiters_.push_back(waiter);
    return alive;
}

}  // namespace corral
