#pragma once
// Forwards TCP connections from a listening socket to a target address, byte-transparent
// (TcpRelay), on the daemon's io_context. The listening socket and the outgoing sockets may live
// in different network namespaces: that is the whole point.
//
//   into_namespace(): the host's 127.0.0.1:P -> the session namespace's 127.0.0.1:P (or [::1]:P,
//                     for servers that bind "localhost" as IPv6 only). Outgoing sockets are made
//                     by the session's NetnsRunner.
//   out_of_namespace(): a listener inside the session namespace -> a host address (the egress
//                     proxy). The listener is made by the NetnsRunner, outgoing sockets on the
//                     loop's thread, in the host namespace.
//
// When the target refuses (nothing listens inside yet), the accepted connection is closed: the
// client sees EOF, as it would connecting to a closed port through a proxy. stop() closes the
// listener and every connection, so a session that ends mid-connection leaves no client hanging.
//
// Threading: one io_context thread; create, stop and destroy on it (or while the loop is not
// running). The NetnsRunner is called synchronously from the loop, for socket() only.

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "sessions/network/netns_runner.hpp"

namespace corral {

/// Makes the outgoing socket for one forwarded connection, in whichever namespace it belongs.
using SocketMaker = std::function<Result<UniqueFd>(int family)>;

/// One listener forwarded to one target (tried in order of a list of addresses).
class PortForwarder {
  public:
    /// Bytes buffered per direction per connection.
    static constexpr size_t kBufferSize = 32 * 1024;

    /// Forwards connections accepted on `listener` (bound, listening) to the first of `targets`
    /// that accepts, with outgoing sockets from `make_socket`.
    static Result<std::unique_ptr<PortForwarder>> create(boost::asio::io_context& io,
                                                         UniqueFd listener, SocketMaker make_socket,
                                                         std::vector<SocketAddress> targets);
    /// Host 127.0.0.1:`host_port` -> the namespace's 127.0.0.1:`inside_port` (then [::1]).
    static Result<std::unique_ptr<PortForwarder>> into_namespace(boost::asio::io_context& io,
                                                                 std::shared_ptr<NetnsRunner> netns,
                                                                 uint16_t host_port,
                                                                 uint16_t inside_port);
    /// The namespace's `inside` -> the host's `host_target`.
    static Result<std::unique_ptr<PortForwarder>> out_of_namespace(
        boost::asio::io_context& io, const std::shared_ptr<NetnsRunner>& netns,
        const SocketAddress& inside, const SocketAddress& host_target);

    /// stop().
    ~PortForwarder();
    PortForwarder(const PortForwarder&) = delete;
    PortForwarder& operator=(const PortForwarder&) = delete;

    /// Closes the listener (the port refuses from now on) and every open connection. Idempotent.
    void stop();
    /// The port the listener is bound to.
    uint16_t listen_port() const { return listen_port_; }
    /// Connections being relayed (or connecting) now.
    size_t connection_count() const;
    /// Connections accepted since creation.
    uint64_t accepted_count() const;

  private:
    struct State;
    explicit PortForwarder(std::shared_ptr<State> state, uint16_t port);

    std::shared_ptr<State> state_;
    uint16_t listen_port_ = 0;
};

}  // namespace corral
