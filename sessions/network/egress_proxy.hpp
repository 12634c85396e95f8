#pragma once
// The egress allow-list of an isolated session (policy `network.allow`, "host:port" entries).
//
// A session's network namespace has only `lo`, so nothing outside is reachable from it. For each
// allowed host loopback destination, the daemon listens inside the namespace at the same address
// and port and forwards every connection out to the host's address:port (PortForwarder,
// out_of_namespace). A process inside connects to 127.0.0.1:5432 as if the host's database were
// local; any other destination stays unreachable.
//
// Only host loopback destinations can be allowed (127.0.0.0/8, ::1, "localhost" meaning
// 127.0.0.1): the daemon exposes services of its own host, it is not a general egress gateway.

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include "base/error.hpp"
#include "policies/egress_destination.hpp"
#include "sessions/network/netns_runner.hpp"
#include "sessions/network/port_forwarder.hpp"

namespace corral {

/// Listeners inside one namespace, one per allowed destination, forwarded to the host.
class EgressProxy {
  public:
    /// Parses `allow` and starts one forwarder per entry (duplicates collapse). Fails, with
    /// nothing left running, when an entry is invalid or its address:port cannot be bound inside.
    static Result<std::unique_ptr<EgressProxy>> start(boost::asio::io_context& io,
                                                      const std::shared_ptr<NetnsRunner>& netns,
                                                      const std::vector<std::string>& allow);
    /// Stops every forwarder: the listeners inside close, open connections are closed.
    void stop();
    /// Destinations served, in allow-list order.
    const std::vector<SocketAddress>& destinations() const { return destinations_; }
    /// Connections being relayed now, over all destinations.
    size_t connection_count() const;

  private:
    std::vector<SocketAddress> destinations_;
    std::vector<std::unique_ptr<PortForwarder>> forwarders_;
};

}  // namespace corral
