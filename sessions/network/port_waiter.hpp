#pragma once
// Waits until something accepts TCP connections on a port, as seen from inside a session (its
// network namespace through a NetnsRunner's sockets, or the host's for `network: host`).
//
// Each attempt is a non-blocking connect on the daemon's loop with a socket made where the
// session lives; a refused attempt is retried after a backoff (5 ms doubling to 250 ms) on an
// Asio timer, so the loop is never blocked. A successful attempt's connection is closed at once:
// the server sees one connection that ends without data.
//
// Threading: one io_context thread; start and cancel on it. The handler is always posted, never
// invoked from within wait_for_port().

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include "base/error.hpp"
#include "sessions/network/netns_runner.hpp"
#include "sessions/network/port_forwarder.hpp"

namespace corral {

/// A pending wait; destroying it (or cancel()) cancels it: the handler is then not called.
class PortWait {
  public:
    /// Called once: ok when a connection was accepted; ETIMEDOUT naming the port and the last
    /// connect error when time ran out; another error when no socket could be made (the session
    /// ended: ESHUTDOWN).
    using Handler = std::function<void(Status)>;
    struct State;

    explicit PortWait(std::shared_ptr<State> state) : state_(std::move(state)) {}
    PortWait(PortWait&&) noexcept = default;
    PortWait& operator=(PortWait&& other) noexcept;
    ~PortWait() { cancel(); }
    /// Cancels the wait (idempotent).
    void cancel();
    /// Lets the wait run to its end (success, error or timeout; the timeout bounds it) without
    /// this handle: the handler will still be called.
    void detach() { state_.reset(); }

  private:
    std::shared_ptr<State> state_;
};

/// Starts waiting for any of `targets` (tried in order per round: 127.0.0.1:P then [::1]:P).
PortWait wait_for_port(boost::asio::io_context& io, SocketMaker make_socket,
                       std::vector<SocketAddress> targets, std::chrono::milliseconds timeout,
                       PortWait::Handler handler);

/// wait_for_port on 127.0.0.1:`port` and [::1]:`port` inside `netns`.
PortWait wait_for_port_in_namespace(boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns,
                                    uint16_t port, std::chrono::milliseconds timeout,
                                    PortWait::Handler handler);

}  // namespace corral
