#include "sessions/network/tcp_relay.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <boost/asio/write.hpp>
#include <utility>

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

/// How often a lingering relay looks whether the surviving peer has read everything.
constexpr std::chrono::milliseconds kLingerPoll{50};

/// Bytes queued on `socket` that its peer has not acknowledged yet (0 when unknown).
int unsent_bytes(tcp::socket& socket) {
    int unsent = 0;
    if (::ioctl(socket.native_handle(), SIOCOUTQ, &unsent) != 0) return 0;
    return unsent;
}

}  // namespace

TcpRelay::TcpRelay(tcp::socket a, tcp::socket b, size_t buffer_size, FinishedHandler on_finished)
    : a_(std::move(a)),
      b_(std::move(b)),
      linger_timer_(a_.get_executor()),
      deadline_timer_(a_.get_executor()),
      idle_timer_(a_.get_executor()),
      on_finished_(std::move(on_finished)) {
    a_to_b_.from = &a_;
    a_to_b_.to = &b_;
    b_to_a_.from = &b_;
    b_to_a_.to = &a_;
    a_to_b_.buffer.resize(buffer_size);
    b_to_a_.buffer.resize(buffer_size);
}

void TcpRelay::start() {
    // Bytes are relayed as they come; Nagle on the relay's sockets would add a round trip of
    // delay to every small interactive write (WebSocket frames, keystrokes).
    error_code ignored;
    a_.set_option(tcp::no_delay(true), ignored);
    b_.set_option(tcp::no_delay(true), ignored);
    pump(a_to_b_);
    pump(b_to_a_);
    if (idle_limit_.count() > 0) {
        last_read_ = std::chrono::steady_clock::now();
        watch_idle();
    }
}

// One timer per relay, re-armed only when it fires (not on every read): a busy relay pays a
// clock read per read, nothing more.
void TcpRelay::watch_idle() {
    idle_timer_.expires_at(last_read_ + idle_limit_);
    idle_timer_.async_wait([self = shared_from_this()](const error_code& error) {
        if (error || self->closed_) return;
        if (std::chrono::steady_clock::now() - self->last_read_ >= self->idle_limit_) {
            self->closed_idle_ = true;
            return self->close();
        }
        self->watch_idle();
    });
}

void TcpRelay::pump(Direction& direction) {
    auto self = shared_from_this();
    direction.from->async_read_some(boost::asio::buffer(direction.buffer),
                                    [self, &direction](const error_code& error, size_t length) {
                                        if (self->closed_) return;
                                        // EOF, or a reset: either way nothing more comes from this
                                        // source. What was read before has been written already
                                        // (one read at a time), so the half-close follows the last
                                        // byte.
                                        if (error) return self->on_source_end(direction);
                                        if (self->idle_limit_.count() > 0)
                                            self->last_read_ = std::chrono::steady_clock::now();
                                        if (direction.sink_failed)
                                            return self->pump(direction);  // drop, keep draining
                                        boost::asio::async_write(
                                            *direction.to,
                                            boost::asio::buffer(direction.buffer.data(), length),
                                            [self, &direction](const error_code& error, size_t) {
                                                if (self->closed_) return;
                                                if (error) {
                                                    direction.sink_failed = true;
                                                    self->settle();
                                                    if (self->closed_) return;
                                                }
                                                self->pump(direction);
                                            });
                                    });
}

void TcpRelay::on_source_end(Direction& direction) {
    direction.source_done = true;
    error_code ignored;
    if (!direction.sink_failed) direction.to->shutdown(tcp::socket::shutdown_send, ignored);
    settle();
}

void TcpRelay::settle() {
    if (closed_) return;
    if ((a_to_b_.sink_failed || b_to_a_.sink_failed) && !deadline_set_) {
        // Issue 10, red-team round 3: the linger below starts only once the other direction is
        // done, and it may never be: its write to a peer that stopped reading waits forever,
        // holding both sockets (a client that never reads keeps the relay). So the bound runs
        // from the first failure.
        deadline_set_ = true;
        lingering_ = true;
        linger_until_ = std::chrono::steady_clock::now() + linger_limit_;
        deadline_timer_.expires_at(linger_until_);
        deadline_timer_.async_wait([self = shared_from_this()](const error_code& error) {
            if (error || self->closed_) return;
            self->close();
        });
    }
    const bool a_done = a_to_b_.source_done || a_to_b_.sink_failed;
    const bool b_done = b_to_a_.source_done || b_to_a_.sink_failed;
    if (a_to_b_.source_done && b_to_a_.source_done) return close();
    if (a_to_b_.sink_failed && b_to_a_.sink_failed) return close();
    if (!a_done || !b_done) return;
    // One direction cannot deliver any more, the other has finished: the only thing left is
    // what the finished one queued for the peer that is still there (the failed direction's
    // source). Close once that peer has it; closing earlier would reset away its unread bytes.
    Direction& failed = a_to_b_.sink_failed ? a_to_b_ : b_to_a_;
    linger(*failed.from);
}

void TcpRelay::linger(tcp::socket& survivor) {
    if (closed_) return;
    if (!lingering_) {
        lingering_ = true;
        linger_until_ = std::chrono::steady_clock::now() + linger_limit_;
    }
    if (unsent_bytes(survivor) == 0 || std::chrono::steady_clock::now() >= linger_until_)
        return close();
    linger_timer_.expires_after(kLingerPoll);
    linger_timer_.async_wait([self = shared_from_this(), &survivor](const error_code& error) {
        if (error || self->closed_) return;
        self->linger(survivor);
    });
}

void TcpRelay::close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    linger_timer_.cancel();
    deadline_timer_.cancel();
    idle_timer_.cancel();
    a_.close(ignored);
    b_.close(ignored);
    if (auto handler = std::exchange(on_finished_, nullptr)) handler(*this);
}

}  // namespace corral
