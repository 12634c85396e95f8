#pragma once
// Joins two connected TCP sockets and copies bytes both ways, unchanged, until both directions
// are done. Used by the port forwarder (host -> session namespace) and the egress proxy (session
// namespace -> host), so anything that runs over TCP passes: HTTP, WebSocket upgrades,
// long-lived streams.
//
// Each direction has one bounded buffer and reads again only after the previous bytes are fully
// written (backpressure: a slow reader slows the writer down instead of growing the daemon's
// memory). A direction that reads EOF half-closes the other socket (shutdown(SHUT_WR)), so a
// client that finishes sending can still read the reply. Any error closes both sockets.
//
// Runs on one Asio io_context thread; every member must be called on it.

#include <boost/asio/ip/tcp.hpp>
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

  private:
    struct Direction {
        std::vector<char> buffer;
        bool finished = false;
    };
    void pump(boost::asio::ip::tcp::socket& from, boost::asio::ip::tcp::socket& to,
              Direction& direction);
    void on_read_end(boost::asio::ip::tcp::socket& to, Direction& direction);

    boost::asio::ip::tcp::socket a_;
    boost::asio::ip::tcp::socket b_;
    Direction a_to_b_;
    Direction b_to_a_;
    FinishedHandler on_finished_;
    bool closed_ = false;
};

}  // namespace corral
