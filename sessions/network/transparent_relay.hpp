#pragma once
// The transparent egress path of one isolated session: TCP from programs that ignore the proxy
// variables (git over ssh, database clients, anything with its own sockets).
//
// The namespace routes every IPv4 address to `lo`; nftables answers SYNs to what the rules do not
// open (deniedCIDRs, protected ranges, anything not allowed) with a reset there (ECONNREFUSED at
// connect()) and logs each to NFLOG, where this relay's RefusalLog hears it, so it is counted and
// logged like any refusal; the rest it redirects to this relay's listener at 127.0.0.1:<port>
// inside (netns_routing.hpp). The relay reads where each connection was going (SO_ORIGINAL_DST),
// judges that address again with the session's current EgressRules — the authoritative check: rules
// the sandbox might rewrite inside its own namespace can only send it more work, never more reach —
// and connects from the daemon's namespace, then relays bytes unchanged. A connection refused
// here is reset (the program sees ECONNRESET) and counted and logged like a proxy refusal.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "base/error.hpp"
#include "sessions/network/egress_gate.hpp"
#include "sessions/network/netns_routing.hpp"
#include "sessions/network/netns_runner.hpp"

namespace corral {

/// One session's transparent TCP relay and the namespace rules that feed it.
class TransparentRelay {
  public:
    /// Listens inside `netns` and applies the routes and nftables rules for the gate's rules.
    /// `left_by` (a namespace a previous run of the daemon served): the rules that run had in
    /// force; its nftables table and routes are replaced, whatever the gate's rules are now.
    static Result<std::unique_ptr<TransparentRelay>> start(
        boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns,
        std::shared_ptr<EgressGate> gate, size_t max_connections = 256,
        const std::optional<EgressSpec>& left_by = std::nullopt);
    /// stop().
    ~TransparentRelay();
    /// Re-plans routes and nftables rules for `spec` (after the gate's rules changed); the
    /// name-bound addresses of the gate's allowances stay open.
    Status apply(const EgressSpec& spec);
    /// Opens `added` and closes `removed` name-bound addresses in the namespace (after the DNS
    /// resolver granted allowances or the table dropped them). No-op while the plan has no
    /// `name_bound` set (deny-all, custom without allowedHosts): the relay would refuse them.
    Status change_named(const std::vector<IpAddress>& added, const std::vector<IpAddress>& removed);
    /// The relay listener's port inside the namespace.
    uint16_t port() const { return port_; }
    /// Closes the listener and every relayed connection (idempotent).
    void stop();
    /// Connections being relayed or connected now.
    size_t connection_count() const;

    struct State;
    /// Internal: use start().
    TransparentRelay(std::shared_ptr<State> state, std::shared_ptr<NetnsRunner> netns,
                     uint16_t port);

  private:
    std::shared_ptr<State> state_;
    std::shared_ptr<NetnsRunner> netns_;
    uint16_t port_ = 0;
    TransparentPlan applied_;
};

}  // namespace corral
