#pragma once
// The network side of one `network: isolated` session: a NetnsThread inside the session's
// namespace (entered through the holder), one PortForwarder per leased port (host 127.0.0.1:P ->
// the namespace's 127.0.0.1:P) and the egress proxy of `network.allow`. The Session owns one and
// stops it when the session ends, so no forwarder, listener, connection or namespace reference
// outlives the session.
//
// Threading: the daemon's io_context thread, like the Session.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "base/error.hpp"
#include "isolation/sandbox.hpp"
#include "policies/policy.hpp"
#include "sessions/network/egress_proxy.hpp"
#include "sessions/network/netns_thread.hpp"
#include "sessions/network/port_forwarder.hpp"
#include "sessions/network/port_waiter.hpp"

namespace corral {

/// Forwarders and egress proxy of one isolated session.
class SessionNetwork {
  public:
    /// Enters the network namespace of `sandbox`'s holder and starts the egress proxy for
    /// `policy.network.allow`. Call only for policies with namespaces.network == isolated.
    static Result<std::unique_ptr<SessionNetwork>> create(boost::asio::io_context& io,
                                                          const Sandbox& sandbox,
                                                          const Policy& policy);
    /// stop().
    ~SessionNetwork();

    /// Forwards the host's 127.0.0.1:`port` to the namespace's 127.0.0.1:`port` (then [::1]).
    /// Forwarding a port twice is harmless.
    Status forward(uint16_t port);
    /// Stops forwarding `port` (its open connections close). Harmless when not forwarded.
    void unforward(uint16_t port);
    /// True while `port` is forwarded.
    bool forwarding(uint16_t port) const { return forwarders_.count(port) != 0; }
    /// Waits until something inside the namespace accepts connections on `port`.
    PortWait wait_for_port(uint16_t port, std::chrono::milliseconds timeout,
                           PortWait::Handler handler);
    /// Stops every forwarder and the egress proxy and leaves the namespace (idempotent).
    void stop();

    /// Internal: use create().
    SessionNetwork(boost::asio::io_context& io, std::shared_ptr<NetnsThread> netns);

  private:
    boost::asio::io_context& io_;
    std::shared_ptr<NetnsThread> netns_;
    std::map<uint16_t, std::unique_ptr<PortForwarder>> forwarders_;
    std::unique_ptr<EgressProxy> egress_;
};

}  // namespace corral
