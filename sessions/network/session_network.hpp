#pragma once
// The network side of one `network: isolated` session: a NetnsRunner inside the session's
// namespace (entered through the holder), one PortForwarder per leased port (host 127.0.0.1:P ->
// the namespace's 127.0.0.1:P), the forwarders of `network.allow`, and the HTTP egress proxy of
// `network.egress` with its gate (rules, refusal count). The Session owns one and
// stops it when the session ends, so no forwarder, listener, connection or namespace reference
// outlives the session.
//
// Threading: the daemon's io_context thread, like the Session.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "base/error.hpp"
#include "isolation/sandbox.hpp"
#include "policies/policy.hpp"
#include "sessions/network/dns_resolver.hpp"
#include "sessions/network/egress_gate.hpp"
#include "sessions/network/egress_proxy.hpp"
#include "sessions/network/http_proxy.hpp"
#include "sessions/network/netns_runner.hpp"
#include "sessions/network/port_forwarder.hpp"
#include "sessions/network/port_waiter.hpp"
#include "sessions/network/transparent_relay.hpp"

namespace corral {

/// What a previous run of the daemon left in a session's namespace (a re-adopted session).
struct NetworkLeftovers {
    /// The proxy's port inside: the session's processes were given it in HTTP_PROXY, so the
    /// new proxy listens there again when it can.
    uint16_t proxy_port = 0;
    /// The egress rules that run had in force: its routes and nftables table are replaced.
    std::optional<EgressSpec> egress;
};

/// Forwarders and egress proxy of one isolated session.
class SessionNetwork {
  public:
    /// Enters the network namespace of `sandbox`'s holder, starts the forwarders of
    /// `policy.network.allow` and the HTTP egress proxy with `policy.network.egress`. Call only
    /// for policies with namespaces.network == isolated. `leftovers`: the namespace was served
    /// by a previous run of the daemon (a re-adopted session).
    static Result<std::unique_ptr<SessionNetwork>> create(
        boost::asio::io_context& io, const Sandbox& sandbox, const Policy& policy,
        const std::string& session_id, EgressEnvironment egress,
        const std::optional<NetworkLeftovers>& leftovers = std::nullopt);
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

    /// Replaces the egress rules for every new connection (open ones keep going). EINVAL naming
    /// the bad entry; nothing changes then.
    Status set_egress(const EgressSpec& spec);
    /// The egress record: rules in force, refusals, proxy port (0 once stopped).
    EgressInfo egress_info() const;
    /// The proxy's port inside the namespace; 0 when stopped.
    uint16_t proxy_port() const { return http_proxy_ ? http_proxy_->port() : 0; }

    /// The DNS resolver's port inside the namespace (53); 0 when stopped or not serving.
    uint16_t dns_port() const { return resolver_ ? resolver_->port() : 0; }

    /// Internal: use create().
    SessionNetwork(boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns);

  private:
    void log(const std::string& line) const;
    /// The resolver answered `addresses` for allowed `name`: allow them for `lifetime` and open
    /// them in the namespace (before the answer goes out), closing the expired ones.
    void grant_names(const std::string& name, bool pinned, const std::vector<IpAddress>& addresses,
                     std::chrono::seconds lifetime);
    /// Closes the allowances expired by now in the namespace and arms the timer for the next
    /// one: an address opened for a name closes at TTL + grace without any further traffic.
    void close_expired();
    /// (Re)arms expiry_timer_ for the table's next expiry; cancels it when the table is empty.
    void schedule_expiry();
    /// Closes `addresses` (no allowance left) in the namespace, logging a failure with `why`.
    void close_named(const std::vector<IpAddress>& addresses, const std::string& why);

    boost::asio::io_context& io_;
    std::shared_ptr<NetnsRunner> netns_;
    std::map<uint16_t, std::unique_ptr<PortForwarder>> forwarders_;
    std::unique_ptr<EgressProxy> egress_;
    std::vector<std::string> allow_;  ///< network.allow, compiled into every rule set
    std::shared_ptr<EgressGate> gate_;
    std::unique_ptr<HttpEgressProxy> http_proxy_;
    std::unique_ptr<TransparentRelay> transparent_;  ///< null where nftables is unavailable
    std::string transparent_error_;  ///< why transparent_ is null (for the record)
    std::unique_ptr<SessionResolver> resolver_;  ///< null when 127.0.0.1:53 could not be bound
    EgressEnvironment environment_;
    boost::asio::steady_timer expiry_timer_;
    std::optional<std::chrono::steady_clock::time_point> expiry_armed_;  ///< what it waits for
    /// Dies with this object: a timer handler already queued when it went finds it expired.
    std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace corral
