#pragma once
// Joins two connected TCP sockets and copies bytes both ways, unchanged, until both directions
// are done. Used by the port forwarder (host -> session namespace) and the egress proxy (session
// namespace -> host), so anything that runs over TCP passes: HTTP, WebSocket upgrades,
// long-lived streams.
//
// Each direction has one bounded buffer and reads again only after the previous bytes are fully
// written (backpressure: a slow reader slows the writer down instead of growing the daemon's
// memory). The two directions end independently (issue 10, item 9: a server that writes and
// closes right away must not lose what it wrote):
//   - a direction whose source reads EOF (or a reset) half-closes its destination
//     (shutdown(SHUT_WR)) after every byte it read has been written, and is done;
//   - a direction whose destination fails to take bytes (the peer closed or reset) keeps reading
//     its source and drops what it reads, so the source socket never holds unread bytes: closing
//     a socket with unread bytes sends a reset, and a reset throws away what the other direction
//     queued for that peer and the peer has not read yet;
//   - both sockets close once both directions are done; or, when one direction can deliver
//     nothing more and the other is done, once the kernel has handed over everything queued for
//     the surviving peer (its send queue is empty, bounded by kLingerLimit);
//   - kLingerLimit after the first destination failed, the relay closes whatever else is still
//     pending: the other direction may be blocked writing to a client that never reads.
//
// Runs on one Asio io_context thread; every member must be called on it.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

namespace corral {

/// Two connected sockets relayed into each other.
class TcpRelay : public std::enable_shared_from_this<TcpRelay> {
  public:
    /// Called once with this relay, when it has closed both sockets (done, failed or closed).
    using FinishedHandler = std::function<void(TcpRelay&)>;

    /// How long a relay that can deliver nothing more waits for a peer to read what is queued
    /// for it before closing anyway.
    static constexpr std::chrono::seconds kLingerLimit{30};

    /// `a` and `b` must belong to the same io_context; `b` may still be connecting (start() is
    /// called once it is connected). `buffer_size` bytes per direction.
    TcpRelay(boost::asio::ip::tcp::socket a, boost::asio::ip::tcp::socket b, size_t buffer_size,
             FinishedHandler on_finished);

    /// Socket `b`, for the caller to connect before start().
    boost::asio::ip::tcp::socket& second() { return b_; }
    /// Begins copying both ways.
    void start();
    /// Closes both sockets now (idempotent): the peers see EOF, or RST where unread data was
    /// pending. Pending operations complete with operation_aborted and do nothing.
    void close();
    /// True once close() ran (explicitly, on error, or after both directions finished).
    bool closed() const { return closed_; }
    /// Replaces kLingerLimit for this relay (before start(); tests use a short one).
    void set_linger_limit(std::chrono::milliseconds limit) { linger_limit_ = limit; }
    /// Closes the relay once no byte has been read from either side for `limit` (before
    /// start(); zero, the default: never). Egress tunnels use it so that connections the
    /// sandbox forgot do not hold the daemon's sockets forever.
    void set_idle_limit(std::chrono::milliseconds limit) { idle_limit_ = limit; }
    /// True when the idle limit closed it.
    bool closed_idle() const { return closed_idle_; }

  private:
    struct Direction {
        boost::asio::ip::tcp::socket* from = nullptr;
        boost::asio::ip::tcp::socket* to = nullptr;
        std::vector<char> buffer;
        bool source_done = false;  ///< `from` read EOF or failed: nothing more to copy
        bool sink_failed = false;  ///< `to` refused bytes: what `from` sends is dropped
    };
    void pump(Direction& direction);
    void on_source_end(Direction& direction);
    /// Closes when nothing more can happen; starts the linger wait when only queued bytes remain.
    void settle();
    void linger(boost::asio::ip::tcp::socket& survivor);
    void watch_idle();

    boost::asio::ip::tcp::socket a_;
    boost::asio::ip::tcp::socket b_;
    Direction a_to_b_;
    Direction b_to_a_;
    boost::asio::steady_timer linger_timer_;
    /// Runs from the first sink failure: whatever the other direction still waits for (a write
    /// to a peer that never reads), the relay closes by then.
    boost::asio::steady_timer deadline_timer_;
    std::chrono::milliseconds linger_limit_{kLingerLimit};
    boost::asio::steady_timer idle_timer_;
    std::chrono::milliseconds idle_limit_{0};
    std::chrono::steady_clock::time_point last_read_{};
    bool closed_idle_ = false;
    std::chrono::steady_clock::time_point linger_until_{};
    bool lingering_ = false;
    bool deadline_set_ = false;
    FinishedHandler on_finished_;
    bool closed_ = false;
};

}  // namespace corral
